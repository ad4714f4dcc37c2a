package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/test/streamtest"
	"github.com/tandem-profiler/tandem/test/waittest"
)

// TestServeUploadsSymbols: an executable passed over the socket with its
// descriptor reaches --debuginfo-address (with the remote store's
// plaintext setting), stripped, and the encoder keeps no descriptor of it.
func TestServeUploadsSymbols(t *testing.T) {
	store, symbols := parcatest.StartSymbolStore(t)

	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	orig, err := os.ReadFile("/usr/bin/sha256sum")
	if err != nil {
		privtest.SkipOrFail(t, "needs a real executable: %v", err)
	}
	if err := os.WriteFile(bin, orig, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	uid := uint(os.Getuid())
	f := &serveFlags{socket: sock, allowedUIDs: []uint{uid}}
	f.out.register(pflag.NewFlagSet("test", pflag.ContinueOnError))
	f.out.confine = false // serve runs in the test process
	f.out.def.Dir = filepath.Join(dir, "profiles")
	f.out.def.Remote.Insecure = true
	f.out.debuginfo.address = symbols
	f.out.debuginfo.upload.TempDir = dir
	// Profiles over OTLP, symbols to the debuginfo service.
	recv := otlptest.StartReceiver(t)
	f.out.def.Remote.Address = recv.Addr()
	f.out.profilingDuration = time.Second
	if err := f.out.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, f, slog.New(slog.DiscardHandler), prometheus.NewRegistry()) }()

	client := newTestClient(t, sock, uint32(uid))
	cfg := synth.DefaultConfig()
	cfg.Samples = 10
	_, hello, _ := streamtest.Session(t, cfg)
	sampler := streamtest.Start(t, client, hello)
	waittest.For(t, "the sampler connects", func() bool { return client.Stats().Connected })

	n := schema.ExecutableNotice{FileID: schema.FileID{Hi: 7, Lo: 9}, FileName: "tool", Path: bin, HasDescriptor: true}
	payload, err := schema.EncodeExecutableNotice(&n, nil)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !client.SendExecutable(payload, fd) {
		t.Fatal("executable not sent")
	}
	key := "00000000000000070000000000000009" // no GNU build id in the notice: the file id
	waittest.For(t, "the upload", func() bool {
		_, ok := store.Uploaded(key)
		return ok
	})
	got, _ := store.Uploaded(key)
	if !bytes.HasPrefix(got, []byte("\x7fELF")) || len(got) >= len(orig)/2 {
		t.Errorf("uploaded %d bytes of a %d-byte executable: want a stripped ELF", len(got), len(orig))
	}
	// The uploader closes its descriptor; the symbolizer keeps its own
	// copy (OTLP output: native frames are named in the encoder) until
	// serve ends. The sampler-side client keeps fd itself, to send the
	// executable again after a reconnection: not the encoder's.
	clientFD := fd.Fd()
	waittest.For(t, "the uploader's descriptor to close", func() bool { return openUnder(t, dir, clientFD) == 1 })

	// A sample in that executable: its mapping names the key the symbols
	// were uploaded under, where Parca's OTLP ingestion looks.
	b := schema.NewBatchBuilder()
	m := b.Mapping(schema.Mapping{FileName: b.String("tool"), Path: b.String(bin), FileID: n.FileID, Start: 0x400000, End: 0x500000})
	stack := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x1234, Mapping: m})})
	b.AddSample(schema.Sample{TimestampUnixNano: time.Now().UnixNano(), Origin: schema.OriginCPUSampling, Value: 1,
		Process: b.Process(schema.Process{PID: 42, Comm: b.String("tool")}), TID: 42, Stack: stack})
	b.Batch().Sequence = 1
	sampler.Send(t, b.Batch())
	waittest.For(t, "the batch's export", func() bool { return client.Stats().AckedSeq >= 1 })
	samples := recv.Samples(t)
	if len(samples) != 1 || len(samples[0].Frames) != 1 || samples[0].Frames[0].GNUBuildID != key {
		t.Errorf("exported samples %+v: want one frame whose mapping's build_id.gnu is the upload key %s", samples, key)
	}

	sampler.Stop()
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if n := openUnder(t, dir, clientFD); n != 0 {
		t.Errorf("%d descriptors left open after serve", n)
	}
	// The encoder is gone, so Close reports its goodbye unsent; what
	// matters here is that it closes the executables it kept.
	_ = client.Close(context.Background(), nil)
	if n := openUnder(t, dir); n != 0 {
		t.Errorf("%d descriptors left open after the client's Close (it keeps sent executables only until then)", n)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "tandem-debuginfo")); len(ents) != 0 {
		t.Errorf("scratch files left behind: %v", ents)
	}
}

// openUnder counts this process's descriptors on regular files under dir,
// leaving out the descriptors in except.
func openUnder(t *testing.T, dir string, except ...uintptr) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if slices.ContainsFunc(except, func(fd uintptr) bool { return strconv.FormatUint(uint64(fd), 10) == e.Name() }) {
			continue
		}
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir) && !strings.HasSuffix(target, ".sock") {
			if fi, err := os.Stat(target); err == nil && fi.Mode().IsRegular() {
				n++
			}
		}
	}
	return n
}

// TestReplaySkipsUpload: a dump's notices carry no descriptors, so replay
// with symbol upload on uploads nothing (and still writes its profiles).
func TestReplaySkipsUpload(t *testing.T) {
	store, symbols := parcatest.StartSymbolStore(t)

	dump, _ := writeSynthDump(t, 2000)
	notices := 0
	d, err := ipc.OpenDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	for {
		fr, err := d.Next()
		if err != nil {
			break
		}
		if fr.Type == ipc.FrameExecutable {
			notices++
		}
	}
	d.Close()
	if notices == 0 {
		t.Fatal("the synthetic dump has no executable notices")
	}
	out := t.TempDir()
	if err := run(t, "replay", "--output-dir", out, "--debuginfo-address", symbols, "--remote-store-insecure",
		"--debuginfo-temp-dir", t.TempDir(), dump); err != nil {
		t.Fatal(err)
	}
	if n := store.Received(); n != 0 || len(store.Finished()) != 0 {
		t.Errorf("replay uploaded %d executables from a dump", n)
	}
	if files, _ := filepath.Glob(filepath.Join(out, "*.pb.gz")); len(files) == 0 {
		t.Error("replay wrote no profile")
	}
}

// TestDebuginfoUsesRemoteStoreCredentials: --debuginfo-address is dialed
// with the remote store's token and headers, on every RPC of the flow
// (unary and the Upload stream).
func TestDebuginfoUsesRemoteStoreCredentials(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{} // method -> "authorization|x-tenant"
	record := func(ctx context.Context, method string) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		seen[method] = append(seen[method], strings.Join(md.Get("authorization"), ",")+"|"+strings.Join(md.Get("x-tenant"), ","))
		mu.Unlock()
	}
	store, symbols := parcatest.StartSymbolStore(t,
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			record(ctx, info.FullMethod)
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			record(ss.Context(), info.FullMethod)
			return h(srv, ss)
		}),
	)

	o, err := parseOutput(t, "--debuginfo-address", symbols, "--remote-store-insecure",
		"--remote-store-bearer-token", "s3cret", "--remote-store-grpc-headers", "x-tenant=t1",
		"--debuginfo-temp-dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e, err := newExecutables(o, nil, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/usr/bin/sha256sum")
	if err != nil {
		privtest.SkipOrFail(t, "needs a real executable: %v", err)
	}
	e.Submit(&schema.ExecutableNotice{FileID: schema.FileID{Hi: 1, Lo: 2}, Path: f.Name(), HasDescriptor: true}, f)
	waittest.For(t, "the upload", func() bool {
		return len(store.Finished()) == 1
	})
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, m := range []string{"ShouldInitiateUpload", "InitiateUpload", "Upload", "MarkUploadFinished"} {
		full := "/parca.debuginfo.v1alpha1.DebuginfoService/" + m
		if got := seen[full]; len(got) != 1 || got[0] != "Bearer s3cret|t1" {
			t.Errorf("%s: metadata %q, want one call with the bearer token and x-tenant", m, got)
		}
	}
}
