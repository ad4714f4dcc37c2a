package synth

// User-space vocabulary: the executables and libraries of a plausible
// Kubernetes node (Debian-based images, python:3.11 images, Go services),
// leaf call chains into those libraries, and the programs that run them.
//
// Chain syntax, root to leaf, elements separated by ";":
//
//	alias:function        native frame in the mapping named by alias ("exe" = the program's executable)
//	P:function@file:line  CPython frame
//	G:function@file:line  Go frame in the program's executable
//
// A chain may end in "|class", naming the system call it enters (see
// syscallClasses); a "!" before a function marks where a uprobe can fire.
// File names may use %G (Go root), %M (Go module cache), %A (the program's
// source root), %P (its Go module path), %N (its name), %L (Python stdlib)
// and %S (Python site-packages).

type mapClass uint8

const (
	mapLib    mapClass = iota // shared library: file VAs from FileOffset
	mapExe                    // PIE executable: file VAs from FileOffset
	mapGo                     // statically linked, non-PIE Go binary: file VA = VA
	mapVDSO                   // the vDSO
	mapKernel                 // vmlinux or a module: kernel addresses
)

type mappingDef struct {
	alias string
	file  string
	path  string
	class mapClass
	size  uint64 // text size
	// gnuID says whether a Go binary also carries a GNU build id (external
	// linking); other user-space ELF files always do.
	gnuID bool
}

const (
	libDir  = "/usr/lib/x86_64-linux-gnu/"
	pyDyn   = "/usr/local/lib/python3.11/lib-dynload/"
	pySite  = "/usr/local/lib/python3.11/site-packages/"
	pyExtSf = ".cpython-311-x86_64-linux-gnu.so"
)

// userMappings: 73 native files (libraries, Python extension modules, C
// executables, the vDSO) and 10 Go binaries.
var userMappings = []mappingDef{
	{"c", "libc.so.6", libDir + "libc.so.6", mapLib, 0x1a8000, false},
	{"ld", "ld-linux-x86-64.so.2", libDir + "ld-linux-x86-64.so.2", mapLib, 0x25000, false},
	{"m", "libm.so.6", libDir + "libm.so.6", mapLib, 0x8d000, false},
	{"cxx", "libstdc++.so.6.0.30", libDir + "libstdc++.so.6.0.30", mapLib, 0x118000, false},
	{"gcc", "libgcc_s.so.1", libDir + "libgcc_s.so.1", mapLib, 0x16000, false},
	{"ssl", "libssl.so.3", libDir + "libssl.so.3", mapLib, 0x78000, false},
	{"crypto", "libcrypto.so.3", libDir + "libcrypto.so.3", mapLib, 0x35c000, false},
	{"z", "libz.so.1.2.13", libDir + "libz.so.1.2.13", mapLib, 0x14000, false},
	{"zstd", "libzstd.so.1.5.4", libDir + "libzstd.so.1.5.4", mapLib, 0xb6000, false},
	{"lz4", "liblz4.so.1.9.4", libDir + "liblz4.so.1.9.4", mapLib, 0x1c000, false},
	{"lzma", "liblzma.so.5.4.1", libDir + "liblzma.so.5.4.1", mapLib, 0x21000, false},
	{"pcre", "libpcre2-8.so.0.11.2", libDir + "libpcre2-8.so.0.11.2", mapLib, 0x6e000, false},
	{"crypt", "libcrypt.so.1.1.0", libDir + "libcrypt.so.1.1.0", mapLib, 0x19000, false},
	{"sd", "libsystemd.so.0.35.0", libDir + "libsystemd.so.0.35.0", mapLib, 0x89000, false},
	{"sdshared", "libsystemd-shared-252.so", libDir + "systemd/libsystemd-shared-252.so", mapLib, 0x1a6000, false},
	{"selinux", "libselinux.so.1", libDir + "libselinux.so.1", mapLib, 0x14000, false},
	{"cap", "libcap.so.2.66", libDir + "libcap.so.2.66", mapLib, 0x5000, false},
	{"capng", "libcap-ng.so.0.0.0", libDir + "libcap-ng.so.0.0.0", mapLib, 0x3000, false},
	{"mount", "libmount.so.1.1.0", libDir + "libmount.so.1.1.0", mapLib, 0x3a000, false},
	{"blkid", "libblkid.so.1.1.0", libDir + "libblkid.so.1.1.0", mapLib, 0x2f000, false},
	{"gcrypt", "libgcrypt.so.20.4.1", libDir + "libgcrypt.so.20.4.1", mapLib, 0xda000, false},
	{"dbus", "libdbus-1.so.3.32.4", libDir + "libdbus-1.so.3.32.4", mapLib, 0x2b000, false},
	{"expat", "libexpat.so.1.8.10", libDir + "libexpat.so.1.8.10", mapLib, 0x22000, false},
	{"krb5", "libkrb5.so.3.3", libDir + "libkrb5.so.3.3", mapLib, 0x7c000, false},
	{"krb5support", "libkrb5support.so.0.1", libDir + "libkrb5support.so.0.1", mapLib, 0x6000, false},
	{"comerr", "libcom_err.so.2.1", libDir + "libcom_err.so.2.1", mapLib, 0x2000, false},
	{"gssapi", "libgssapi_krb5.so.2.2", libDir + "libgssapi_krb5.so.2.2", mapLib, 0x3b000, false},
	{"k5crypto", "libk5crypto.so.3.1", libDir + "libk5crypto.so.3.1", mapLib, 0x1c000, false},
	{"keyutils", "libkeyutils.so.1.10", libDir + "libkeyutils.so.1.10", mapLib, 0x2000, false},
	{"pam", "libpam.so.0.85.1", libDir + "libpam.so.0.85.1", mapLib, 0x8000, false},
	{"audit", "libaudit.so.1.0.0", libDir + "libaudit.so.1.0.0", mapLib, 0x11000, false},
	{"icuuc", "libicuuc.so.72.1", libDir + "libicuuc.so.72.1", mapLib, 0x108000, false},
	{"icui18n", "libicui18n.so.72.1", libDir + "libicui18n.so.72.1", mapLib, 0x1d6000, false},
	{"xml2", "libxml2.so.2.9.14", libDir + "libxml2.so.2.9.14", mapLib, 0xd9000, false},
	{"ldap", "libldap-2.5.so.0.1.11", libDir + "libldap-2.5.so.0.1.11", mapLib, 0x36000, false},
	{"jemalloc", "libjemalloc.so.2", libDir + "libjemalloc.so.2", mapLib, 0x8a000, false},
	{"tinfo", "libtinfo.so.6.4", libDir + "libtinfo.so.6.4", mapLib, 0x10000, false},
	{"uuid", "libuuid.so.1.3.0", libDir + "libuuid.so.1.3.0", mapLib, 0x3000, false},
	{"resolv", "libresolv.so.2", libDir + "libresolv.so.2", mapLib, 0xa000, false},
	{"nsssd", "libnss_systemd.so.2", libDir + "libnss_systemd.so.2", mapLib, 0x3f000, false},
	{"imuxsock", "imuxsock.so", libDir + "rsyslog/imuxsock.so", mapLib, 0x7000, false},
	{"imjournal", "imjournal.so", libDir + "rsyslog/imjournal.so", mapLib, 0x5000, false},
	{"vdso", "linux-vdso.so.1", "[vdso]", mapVDSO, 0x2000, false},
	{"pylib", "libpython3.11.so.1.0", "/usr/local/lib/libpython3.11.so.1.0", mapLib, 0x1d9000, false},
	{"pyssl", "_ssl" + pyExtSf, pyDyn + "_ssl" + pyExtSf, mapLib, 0x11000, false},
	{"pyjson", "_json" + pyExtSf, pyDyn + "_json" + pyExtSf, mapLib, 0x6000, false},
	{"pysocket", "_socket" + pyExtSf, pyDyn + "_socket" + pyExtSf, mapLib, 0xa000, false},
	{"pyselect", "select" + pyExtSf, pyDyn + "select" + pyExtSf, mapLib, 0x4000, false},
	{"pyasyncio", "_asyncio" + pyExtSf, pyDyn + "_asyncio" + pyExtSf, mapLib, 0xb000, false},
	{"pyhashlib", "_hashlib" + pyExtSf, pyDyn + "_hashlib" + pyExtSf, mapLib, 0x7000, false},
	{"pystruct", "_struct" + pyExtSf, pyDyn + "_struct" + pyExtSf, mapLib, 0x7000, false},
	{"pypickle", "_pickle" + pyExtSf, pyDyn + "_pickle" + pyExtSf, mapLib, 0x14000, false},
	{"npumath", "_multiarray_umath" + pyExtSf, pySite + "numpy/core/_multiarray_umath" + pyExtSf, mapLib, 0x4a3000, false},
	{"openblas", "libopenblas64_p-r0-0cf96a72.3.23.dev.so", pySite + "numpy.libs/libopenblas64_p-r0-0cf96a72.3.23.dev.so", mapLib, 0x1c8b000, false},
	{"pydcore", "_pydantic_core" + pyExtSf, pySite + "pydantic_core/_pydantic_core" + pyExtSf, mapLib, 0x3e1000, false},
	{"psycopg", "_psycopg" + pyExtSf, pySite + "psycopg2/_psycopg" + pyExtSf, mapLib, 0x2f000, false},
	{"pq", "libpq-e8a0f0f1.so.5.16", pySite + "psycopg2_binary.libs/libpq-e8a0f0f1.so.5.16", mapLib, 0x3a000, false},
	{"ujson", "ujson" + pyExtSf, pySite + "ujson" + pyExtSf, mapLib, 0x9000, false},
	{"httptools", "parser" + pyExtSf, pySite + "httptools/parser/parser" + pyExtSf, mapLib, 0x3c000, false},
	{"python", "python3.11", "/usr/local/bin/python3.11", mapExe, 0x1000, false},
	{"nginx", "nginx", "/usr/sbin/nginx", mapExe, 0xf2000, false},
	{"postgres", "postgres", "/usr/lib/postgresql/16/bin/postgres", mapExe, 0x5c4000, false},
	{"redis", "redis-server", "/usr/local/bin/redis-server", mapExe, 0x1b9000, false},
	{"envoy", "envoy", "/usr/local/bin/envoy", mapExe, 0x4c2a000, false},
	{"haproxy", "haproxy", "/usr/local/sbin/haproxy", mapExe, 0x2b6000, false},
	{"sshd", "sshd", "/usr/sbin/sshd", mapExe, 0x8e000, false},
	{"systemd", "systemd", "/usr/lib/systemd/systemd", mapExe, 0x4b000, false},
	{"journald", "systemd-journald", "/usr/lib/systemd/systemd-journald", mapExe, 0x1b000, false},
	{"resolved", "systemd-resolved", "/usr/lib/systemd/systemd-resolved", mapExe, 0x63000, false},
	{"dbusd", "dbus-daemon", "/usr/bin/dbus-daemon", mapExe, 0x2c000, false},
	{"chronyd", "chronyd", "/usr/sbin/chronyd", mapExe, 0x3d000, false},
	{"rsyslogd", "rsyslogd", "/usr/sbin/rsyslogd", mapExe, 0x6b000, false},
	{"bash", "bash", "/usr/bin/bash", mapExe, 0xd5000, false},
	// Go binaries.
	{"kubelet", "kubelet", "/usr/bin/kubelet", mapGo, 0x3d0c000, true},
	{"containerd", "containerd", "/usr/bin/containerd", mapGo, 0x1a2e000, true},
	{"shim", "containerd-shim-runc-v2", "/usr/bin/containerd-shim-runc-v2", mapGo, 0x5d2000, false},
	{"coredns", "coredns", "/coredns", mapGo, 0x1f93000, false},
	{"kubeproxy", "kube-proxy", "/usr/local/bin/kube-proxy", mapGo, 0x1b87000, false},
	{"cilium", "cilium-agent", "/usr/bin/cilium-agent", mapGo, 0x4a52000, true},
	{"nodeexp", "node_exporter", "/bin/node_exporter", mapGo, 0xa3d000, false},
	{"apigw", "api-gateway", "/app/api-gateway", mapGo, 0xf21000, false},
	{"checkout", "checkout-service", "/app/checkout-service", mapGo, 0xc77000, false},
	{"ingest", "ingest-worker", "/usr/local/bin/ingest-worker", mapGo, 0x1139000, false},
}

// nativeLeaves are leaf chains into C libraries, by library alias. Libraries
// without an entry get generic chains. Function names of native frames are
// never emitted (the sampler does not symbolize them); they only give each
// function its own address range.
var nativeLeaves = map[string][]string{
	"c": {
		"c:malloc;c:_int_malloc",
		"c:free;c:_int_free",
		"c:cfree;c:_int_free;c:_int_free_merge_chunk",
		"c:__memmove_avx_unaligned_erms",
		"c:__memset_avx2_unaligned_erms",
		"c:__memcmp_avx2_movbe",
		"c:__strlen_avx2",
		"c:__strchr_avx2",
		"c:__snprintf;c:__vsnprintf_internal;c:__printf_buffer;c:__printf_buffer_write",
		"c:qsort_r;c:msort_with_tmp.part.0",
		"c:read|read_sock",
		"c:__libc_recv|recv",
		"c:write|write_sock",
		"c:writev|write_sock",
		"c:__libc_sendmsg|send",
		"c:epoll_wait|epoll",
		"c:__poll|poll",
		"c:pthread_cond_wait;c:__pthread_cond_wait_common;c:__futex_abstimed_wait_common|futex_wait",
		"c:pthread_mutex_lock;c:__lll_lock_wait|futex_wait",
		"c:pthread_cond_signal|futex_wake",
		"c:clock_nanosleep|sleep",
		"c:__open64|open",
		"c:__fstatat64|stat",
		"c:__pread64|read_file",
		"c:__write_nocancel|write_file",
		"c:fdatasync|fsync",
		"c:mmap64|mmap",
		"c:munmap|mmap",
		"c:accept4|accept",
		"c:getrandom|getrandom",
		"c:clock_gettime;vdso:__vdso_clock_gettime",
		"c:gettimeofday;vdso:__vdso_gettimeofday",
	},
	"ld":  {"ld:__tls_get_addr", "ld:_dl_runtime_resolve_xsavec;ld:_dl_fixup;ld:_dl_lookup_symbol_x;ld:do_lookup_x"},
	"m":   {"m:__exp_fma", "m:__log_fma", "m:__pow_fma"},
	"cxx": {"cxx:_Znwm;c:malloc;c:_int_malloc", "cxx:_ZSt11_Hash_bytesPKvmm", "cxx:_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_appendEPKcm;c:__memmove_avx_unaligned_erms", "cxx:_ZSt18_Rb_tree_incrementPSt18_Rb_tree_node_base", "cxx:_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE;c:pthread_cond_wait;c:__pthread_cond_wait_common;c:__futex_abstimed_wait_common|futex_wait"},
	"gcc": {"gcc:_Unwind_RaiseException;gcc:uw_frame_state_for;gcc:execute_cfa_program"},
	"ssl": {
		"ssl:!SSL_read;ssl:ssl_read_internal;ssl:ssl3_read;ssl:ssl3_read_bytes;ssl:ssl3_get_record;ssl:ssl3_read_n;crypto:BIO_read;crypto:bio_read_intern;crypto:sock_read;c:read|read_sock",
		"ssl:!SSL_read;ssl:ssl_read_internal;ssl:ssl3_read;ssl:ssl3_read_bytes;ssl:ssl3_get_record;ssl:tls1_enc;crypto:EVP_CipherUpdate;crypto:aes_gcm_cipher;crypto:aesni_gcm_decrypt",
		"ssl:!SSL_write;ssl:ssl_write_internal;ssl:ssl3_write_bytes;ssl:do_ssl3_write;ssl:ssl3_write_pending;crypto:BIO_write;crypto:bio_write_intern;crypto:sock_write;c:write|write_sock",
		"ssl:!SSL_write;ssl:ssl_write_internal;ssl:ssl3_write_bytes;ssl:do_ssl3_write;ssl:tls1_enc;crypto:EVP_CipherUpdate;crypto:aes_gcm_cipher;crypto:aesni_gcm_encrypt",
		"ssl:SSL_do_handshake;ssl:ossl_statem_accept;ssl:state_machine;ssl:tls_process_client_key_exchange;crypto:EVP_PKEY_derive;crypto:ecx_derive;crypto:ossl_x25519;crypto:x25519_scalar_mulx",
		"ssl:SSL_do_handshake;ssl:ossl_statem_accept;ssl:state_machine;ssl:tls_construct_cert_verify;crypto:EVP_DigestSign;crypto:rsa_ossl_private_encrypt;crypto:BN_mod_exp_mont_consttime;crypto:bn_sqr8x_internal",
	},
	"crypto": {
		"crypto:EVP_DigestUpdate;crypto:sha256_block_data_order_avx2",
		"crypto:EVP_DecryptUpdate;crypto:aes_gcm_cipher;crypto:aesni_gcm_decrypt",
		"crypto:CRYPTO_malloc;c:malloc;c:_int_malloc",
		"crypto:HMAC_Update;crypto:EVP_DigestUpdate;crypto:sha1_block_data_order_avx2",
	},
	"z":         {"z:deflate;z:deflate_slow;z:longest_match", "z:deflate;z:deflate_fast;z:fill_window", "z:inflate;z:inflate_fast", "z:crc32_z"},
	"zstd":      {"zstd:ZSTD_compressStream2;zstd:ZSTD_compressBlock_doubleFast", "zstd:ZSTD_decompressStream;zstd:ZSTD_decompressBlock_internal;zstd:ZSTD_decompressSequences"},
	"lz4":       {"lz4:LZ4_compress_fast_extState", "lz4:LZ4_decompress_safe"},
	"lzma":      {"lzma:lzma_code;lzma:stream_decode;lzma:lzma_decode"},
	"pcre":      {"pcre:pcre2_match_8;pcre:match", "pcre:pcre2_jit_match_8"},
	"jemalloc":  {"jemalloc:malloc;jemalloc:je_malloc_default;jemalloc:je_tcache_alloc_small_hard", "jemalloc:free;jemalloc:je_free_default;jemalloc:je_tcache_bin_flush_small"},
	"icuuc":     {"icuuc:ucnv_fromUnicode_72;icuuc:ucnv_fromUWriteBytes_72", "icuuc:u_strToUTF8_72"},
	"icui18n":   {"icui18n:ucol_strcoll_72;icui18n:_ZNK6icu_7217RuleBasedCollator7compareEPKDsiS2_iR10UErrorCode;icui18n:_ZNK6icu_7217RuleBasedCollator15doCompareEPKDsiS2_iR10UErrorCode"},
	"xml2":      {"xml2:xmlParseDocument;xml2:xmlParseElement;xml2:xmlParseCharData"},
	"sdshared":  {"sdshared:sd_event_run;sdshared:sd_event_wait;c:epoll_wait|epoll", "sdshared:journal_file_append_entry;sdshared:journal_file_append_data;sdshared:journal_file_hmac_put_object", "sdshared:cg_read_event;c:read|read_file", "sdshared:hashmap_get;sdshared:base_bucket_hash"},
	"sd":        {"sd:sd_notify;sd:sd_pid_notify_with_fds;c:__libc_sendmsg|send", "sd:sd_journal_sendv;c:__libc_sendmsg|send"},
	"dbus":      {"dbus:dbus_connection_dispatch;dbus:_dbus_connection_run_builtin_filters_unlocked_no_update", "dbus:_dbus_read;c:__libc_recv|recv"},
	"expat":     {"expat:XML_ParseBuffer;expat:doContent"},
	"krb5":      {"krb5:krb5_rd_req_decoded;krb5:krb5_decrypt_tkt_part;k5crypto:krb5_c_decrypt;k5crypto:krb5int_aes_decrypt"},
	"gssapi":    {"gssapi:gss_accept_sec_context;gssapi:krb5_gss_accept_sec_context;krb5:krb5_rd_req_decoded"},
	"pam":       {"pam:pam_authenticate;pam:_pam_dispatch"},
	"audit":     {"audit:audit_log_user_message;audit:audit_send;c:__libc_sendmsg|send"},
	"gcrypt":    {"gcrypt:gcry_md_write;gcrypt:_gcry_md_block_write;gcrypt:transform"},
	"mount":     {"mount:mnt_table_parse_stream;mount:mnt_parse_mountinfo_line", "mount:mnt_monitor_next_change;c:read|read_file"},
	"imuxsock":  {"imuxsock:runInput;imuxsock:readSocket;c:__libc_recv|recv"},
	"imjournal": {"imjournal:runInput;imjournal:readjournal;sd:sd_journal_get_data"},
	"resolv":    {"resolv:__res_context_send;resolv:send_dg;c:__poll|poll"},
	"nsssd":     {"nsssd:_nss_systemd_getpwnam_r;sd:sd_bus_call;c:__poll|poll"},
}

// Python native roots, root to leaf.
const (
	pyMainNative   = "python:_start;c:__libc_start_main_impl;c:__libc_start_call_main;python:main;pylib:Py_BytesMain;pylib:Py_RunMain;pylib:pymain_run_python;pylib:pymain_run_file;pylib:pymain_run_file_obj;pylib:_PyRun_AnyFileObject;pylib:_PyRun_SimpleFileObject;pylib:pyrun_file;pylib:run_mod;pylib:run_eval_code_obj;pylib:PyEval_EvalCode;pylib:_PyEval_EvalFrameDefault"
	pyThreadNative = "c:clone3;c:start_thread;pylib:thread_run;pylib:_PyObject_Call;pylib:_PyFunction_Vectorcall;pylib:_PyEval_EvalFrameDefault"
	pyThreadPy     = "P:_bootstrap@%L/threading.py:995;P:_bootstrap_inner@%L/threading.py:1038;P:run@%L/threading.py:975"
)

// pyBridges are the C frames between two Python evaluation loops, root to
// leaf (the caller's loop first).
var pyBridges = []string{
	"pylib:_PyEval_EvalFrameDefault;pylib:_PyObject_MakeTpCall;pylib:slot_tp_call;pylib:_PyObject_Call;pylib:_PyFunction_Vectorcall",
	"pylib:_PyEval_EvalFrameDefault;pylib:method_vectorcall;pylib:_PyFunction_Vectorcall",
	"pylib:_PyEval_EvalFrameDefault;pylib:PyObject_Call;pylib:partial_call;pylib:_PyFunction_Vectorcall",
	"pylib:_PyEval_EvalFrameDefault;pylib:_PyObject_MakeTpCall;pylib:type_call;pylib:slot_tp_init;pylib:_PyObject_Call;pylib:_PyFunction_Vectorcall",
}

// Leaf groups for Python programs.
var pyLeaves = map[string][]string{
	"web": {
		"P:dumps@%L/json/__init__.py:231;P:encode@%L/json/encoder.py:200;P:iterencode@%L/json/encoder.py:258;pyjson:encoder_call;pyjson:encoder_listencode_obj;pyjson:encoder_listencode_dict;pyjson:encoder_encode_string;pylib:PyUnicode_New;pylib:_PyObject_Malloc",
		"P:loads@%L/json/__init__.py:346;P:decode@%L/json/decoder.py:337;P:raw_decode@%L/json/decoder.py:353;pyjson:scanner_call;pyjson:scan_once_unicode;pyjson:_parse_object_unicode;pylib:PyDict_SetItem;pylib:insertdict",
		"P:readinto@%L/socket.py:706;P:recv_into@%L/ssl.py:1311;P:read@%L/ssl.py:1167;pyssl:_ssl__SSLSocket_read;ssl:!SSL_read_ex;ssl:ssl_read_internal;ssl:ssl3_read;ssl:ssl3_read_bytes;ssl:ssl3_get_record;ssl:ssl3_read_n;crypto:BIO_read;crypto:bio_read_intern;crypto:sock_read;c:read|read_sock",
		"P:sendall@%L/ssl.py:1273;P:send@%L/ssl.py:1242;pyssl:_ssl__SSLSocket_write;ssl:!SSL_write_ex;ssl:ssl_write_internal;ssl:ssl3_write_bytes;ssl:do_ssl3_write;ssl:tls1_enc;crypto:EVP_CipherUpdate;crypto:aes_gcm_cipher;crypto:aesni_gcm_encrypt",
		"P:readinto@%L/socket.py:706;pysocket:sock_recv_into;pysocket:sock_call_ex;c:__libc_recv|recv",
		"P:send@%L/http/client.py:998;pysocket:sock_sendall;pysocket:sock_call_ex;c:__libc_send|write_sock",
		"P:execute@%S/sqlalchemy/engine/default.py:924;psycopg:psyco_curs_execute;psycopg:_psyco_curs_execute;psycopg:pq_execute;pq:PQgetResult;pq:pqWait;pq:pqSocketCheck;pq:pqSocketPoll;c:__poll|poll",
		"P:execute@%S/sqlalchemy/engine/default.py:924;psycopg:psyco_curs_execute;psycopg:_psyco_curs_execute;psycopg:pq_fetch;psycopg:_pq_fetch_tuples;pylib:PyUnicode_DecodeUTF8;pylib:unicode_decode_utf8",
		"P:fetchall@%S/sqlalchemy/engine/result.py:1317;P:_allrows@%S/sqlalchemy/engine/result.py:548;P:<listcomp>@%S/sqlalchemy/engine/result.py:551;pylib:_PyEval_EvalFrameDefault;pylib:_PyObject_Malloc",
		"P:__init__@%S/pydantic/main.py:171;pydcore:validate_python;pydcore:model_fields_validate;pydcore:str_validate",
		"P:model_dump_json@%S/pydantic/main.py:352;pydcore:to_json;pydcore:serialize_model;pydcore:serialize_str",
		"P:info@%L/logging/__init__.py:1489;P:_log@%L/logging/__init__.py:1634;P:handle@%L/logging/__init__.py:1644;P:callHandlers@%L/logging/__init__.py:1706;P:handle@%L/logging/__init__.py:978;P:emit@%L/logging/__init__.py:1113;P:flush@%L/logging/__init__.py:1086;pylib:_io_TextIOWrapper_flush;pylib:_bufferedwriter_flush_unlocked;pylib:_Py_write;c:write|write_file",
		"P:hexdigest@/app/utils/signing.py:41;pyhashlib:EVP_update;crypto:EVP_DigestUpdate;crypto:sha256_block_data_order_avx2",
		"P:match@%L/re/__init__.py:166;pylib:_sre_SRE_Pattern_match;pylib:sre_ucs1_match",
		"P:unpack_from@/app/codec.py:88;pystruct:Struct_unpack_from;pystruct:s_unpack_internal;pylib:PyLong_FromLong",
		"ujson:objToJSON;ujson:JSON_EncodeObject;ujson:encode;ujson:Buffer_AppendEscapeUnicode",
		"pylib:_PyEval_EvalFrameDefault",
		"pylib:_PyEval_EvalFrameDefault;pylib:PyObject_GetAttr;pylib:_PyObject_GenericGetAttrWithDict",
		"pylib:_PyEval_EvalFrameDefault;pylib:_PyObject_Malloc",
		"pylib:_PyEval_EvalFrameDefault;pylib:_Py_Dealloc;pylib:dict_dealloc",
		"pylib:_PyEval_EvalFrameDefault;pylib:_PyObject_MakeTpCall;pylib:type_call;pylib:object_new",
		"pylib:_PyEval_EvalFrameDefault;pylib:gc_collect_main;pylib:deduce_unreachable;pylib:visit_reachable",
		"pylib:_PyEval_EvalFrameDefault;pylib:PyNumber_Add;pylib:long_add",
		"pylib:time_sleep;pylib:pysleep;c:clock_nanosleep|sleep",
		"pylib:lock_PyThread_acquire_lock;pylib:acquire_timed;pylib:PyThread_acquire_lock_timed;c:__futex_abstimed_wait_common|futex_wait",
		"pylib:_PyEval_EvalFrameDefault;pylib:PyObject_Malloc;c:malloc;c:_int_malloc",
		"pylib:_io_FileIO_readall;pylib:_Py_read;c:read|read_file",
		"pylib:_io_open;pylib:_io_FileIO___init__;c:__open64|open",
		"pylib:os_stat;pylib:posix_do_stat;c:__fstatat64|stat",
	},
	"idle": {
		"P:sleep@%S/gunicorn/arbiter.py:357;pyselect:select_select;c:__select|poll",
		"P:select@%L/selectors.py:468;pyselect:select_epoll_poll;c:epoll_wait|epoll",
		"P:wait@%L/threading.py:320;pylib:lock_PyThread_acquire_lock;pylib:acquire_timed;pylib:PyThread_acquire_lock_timed;c:__futex_abstimed_wait_common|futex_wait",
	},
	"ml": {
		"npumath:array_matrix_product;npumath:cblas_matrixproduct;openblas:cblas_dgemm;openblas:dgemm_nn;openblas:dgemm_kernel_HASWELL",
		"P:sum@%S/numpy/core/fromnumeric.py:2313;P:_wrapreduction@%S/numpy/core/fromnumeric.py:88;npumath:ufunc_reduce;npumath:PyUFunc_Reduce;npumath:DOUBLE_add_AVX2",
		"P:softmax@/app/model/ops.py:14;npumath:ufunc_generic_fastcall;npumath:execute_ufunc_loop;npumath:DOUBLE_exp_AVX512F",
		"P:argsort@%S/numpy/core/fromnumeric.py:1133;P:_wrapfunc@%S/numpy/core/fromnumeric.py:59;npumath:array_argsort;npumath:aquicksort_double",
		"P:load_model@/app/model/store.py:31;pypickle:_pickle_load;pypickle:load;pypickle:load_binunicode;pylib:PyUnicode_DecodeUTF8",
		"npumath:array_matrix_product;npumath:cblas_matrixproduct;openblas:cblas_sgemm;openblas:sgemm_nn;openblas:sgemm_kernel_HASWELL",
		"pylib:_PyEval_EvalFrameDefault;pylib:_PyObject_Malloc",
		"pylib:_PyEval_EvalFrameDefault",
		"pylib:time_sleep;pylib:pysleep;c:clock_nanosleep|sleep",
		"P:readinto@%L/socket.py:706;pysocket:sock_recv_into;pysocket:sock_call_ex;c:__libc_recv|recv",
	},
	"blas": {
		"openblas:blas_thread_server;openblas:inner_thread;openblas:dgemm_kernel_HASWELL",
		"openblas:blas_thread_server;openblas:inner_thread;openblas:dgemm_oncopy_HASWELL",
		"openblas:blas_thread_server;c:sched_yield|yield",
		"openblas:blas_thread_server;c:pthread_cond_wait;c:__pthread_cond_wait_common;c:__futex_abstimed_wait_common|futex_wait",
	},
	"async": {
		"P:select@%L/selectors.py:468;pyselect:select_epoll_poll;c:epoll_wait|epoll",
		"P:_read_ready__data_received@%L/asyncio/selector_events.py:1009;P:data_received@%S/uvicorn/protocols/http/httptools_impl.py:148;httptools:__pyx_pw_9httptools_6parser_6parser_10HttpParser_5feed_data;httptools:llhttp_execute;httptools:llhttp__internal_execute",
		"P:_read_ready__data_received@%L/asyncio/selector_events.py:996;pysocket:sock_recv;pysocket:sock_call_ex;c:__libc_recv|recv",
		"P:write@%L/asyncio/selector_events.py:1068;pysocket:sock_send;pysocket:sock_call_ex;c:__libc_send|write_sock",
		"pyasyncio:task_step;pyasyncio:task_step_impl;pylib:gen_send_ex2;pylib:_PyEval_EvalFrameDefault",
		"pyasyncio:TaskStepMethWrapper_call;pyasyncio:task_step;pyasyncio:task_step_impl;pyasyncio:future_schedule_callbacks;pyasyncio:call_soon",
	},
}

// Go vocabulary.
const goExit = "G:runtime.goexit@%G/runtime/asm_amd64.s:1700"

var goRoots = map[string]string{
	"http":   goExit + ";G:net/http.(*Server).Serve.gowrap3@%G/net/http/server.go:3360;G:net/http.(*conn).serve@%G/net/http/server.go:2092;G:net/http.serverHandler.ServeHTTP@%G/net/http/server.go:3210;G:net/http.(*ServeMux).ServeHTTP@%G/net/http/server.go:2747;G:net/http.HandlerFunc.ServeHTTP@%G/net/http/server.go:2171",
	"grpc":   goExit + ";G:google.golang.org/grpc.(*Server).serveStreams.func2.1@%M/google.golang.org/grpc@v1.64.0/server.go:1029;G:google.golang.org/grpc.(*Server).handleStream@%M/google.golang.org/grpc@v1.64.0/server.go:1770;G:google.golang.org/grpc.(*Server).processUnaryRPC@%M/google.golang.org/grpc@v1.64.0/server.go:1379",
	"main":   goExit + ";G:runtime.main@%G/runtime/proc.go:271;G:main.main@%A/cmd/%N/main.go:42",
	"worker": goExit + ";G:%P/internal/worker.(*Pool).run.func1@%A/internal/worker/pool.go:61",
	"timer":  goExit + ";G:time.goFunc@%G/time/sleep.go:215",
	"gc":     goExit + ";G:runtime.gcBgMarkWorker@%G/runtime/mgc.go:1310;G:runtime.systemstack@%G/runtime/asm_amd64.s:509;G:runtime.gcBgMarkWorker.func2@%G/runtime/mgc.go:1406;G:runtime.gcDrain@%G/runtime/mgcmark.go:1188",
	"sched":  "G:runtime.mstart@%G/runtime/asm_amd64.s:395;G:runtime.mstart0@%G/runtime/proc.go:1481;G:runtime.mstart1@%G/runtime/proc.go:1526;G:runtime.schedule@%G/runtime/proc.go:3986;G:runtime.findRunnable@%G/runtime/proc.go:3230",
	"sysmon": "G:runtime.mstart@%G/runtime/asm_amd64.s:395;G:runtime.mstart0@%G/runtime/proc.go:1481;G:runtime.mstart1@%G/runtime/proc.go:1526;G:runtime.sysmon@%G/runtime/proc.go:6047",
}

const (
	goSyscall6 = "G:internal/runtime/syscall.Syscall6@%G/internal/runtime/syscall/asm_linux_amd64.s:36"
	goSyscall  = "G:syscall.Syscall@%G/syscall/syscall_linux.go:73;G:syscall.RawSyscall6@%G/syscall/syscall_linux.go:64;" + goSyscall6
	goFutex    = "G:runtime.futex@%G/runtime/sys_linux_amd64.s:557"
)

var goLeaves = map[string][]string{
	"go": {
		"G:runtime.mallocgc@%G/runtime/malloc.go:1260;G:runtime.(*mcache).nextFree@%G/runtime/malloc.go:963;G:runtime.(*mcache).refill@%G/runtime/mcache.go:181;G:runtime.(*mcentral).cacheSpan@%G/runtime/mcentral.go:193;G:runtime.(*mcentral).grow@%G/runtime/mcentral.go:265;G:runtime.(*mheap).alloc@%G/runtime/mheap.go:964",
		"G:runtime.newobject@%G/runtime/malloc.go:1710;G:runtime.mallocgc@%G/runtime/malloc.go:1150;G:runtime.memclrNoHeapPointers@%G/runtime/memclr_amd64.s:93",
		"G:runtime.makeslice@%G/runtime/slice.go:116;G:runtime.mallocgc@%G/runtime/malloc.go:1172;G:runtime.gcAssistAlloc@%G/runtime/mgcmark.go:473;G:runtime.systemstack@%G/runtime/asm_amd64.s:509;G:runtime.gcAssistAlloc.func1@%G/runtime/mgcmark.go:563;G:runtime.gcAssistAlloc1@%G/runtime/mgcmark.go:650;G:runtime.gcDrainN@%G/runtime/mgcmark.go:1337;G:runtime.scanobject@%G/runtime/mgcmark.go:1446;G:runtime.greyobject@%G/runtime/mgcmark.go:1592",
		"G:runtime.growslice@%G/runtime/slice.go:266;G:runtime.memmove@%G/runtime/memmove_amd64.s:174",
		"G:runtime.mapaccess2_faststr@%G/runtime/map_faststr.go:108",
		"G:runtime.mapassign_faststr@%G/runtime/map_faststr.go:203;G:runtime.hashGrow@%G/runtime/map.go:1081;G:runtime.makeBucketArray@%G/runtime/map.go:379",
		"G:runtime.concatstrings@%G/runtime/string.go:47;G:runtime.memmove@%G/runtime/memmove_amd64.s:209",
		"G:encoding/json.Marshal@%G/encoding/json/encode.go:164;G:encoding/json.(*encodeState).marshal@%G/encoding/json/encode.go:295;G:encoding/json.(*encodeState).reflectValue@%G/encoding/json/encode.go:321;G:encoding/json.structEncoder.encode@%G/encoding/json/encode.go:728;G:encoding/json.sliceEncoder.encode@%G/encoding/json/encode.go:892;G:encoding/json.arrayEncoder.encode@%G/encoding/json/encode.go:915;G:encoding/json.structEncoder.encode@%G/encoding/json/encode.go:728;G:encoding/json.stringEncoder@%G/encoding/json/encode.go:610;G:encoding/json.appendString[...]@%G/encoding/json/encode.go:1020",
		"G:encoding/json.Unmarshal@%G/encoding/json/decode.go:106;G:encoding/json.(*decodeState).unmarshal@%G/encoding/json/decode.go:180;G:encoding/json.(*decodeState).value@%G/encoding/json/decode.go:374;G:encoding/json.(*decodeState).object@%G/encoding/json/decode.go:755;G:encoding/json.(*decodeState).literalStore@%G/encoding/json/decode.go:1020;G:reflect.Value.SetString@%G/reflect/value.go:2353",
		"G:encoding/json.Unmarshal@%G/encoding/json/decode.go:96;G:encoding/json.checkValid@%G/encoding/json/scanner.go:32;G:encoding/json.stateInString@%G/encoding/json/scanner.go:335",
		"G:fmt.Sprintf@%G/fmt/print.go:239;G:fmt.(*pp).doPrintf@%G/fmt/print.go:1170;G:fmt.(*pp).printArg@%G/fmt/print.go:759;G:fmt.(*pp).fmtInteger@%G/fmt/print.go:375;G:fmt.(*fmt).fmtInteger@%G/fmt/format.go:307",
		"G:strconv.FormatInt@%G/strconv/itoa.go:29;G:strconv.formatBits@%G/strconv/itoa.go:143",
		"G:sort.Slice@%G/sort/slice.go:26;G:sort.pdqsort_func@%G/sort/zsortfunc.go:114;G:sort.insertionSort_func@%G/sort/zsortfunc.go:12",
		"G:regexp.(*Regexp).MatchString@%G/regexp/regexp.go:533;G:regexp.(*Regexp).doExecute@%G/regexp/exec.go:535;G:regexp.(*Regexp).backtrack@%G/regexp/backtrack.go:353;G:regexp.(*Regexp).tryBacktrack@%G/regexp/backtrack.go:153",
		"G:sync.(*Mutex).Lock@%G/sync/mutex.go:90;G:sync.(*Mutex).lockSlow@%G/sync/mutex.go:171;G:runtime.sync_runtime_SemacquireMutex@%G/runtime/sema.go:95;G:runtime.semacquire1@%G/runtime/sema.go:160",
		"G:crypto/tls.(*Conn).Write@%G/crypto/tls/conn.go:1203;G:crypto/tls.(*Conn).writeRecordLocked@%G/crypto/tls/conn.go:1029;G:crypto/tls.(*halfConn).encrypt@%G/crypto/tls/conn.go:532;G:crypto/internal/fips140/aes/gcm.(*GCM).Seal@%G/crypto/internal/fips140/aes/gcm/gcm.go:101;G:crypto/internal/fips140/aes/gcm.seal@%G/crypto/internal/fips140/aes/gcm/gcm_asm.go:84;G:crypto/internal/fips140/aes/gcm.gcmAesEnc@%G/crypto/internal/fips140/aes/gcm/gcm_amd64.s:1021",
		"G:crypto/tls.(*Conn).Write@%G/crypto/tls/conn.go:1203;G:crypto/tls.(*Conn).writeRecordLocked@%G/crypto/tls/conn.go:1053;G:crypto/tls.(*Conn).write@%G/crypto/tls/conn.go:964;G:net.(*conn).Write@%G/net/net.go:199;G:net.(*netFD).Write@%G/net/fd_posix.go:96;G:internal/poll.(*FD).Write@%G/internal/poll/fd_unix.go:380;G:internal/poll.ignoringEINTRIO@%G/internal/poll/fd_unix.go:745;G:syscall.Write@%G/syscall/syscall_unix.go:209;G:syscall.write@%G/syscall/zsyscall_linux_amd64.go:964;" + goSyscall + "|write_sock",
		"G:bufio.(*Writer).Flush@%G/bufio/bufio.go:639;G:net.(*conn).Write@%G/net/net.go:199;G:net.(*netFD).Write@%G/net/fd_posix.go:96;G:internal/poll.(*FD).Write@%G/internal/poll/fd_unix.go:380;G:internal/poll.ignoringEINTRIO@%G/internal/poll/fd_unix.go:745;G:syscall.Write@%G/syscall/syscall_unix.go:209;G:syscall.write@%G/syscall/zsyscall_linux_amd64.go:964;" + goSyscall + "|write_sock",
		"G:bufio.(*Reader).Read@%G/bufio/bufio.go:241;G:net.(*conn).Read@%G/net/net.go:179;G:net.(*netFD).Read@%G/net/fd_posix.go:55;G:internal/poll.(*FD).Read@%G/internal/poll/fd_unix.go:165;G:internal/poll.ignoringEINTRIO@%G/internal/poll/fd_unix.go:745;G:syscall.Read@%G/syscall/syscall_unix.go:183;G:syscall.read@%G/syscall/zsyscall_linux_amd64.go:736;" + goSyscall + "|read_sock",
		"G:os.(*File).Write@%G/os/file.go:195;G:os.(*File).write@%G/os/file_posix.go:46;G:internal/poll.(*FD).Write@%G/internal/poll/fd_unix.go:380;G:internal/poll.ignoringEINTRIO@%G/internal/poll/fd_unix.go:745;G:syscall.Write@%G/syscall/syscall_unix.go:209;G:syscall.write@%G/syscall/zsyscall_linux_amd64.go:964;" + goSyscall + "|write_file",
		"G:os.ReadFile@%G/os/file.go:771;G:os.(*File).Read@%G/os/file.go:124;G:os.(*File).read@%G/os/file_posix.go:29;G:internal/poll.(*FD).Read@%G/internal/poll/fd_unix.go:165;G:internal/poll.ignoringEINTRIO@%G/internal/poll/fd_unix.go:745;G:syscall.Read@%G/syscall/syscall_unix.go:183;G:syscall.read@%G/syscall/zsyscall_linux_amd64.go:736;" + goSyscall + "|read_file",
		"G:os.Open@%G/os/file.go:357;G:os.OpenFile@%G/os/file.go:385;G:os.openFileNolog@%G/os/file_unix.go:257;G:os.open@%G/os/file_open_unix.go:15;G:syscall.Open@%G/syscall/syscall_linux.go:285;G:syscall.openat@%G/syscall/zsyscall_linux_amd64.go:96;G:syscall.Syscall6@%G/syscall/syscall_linux.go:91;" + goSyscall6 + "|open",
		"G:os.Stat@%G/os/stat.go:13;G:os.statNolog@%G/os/stat_unix.go:32;G:syscall.Stat@%G/syscall/syscall_linux_amd64.go:66;G:syscall.fstatat@%G/syscall/zsyscall_linux_amd64.go:1483;G:syscall.Syscall6@%G/syscall/syscall_linux.go:91;" + goSyscall6 + "|stat",
		"G:os.(*File).Sync@%G/os/file_posix.go:168;G:internal/poll.(*FD).Fsync@%G/internal/poll/fd_fsync_posix.go:18;G:syscall.Fsync@%G/syscall/zsyscall_linux_amd64.go:445;" + goSyscall + "|fsync",
		"G:time.Now@%G/time/time.go:1150;G:time.now@%G/runtime/timestub.go:15;G:runtime.walltime@%G/runtime/time_linux_amd64.s:32;vdso:__vdso_clock_gettime",
		"G:google.golang.org/protobuf/proto.Marshal@%M/google.golang.org/protobuf@v1.34.2/proto/encode.go:110;G:google.golang.org/protobuf/proto.MarshalOptions.marshal@%M/google.golang.org/protobuf@v1.34.2/proto/encode.go:167;G:google.golang.org/protobuf/internal/impl.(*MessageInfo).marshal@%M/google.golang.org/protobuf@v1.34.2/internal/impl/encode.go:107;G:google.golang.org/protobuf/internal/impl.(*MessageInfo).marshalAppendPointer@%M/google.golang.org/protobuf@v1.34.2/internal/impl/encode.go:139;G:google.golang.org/protobuf/internal/impl.appendMessageSliceInfo@%M/google.golang.org/protobuf@v1.34.2/internal/impl/codec_field.go:511;G:google.golang.org/protobuf/internal/impl.appendStringNoZeroValidateUTF8@%M/google.golang.org/protobuf@v1.34.2/internal/impl/codec_gen.go:5342",
		"G:google.golang.org/protobuf/proto.UnmarshalOptions.unmarshal@%M/google.golang.org/protobuf@v1.34.2/proto/decode.go:105;G:google.golang.org/protobuf/internal/impl.(*MessageInfo).unmarshal@%M/google.golang.org/protobuf@v1.34.2/internal/impl/decode.go:61;G:google.golang.org/protobuf/internal/impl.(*MessageInfo).unmarshalPointer@%M/google.golang.org/protobuf@v1.34.2/internal/impl/decode.go:178;G:google.golang.org/protobuf/internal/impl.consumeStringValidateUTF8@%M/google.golang.org/protobuf@v1.34.2/internal/impl/codec_gen.go:5269;G:unicode/utf8.ValidString@%G/unicode/utf8/utf8.go:532",
		"G:google.golang.org/grpc.(*serverStream).SendMsg@%M/google.golang.org/grpc@v1.64.0/stream.go:1664;G:google.golang.org/grpc/internal/transport.(*http2Server).Write@%M/google.golang.org/grpc@v1.64.0/internal/transport/http2_server.go:1104;G:google.golang.org/grpc/internal/transport.(*controlBuffer).executeAndPut@%M/google.golang.org/grpc@v1.64.0/internal/transport/controlbuf.go:411;G:runtime.selectnbsend@%G/runtime/chan.go:707;G:runtime.chansend@%G/runtime/chan.go:218",
		"G:compress/gzip.(*Writer).Write@%G/compress/gzip/gzip.go:196;G:compress/flate.(*Writer).Write@%G/compress/flate/deflate.go:712;G:compress/flate.(*compressor).write@%G/compress/flate/deflate.go:554;G:compress/flate.(*compressor).deflate@%G/compress/flate/deflate.go:458;G:compress/flate.(*compressor).findMatch@%G/compress/flate/deflate.go:292;G:compress/flate.matchLen@%G/compress/flate/deflate.go:363",
		"G:crypto/sha256.(*Digest).Write@%G/crypto/internal/fips140/sha256/sha256.go:175;G:crypto/internal/fips140/sha256.block@%G/crypto/internal/fips140/sha256/sha256block_amd64.go:28;G:crypto/internal/fips140/sha256.blockAVX2@%G/crypto/internal/fips140/sha256/sha256block_amd64.s:42",
		"G:runtime.chansend1@%G/runtime/chan.go:161;G:runtime.chansend@%G/runtime/chan.go:218;G:runtime.send@%G/runtime/chan.go:349;G:runtime.goready@%G/runtime/proc.go:424;G:runtime.systemstack@%G/runtime/asm_amd64.s:509;G:runtime.goready.func1@%G/runtime/proc.go:425;G:runtime.ready@%G/runtime/proc.go:1017;G:runtime.wakep@%G/runtime/proc.go:3052;G:runtime.startm@%G/runtime/proc.go:2858;G:runtime.notewakeup@%G/runtime/lock_futex.go:153;G:runtime.futexwakeup@%G/runtime/os_linux.go:89;" + goFutex + "|futex_wake",
		"G:runtime.selectgo@%G/runtime/select.go:351;G:runtime.sellock@%G/runtime/select.go:38;G:runtime.lock2@%G/runtime/lock_futex.go:60",
		"G:github.com/prometheus/client_golang/prometheus.(*histogram).Observe@%M/github.com/prometheus/client_golang@v1.19.1/prometheus/histogram.go:797;G:github.com/prometheus/client_golang/prometheus.(*histogram).observe@%M/github.com/prometheus/client_golang@v1.19.1/prometheus/histogram.go:1012;G:sort.SearchFloat64s@%G/sort/search.go:109",
		"G:go.uber.org/zap.(*Logger).Info@%M/go.uber.org/zap@v1.27.0/logger.go:247;G:go.uber.org/zap/zapcore.(*CheckedEntry).Write@%M/go.uber.org/zap@v1.27.0/zapcore/entry.go:253;G:go.uber.org/zap/zapcore.(*ioCore).Write@%M/go.uber.org/zap@v1.27.0/zapcore/core.go:99;G:go.uber.org/zap/zapcore.(*jsonEncoder).EncodeEntry@%M/go.uber.org/zap@v1.27.0/zapcore/json_encoder.go:422;G:go.uber.org/zap/zapcore.(*jsonEncoder).safeAddString@%M/go.uber.org/zap@v1.27.0/zapcore/json_encoder.go:508",
	},
	"sched": {
		"G:runtime.netpoll@%G/runtime/netpoll_epoll.go:119;G:internal/runtime/syscall.EpollWait@%G/internal/runtime/syscall/syscall_linux.go:32;" + goSyscall6 + "|epoll",
		"G:runtime.stopm@%G/runtime/proc.go:2925;G:runtime.mPark@%G/runtime/proc.go:1887;G:runtime.notesleep@%G/runtime/lock_futex.go:171;G:runtime.futexsleep@%G/runtime/os_linux.go:75;" + goFutex + "|futex_wait",
		"G:runtime.stealWork@%G/runtime/proc.go:3717;G:runtime.runqsteal@%G/runtime/proc.go:6790;G:runtime.runqgrab@%G/runtime/proc.go:6730",
		"G:runtime.(*timers).check@%G/runtime/time.go:990;G:runtime.(*timers).run@%G/runtime/time.go:1122;G:runtime.(*timer).unlockAndRun@%G/runtime/time.go:1188;G:runtime.goroutineReady@%G/runtime/sleep.go:54;G:runtime.ready@%G/runtime/proc.go:1017",
		"G:runtime.execute@%G/runtime/proc.go:3221;G:runtime.gogo@%G/runtime/asm_amd64.s:421",
	},
	"sysmon": {
		"G:runtime.usleep@%G/runtime/sys_linux_amd64.s:135|sleep",
		"G:runtime.retake@%G/runtime/proc.go:6175;G:runtime.preemptone@%G/runtime/proc.go:6398;G:runtime.preemptM@%G/runtime/signal_unix.go:380;G:runtime.tgkill@%G/runtime/sys_linux_amd64.s:176",
		"G:runtime.nanotime1@%G/runtime/time_linux_amd64.s:71;vdso:__vdso_clock_gettime",
	},
	"gc": {
		"G:runtime.scanobject@%G/runtime/mgcmark.go:1446;G:runtime.greyobject@%G/runtime/mgcmark.go:1592",
		"G:runtime.scanobject@%G/runtime/mgcmark.go:1437;G:runtime.findObject@%G/runtime/mbitmap.go:1279",
		"G:runtime.scanobject@%G/runtime/mgcmark.go:1420;G:runtime.typePointers.next@%G/runtime/mbitmap.go:275",
		"G:runtime.markroot@%G/runtime/mgcmark.go:213;G:runtime.markroot.func1@%G/runtime/mgcmark.go:245;G:runtime.scanstack@%G/runtime/mgcmark.go:898;G:runtime.scanframeworker@%G/runtime/mgcmark.go:1060;G:runtime.scanblock@%G/runtime/mgcmark.go:1382",
		"G:runtime.(*gcWork).tryGet@%G/runtime/mgcwork.go:207;G:runtime.trygetfull@%G/runtime/mgcwork.go:409",
		"G:runtime.markrootSpans@%G/runtime/mgcmark.go:399;G:runtime.markBits.setMarked@%G/runtime/mbitmap.go:1130",
	},
}

// Middle-of-stack vocabulary for generated application functions.
var (
	goPkgs    = []string{"handler", "auth", "cache", "store", "orders", "proxy", "ratelimit", "middleware", "client", "model", "pricing", "inventory", "session", "router", "config", "events"}
	goTypes   = []string{"Service", "Handler", "Client", "Store", "Cache", "Limiter", "Router", "Pool", "Session", "Repo", "Resolver", "Codec"}
	goMethods = []string{"Handle", "ServeHTTP", "Get", "Put", "Lookup", "Validate", "Process", "Fetch", "Resolve", "Decode", "Encode", "Authorize", "Apply", "Dispatch", "Load", "Save", "Query", "Update", "Check", "Build", "do", "run", "next", "flush"}

	pyFiles = []string{"api/views.py", "api/routes.py", "services/orders.py", "services/payments.py", "services/inventory.py", "db/models.py", "db/session.py", "schemas.py", "utils/cache.py", "auth.py", "tasks.py", "model/pipeline.py", "model/features.py", "clients/http.py"}
	pyFuncs = []string{"create_order", "get_order", "list_orders", "validate", "authorize", "_load_user", "compute_total", "apply_discount", "serialize", "to_dict", "fetch_inventory", "reserve_stock", "charge", "publish_event", "render", "_build_query", "handle", "process_task", "run_inference", "preprocess", "postprocess", "tokenize", "wrapper", "__call__", "get", "post", "_request", "retry", "encode_features", "score", "lookup", "refresh"}
)
