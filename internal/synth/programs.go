package synth

// The programs running on the synthetic node. Shares are target fractions of
// all samples (normalised over the table); containers == 0 means the
// processes run on the host (procs of them), otherwise containers x procs.

type progKind uint8

const (
	progNative   progKind = iota // C/C++: native frames
	progPython                   // CPython: Python frames interleaved with native ones
	progGo                       // Go, symbolized by the sampler (--symbolize-go)
	progGoNative                 // Go, left to the backend: native frames in the Go binary
	progKthread                  // kernel thread: kernel frames only
)

type rootDef struct {
	// chain is the root segment, root to leaf: "@key" names an entry of
	// goRoots, "" means none (kernel threads; leaf-only roots).
	chain  string
	weight float64
	// mid adds generated application frames below the root.
	mid bool
	// leaves names the leaf group (pyLeaves, goLeaves, kthreadBodies);
	// "" is the native leaf pool of the program's libraries.
	leaves string
	// labeled samples carry the program's custom label.
	labeled bool
}

type threadDef struct {
	name   string // "" = the process comm; %d = thread number
	count  int
	weight int // relative share of the process's samples
}

type progDef struct {
	name       string
	comm       string
	exe        string // mapping alias; "" for kernel threads
	kind       progKind
	share      float64
	containers int
	procs      int
	threads    []threadDef
	comms      []string // per-process comm (kernel threads)
	unit       string
	service    string
	env        []string
	roots      []rootDef
	mid        [2]int   // generated middle depth range
	pkg        string   // Go module path (%P)
	files      string   // application source root (%A)
	libs       []string // native programs: libraries whose leaves are used
	labelKey   string
	labels     []string
	pSys       float64 // probability a leaf chain that ends in a system call is taken whole
	pIRQ       float64 // probability of an interrupt or page fault on top of user code
}

var (
	goStdRoots = []rootDef{
		{chain: "@http", weight: 0.45, mid: true, leaves: "go", labeled: true},
		{chain: "@grpc", weight: 0.08, mid: true, leaves: "go"},
		{chain: "@main", weight: 0.02, mid: true, leaves: "go"},
		{chain: "@worker", weight: 0.10, mid: true, leaves: "go"},
		{chain: "@timer", weight: 0.03, mid: true, leaves: "go"},
		{chain: "@gc", weight: 0.15, leaves: "gc"},
		{chain: "@sched", weight: 0.14, leaves: "sched"},
		{chain: "@sysmon", weight: 0.03, leaves: "sysmon"},
	}
	goRPCRoots = []rootDef{
		{chain: "@grpc", weight: 0.45, mid: true, leaves: "go"},
		{chain: "@http", weight: 0.05, mid: true, leaves: "go"},
		{chain: "@worker", weight: 0.14, mid: true, leaves: "go"},
		{chain: "@main", weight: 0.02, mid: true, leaves: "go"},
		{chain: "@timer", weight: 0.03, mid: true, leaves: "go"},
		{chain: "@gc", weight: 0.14, leaves: "gc"},
		{chain: "@sched", weight: 0.14, leaves: "sched"},
		{chain: "@sysmon", weight: 0.03, leaves: "sysmon"},
	}
	goDaemonRoots = []rootDef{
		{chain: "@worker", weight: 0.40, mid: true, leaves: "go"},
		{chain: "@timer", weight: 0.10, mid: true, leaves: "go"},
		{chain: "@http", weight: 0.08, mid: true, leaves: "go"},
		{chain: "@main", weight: 0.05, mid: true, leaves: "go"},
		{chain: "@gc", weight: 0.14, leaves: "gc"},
		{chain: "@sched", weight: 0.19, leaves: "sched"},
		{chain: "@sysmon", weight: 0.04, leaves: "sysmon"},
	}
	cMainRoots = []rootDef{
		{chain: "exe:_start;c:__libc_start_main_impl;c:__libc_start_call_main;exe:main", weight: 1, mid: true},
	}
	cThreadRoots = []rootDef{
		{chain: "exe:_start;c:__libc_start_main_impl;c:__libc_start_call_main;exe:main", weight: 0.3, mid: true},
		{chain: "c:clone3;c:start_thread;exe:thread_main", weight: 0.7, mid: true},
	}
)

const (
	gunicornPy = "P:<module>@/usr/local/bin/gunicorn:8;P:run@%S/gunicorn/app/wsgiapp.py:67;P:run@%S/gunicorn/app/base.py:236;P:run@%S/gunicorn/app/base.py:72;P:run@%S/gunicorn/arbiter.py:202"
	gunicornWk = ";P:manage_workers@%S/gunicorn/arbiter.py:571;P:spawn_workers@%S/gunicorn/arbiter.py:642;P:spawn_worker@%S/gunicorn/arbiter.py:609;P:init_process@%S/gunicorn/workers/base.py:142;P:run@%S/gunicorn/workers/sync.py:126;P:run_for_one@%S/gunicorn/workers/sync.py:70;P:accept@%S/gunicorn/workers/sync.py:32;P:handle@%S/gunicorn/workers/sync.py:135;P:handle_request@%S/gunicorn/workers/sync.py:178;P:__call__@%S/flask/app.py:1498;P:wsgi_app@%S/flask/app.py:1473;P:full_dispatch_request@%S/flask/app.py:880;P:dispatch_request@%S/flask/app.py:865"
	celeryPy   = "P:<module>@/usr/local/bin/celery:8;P:main@%S/celery/__main__.py:15;P:main@%S/celery/bin/celery.py:236;P:__call__@%S/click/core.py:1157;P:main@%S/click/core.py:1078;P:invoke@%S/click/core.py:1688;P:invoke@%S/click/core.py:1434;P:invoke@%S/click/core.py:783;P:new_func@%S/click/decorators.py:33;P:worker@%S/celery/bin/worker.py:356;P:start@%S/celery/worker/worker.py:202;P:start@%S/celery/bootsteps.py:116;P:start@%S/celery/worker/consumer/consumer.py:340;P:asynloop@%S/celery/worker/loops.py:97;P:__call__@%S/celery/app/trace.py:736;P:trace_task@%S/celery/app/trace.py:451"
	uvicornPy  = "P:<module>@/usr/local/bin/uvicorn:8;P:__call__@%S/click/core.py:1157;P:main@%S/click/core.py:1078;P:invoke@%S/click/core.py:1434;P:invoke@%S/click/core.py:783;P:main@%S/uvicorn/main.py:412;P:run@%S/uvicorn/main.py:579;P:run@%S/uvicorn/server.py:65;P:run@%L/asyncio/runners.py:190;P:run@%L/asyncio/runners.py:118;P:run_until_complete@%L/asyncio/base_events.py:640;P:run_forever@%L/asyncio/base_events.py:607;P:_run_once@%L/asyncio/base_events.py:1922"
	uvicornReq = ";P:_run@%L/asyncio/events.py:80;pyasyncio:task_step;pyasyncio:task_step_impl;pylib:gen_send_ex2;pylib:_PyEval_EvalFrameDefault;P:run_asgi@%S/uvicorn/protocols/http/httptools_impl.py:419;P:__call__@%S/uvicorn/middleware/proxy_headers.py:84;P:__call__@%S/fastapi/applications.py:1054;P:__call__@%S/starlette/applications.py:123;P:__call__@%S/starlette/middleware/errors.py:186;P:__call__@%S/starlette/middleware/exceptions.py:65;P:__call__@%S/starlette/routing.py:756;P:handle@%S/starlette/routing.py:297;P:app@%S/starlette/routing.py:77;P:app@%S/fastapi/routing.py:278;P:run_endpoint_function@%S/fastapi/routing.py:191"
	mlServePy  = "P:<module>@/app/serve.py:41;P:serve_forever@%L/socketserver.py:233;P:_handle_request_noblock@%L/socketserver.py:318;P:process_request@%L/socketserver.py:349;P:finish_request@%L/socketserver.py:362;P:__init__@%L/socketserver.py:755;P:handle@%L/http/server.py:436;P:handle_one_request@%L/http/server.py:424;P:do_POST@/app/serve.py:27"
	pyWorker   = ";P:_worker@%L/concurrent/futures/thread.py:83;P:run@%L/concurrent/futures/thread.py:58"
)

var appEnv = []string{"DEPLOYMENT_ENV=production"}

var programs = []progDef{
	// Go, symbolized by the sampler.
	{name: "api-gateway", comm: "api-gateway", exe: "apigw", kind: progGo, share: 0.12, containers: 8, procs: 1,
		threads: []threadDef{{"", 10, 1}}, env: append([]string{"APP_VERSION=3.18.2"}, appEnv...),
		roots: goStdRoots, mid: [2]int{19, 35}, pkg: "github.com/acme-corp/api-gateway", files: "/src",
		labelKey: "http.route", labels: []string{"/api/v1/orders", "/api/v1/orders/{id}", "/api/v1/cart", "/api/v1/products", "/api/v1/products/{id}", "/api/v1/users/me", "/healthz", "/metrics"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "checkout-service", comm: "checkout-servic", exe: "checkout", kind: progGo, share: 0.075, containers: 5, procs: 1,
		threads: []threadDef{{"", 8, 1}}, service: "checkout", env: append([]string{"APP_VERSION=1.42.0", "OTEL_SERVICE_NAME=checkout"}, appEnv...),
		roots: goRPCRoots, mid: [2]int{19, 35}, pkg: "github.com/acme-corp/checkout", files: "github.com/acme-corp/checkout",
		pSys: 0.7, pIRQ: 0.2},
	{name: "kubelet", comm: "kubelet", exe: "kubelet", kind: progGo, share: 0.04, procs: 1,
		threads: []threadDef{{"", 16, 1}}, unit: "kubelet.service",
		roots: goDaemonRoots, mid: [2]int{19, 35}, pkg: "k8s.io/kubernetes", files: "/workspace/src/k8s.io/kubernetes",
		pSys: 0.7, pIRQ: 0.2},
	{name: "containerd", comm: "containerd", exe: "containerd", kind: progGo, share: 0.025, procs: 1,
		threads: []threadDef{{"", 12, 1}}, unit: "containerd.service",
		roots: goRPCRoots, mid: [2]int{18, 33}, pkg: "github.com/containerd/containerd/v2", files: "/go/src/github.com/containerd/containerd",
		pSys: 0.7, pIRQ: 0.2},
	{name: "coredns", comm: "coredns", exe: "coredns", kind: progGo, share: 0.02, containers: 2, procs: 1,
		threads: []threadDef{{"", 8, 1}}, env: appEnv,
		roots: goDaemonRoots, mid: [2]int{16, 30}, pkg: "github.com/coredns/coredns", files: "/go/src/github.com/coredns/coredns",
		pSys: 0.7, pIRQ: 0.2},
	{name: "kube-proxy", comm: "kube-proxy", exe: "kubeproxy", kind: progGo, share: 0.01, containers: 1, procs: 1,
		threads: []threadDef{{"", 8, 1}},
		roots:   goDaemonRoots, mid: [2]int{16, 30}, pkg: "k8s.io/kubernetes", files: "/workspace/src/k8s.io/kubernetes",
		pSys: 0.7, pIRQ: 0.2},
	{name: "node_exporter", comm: "node_exporter", exe: "nodeexp", kind: progGo, share: 0.015, containers: 1, procs: 1,
		threads: []threadDef{{"", 6, 1}},
		roots:   goStdRoots, mid: [2]int{13, 25}, pkg: "github.com/prometheus/node_exporter", files: "/app",
		pSys: 0.7, pIRQ: 0.2},

	// Go, native frames (the sampler ran without --symbolize-go for them).
	{name: "cilium-agent", comm: "cilium-agent", exe: "cilium", kind: progGoNative, share: 0.05, containers: 1, procs: 1,
		threads: []threadDef{{"", 14, 1}},
		roots:   goDaemonRoots, mid: [2]int{19, 35}, pkg: "github.com/cilium/cilium", files: "/go/src/github.com/cilium/cilium",
		pSys: 0.7, pIRQ: 0.2},
	{name: "ingest-worker", comm: "ingest-worker", exe: "ingest", kind: progGoNative, share: 0.04, containers: 4, procs: 1,
		threads: []threadDef{{"", 8, 1}}, service: "ingest", env: append([]string{"APP_VERSION=0.9.7", "OTEL_SERVICE_NAME=ingest"}, appEnv...),
		roots: goRPCRoots, mid: [2]int{19, 35}, pkg: "github.com/acme-corp/ingest", files: "/src",
		pSys: 0.7, pIRQ: 0.2},
	{name: "containerd-shim", comm: "containerd-shim", exe: "shim", kind: progGoNative, share: 0.012, procs: 22,
		threads: []threadDef{{"", 3, 1}}, unit: "containerd.service",
		roots: goDaemonRoots, mid: [2]int{4, 12}, pkg: "github.com/containerd/containerd/v2", files: "/go/src/github.com/containerd/containerd",
		pSys: 0.7, pIRQ: 0.2},

	// Python.
	{name: "orders-api", comm: "gunicorn", exe: "python", kind: progPython, share: 0.085, containers: 8, procs: 4,
		threads: []threadDef{{"", 1, 1}}, service: "orders-api", env: append([]string{"APP_VERSION=2.7.1", "OTEL_SERVICE_NAME=orders-api"}, appEnv...),
		roots: []rootDef{
			{chain: pyMainNative + ";" + gunicornPy + gunicornWk, weight: 0.90, mid: true, leaves: "web"},
			{chain: pyMainNative + ";" + gunicornPy, weight: 0.04, leaves: "idle"},
			{chain: pyThreadNative + ";" + pyThreadPy + pyWorker, weight: 0.06, mid: true, leaves: "web"},
		},
		mid: [2]int{2, 5}, files: "/app", pSys: 0.7, pIRQ: 0.2},
	{name: "celery", comm: "celery", exe: "python", kind: progPython, share: 0.045, containers: 6, procs: 3,
		threads: []threadDef{{"", 1, 3}, {"", 1, 1}}, env: append([]string{"APP_VERSION=2.7.1"}, appEnv...),
		roots: []rootDef{
			{chain: pyMainNative + ";" + celeryPy, weight: 0.85, mid: true, leaves: "web"},
			{chain: pyThreadNative + ";" + pyThreadPy, weight: 0.15, leaves: "idle"},
		},
		mid: [2]int{2, 5}, files: "/app", pSys: 0.7, pIRQ: 0.2},
	{name: "catalog-api", comm: "uvicorn", exe: "python", kind: progPython, share: 0.025, containers: 3, procs: 2,
		threads: []threadDef{{"", 1, 4}, {"", 2, 1}}, env: append([]string{"APP_VERSION=5.0.3"}, appEnv...),
		roots: []rootDef{
			{chain: pyMainNative + ";" + uvicornPy + uvicornReq, weight: 0.6, mid: true, leaves: "web"},
			{chain: pyMainNative + ";" + uvicornPy, weight: 0.3, leaves: "async"},
			{chain: pyThreadNative + ";" + pyThreadPy + pyWorker, weight: 0.1, mid: true, leaves: "web"},
		},
		mid: [2]int{2, 5}, files: "/app", pSys: 0.7, pIRQ: 0.2},
	{name: "ml-inference", comm: "python", exe: "python", kind: progPython, share: 0.035, containers: 3, procs: 2,
		threads: []threadDef{{"", 1, 6}, {"", 5, 1}}, env: append([]string{"APP_VERSION=2024.11.2", "OMP_NUM_THREADS=6"}, appEnv...),
		roots: []rootDef{
			{chain: pyMainNative + ";" + mlServePy, weight: 0.7, mid: true, leaves: "ml"},
			{chain: "c:clone3;c:start_thread", weight: 0.3, leaves: "blas"},
		},
		mid: [2]int{2, 5}, files: "/app", pSys: 0.7, pIRQ: 0.2},

	// C and C++.
	{name: "envoy", comm: "envoy", exe: "envoy", kind: progNative, share: 0.10, containers: 34, procs: 1,
		threads: []threadDef{{"envoy", 1, 2}, {"wrk:worker_%d", 3, 3}},
		roots:   cThreadRoots, mid: [2]int{20, 38}, libs: []string{"cxx", "gcc", "m", "ld", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "nginx", comm: "nginx", exe: "nginx", kind: progNative, share: 0.07, containers: 4, procs: 5,
		threads: []threadDef{{"", 1, 1}},
		roots:   cMainRoots, mid: [2]int{16, 32}, libs: []string{"pcre", "ssl", "crypto", "z", "crypt", "ld", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "postgres", comm: "postgres", exe: "postgres", kind: progNative, share: 0.055, containers: 2, procs: 8,
		threads: []threadDef{{"", 1, 1}}, env: appEnv,
		roots: cMainRoots, mid: [2]int{16, 34}, libs: []string{"icui18n", "icuuc", "xml2", "lz4", "zstd", "lzma", "ldap", "gssapi", "krb5", "k5crypto", "krb5support", "comerr", "keyutils", "sd", "ssl", "crypto", "z", "m", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "redis", comm: "redis-server", exe: "redis", kind: progNative, share: 0.03, containers: 4, procs: 1,
		threads: []threadDef{{"redis-server", 1, 6}, {"bio_close_file", 1, 1}, {"bio_aof", 1, 1}, {"bio_lazy_free", 1, 1}},
		roots:   cThreadRoots, mid: [2]int{13, 25}, libs: []string{"jemalloc", "ssl", "crypto", "m", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "haproxy", comm: "haproxy", exe: "haproxy", kind: progNative, share: 0.02, containers: 2, procs: 1,
		threads: []threadDef{{"haproxy", 4, 1}},
		roots:   cThreadRoots, mid: [2]int{18, 33}, libs: []string{"pcre", "ssl", "crypto", "z", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "systemd", comm: "systemd", exe: "systemd", kind: progNative, share: 0.004, procs: 1,
		threads: []threadDef{{"", 1, 1}}, unit: "init.scope",
		roots: cMainRoots, mid: [2]int{13, 25}, libs: []string{"sdshared", "mount", "blkid", "selinux", "cap", "gcrypt", "lz4", "zstd", "lzma", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "systemd-journald", comm: "systemd-journal", exe: "journald", kind: progNative, share: 0.008, procs: 1,
		threads: []threadDef{{"systemd-journal", 1, 4}, {"journal-offline", 1, 1}}, unit: "systemd-journald.service",
		roots: cThreadRoots, mid: [2]int{5, 14}, libs: []string{"sdshared", "gcrypt", "lz4", "zstd", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "systemd-resolved", comm: "systemd-resolve", exe: "resolved", kind: progNative, share: 0.003, procs: 1,
		threads: []threadDef{{"", 1, 1}}, unit: "systemd-resolved.service",
		roots: cMainRoots, mid: [2]int{5, 14}, libs: []string{"sdshared", "ssl", "crypto", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "dbus-daemon", comm: "dbus-daemon", exe: "dbusd", kind: progNative, share: 0.002, procs: 1,
		threads: []threadDef{{"", 1, 1}}, unit: "dbus.service",
		roots: cMainRoots, mid: [2]int{4, 12}, libs: []string{"dbus", "expat", "sd", "capng", "audit", "selinux", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "sshd", comm: "sshd", exe: "sshd", kind: progNative, share: 0.004, procs: 4,
		threads: []threadDef{{"", 1, 1}}, unit: "ssh.service",
		roots: cMainRoots, mid: [2]int{4, 14}, libs: []string{"pam", "audit", "gssapi", "krb5", "k5crypto", "krb5support", "comerr", "keyutils", "nsssd", "resolv", "capng", "selinux", "crypt", "crypto", "z", "ld", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "chronyd", comm: "chronyd", exe: "chronyd", kind: progNative, share: 0.0015, procs: 1,
		threads: []threadDef{{"", 1, 1}}, unit: "chrony.service",
		roots: cMainRoots, mid: [2]int{3, 10}, libs: []string{"cap", "m", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "rsyslogd", comm: "rsyslogd", exe: "rsyslogd", kind: progNative, share: 0.004, procs: 1,
		threads: []threadDef{{"", 1, 1}, {"in:imuxsock", 1, 2}, {"in:imjournal", 1, 2}, {"rs:main Q:Reg", 1, 3}}, unit: "rsyslog.service",
		roots: cThreadRoots, mid: [2]int{4, 12}, libs: []string{"imuxsock", "imjournal", "uuid", "sd", "z", "c"},
		pSys: 0.7, pIRQ: 0.2},
	{name: "bash", comm: "bash", exe: "bash", kind: progNative, share: 0.002, procs: 2,
		threads: []threadDef{{"", 1, 1}}, unit: "session-3.scope",
		roots: cMainRoots, mid: [2]int{3, 10}, libs: []string{"tinfo", "c"},
		pSys: 0.7, pIRQ: 0.2},

	// Kernel threads.
	{name: "kworker", kind: progKthread, share: 0.03,
		comms: []string{"kworker/0:1H", "kworker/u128:0", "kworker/u128:2", "kworker/u128:5", "kworker/3:2", "kworker/7:1", "kworker/12:0", "kworker/17:2", "kworker/21:1", "kworker/26:1H", "kworker/30:0", "kworker/33:2", "kworker/38:1", "kworker/41:0", "kworker/47:2", "kworker/52:1", "kworker/58:0", "kworker/63:1"},
		roots: []rootDef{{weight: 1, leaves: "kworker"}}},
	{name: "ksoftirqd", kind: progKthread, share: 0.02,
		comms: []string{"ksoftirqd/0", "ksoftirqd/5", "ksoftirqd/9", "ksoftirqd/14", "ksoftirqd/18", "ksoftirqd/23", "ksoftirqd/29", "ksoftirqd/36", "ksoftirqd/42", "ksoftirqd/49", "ksoftirqd/55", "ksoftirqd/61"},
		roots: []rootDef{{weight: 1, leaves: "ksoftirqd"}}},
	{name: "kswapd", kind: progKthread, share: 0.003, comms: []string{"kswapd0"}, roots: []rootDef{{weight: 1, leaves: "kswapd"}}},
	{name: "jbd2", kind: progKthread, share: 0.003, comms: []string{"jbd2/nvme0n1p1-"}, roots: []rootDef{{weight: 1, leaves: "jbd2"}}},
	{name: "xfsaild", kind: progKthread, share: 0.002, comms: []string{"xfsaild/nvme1n1"}, roots: []rootDef{{weight: 1, leaves: "xfsaild"}}},
	{name: "rcu", kind: progKthread, share: 0.003, comms: []string{"rcu_preempt"}, roots: []rootDef{{weight: 1, leaves: "rcu"}}},
	{name: "kcompactd", kind: progKthread, share: 0.001, comms: []string{"kcompactd0"}, roots: []rootDef{{weight: 1, leaves: "kcompactd"}}},
}
