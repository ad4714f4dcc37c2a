package debuginfo

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tandem-profiler/tandem/internal/retry"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/test/waittest"
)

const cBinary = "/usr/bin/sha256sum"

func testLogger(t testing.TB) *slog.Logger {
	if _, bench := t.(*testing.B); bench {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.TempDir = t.TempDir()
	cfg.QueueSize = 16
	cfg.MaxParallel = 4
	cfg.RPCRetry.Initial = time.Millisecond
	cfg.Timeout = 30 * time.Second
	return cfg
}

func newTestUploader(t testing.TB, s *parcatest.SymbolStore, cfg Config) (*Uploader, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	u, err := New(cfg, s.Dial(t), testLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close(context.Background()) })
	return u, reg
}

// copyBinary copies src into dir (so open descriptors can be told apart
// from anything else in /proc/self/fd by their path).
func copyBinary(t testing.TB, src, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		privtest.SkipOrFail(t, "needs a real executable: %s: %v", src, err)
	}
	dst := filepath.Join(dir, name)
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// openFDs counts this process's descriptors open on files under dir.
func openFDs(t testing.TB, dir string) int {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("descriptor counting reads /proc/self/fd")
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir) {
			n++
		}
	}
	return n
}

func gnuBuildID(t testing.TB, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		t.Fatalf("build id note: %v", err)
	}
	return hex.EncodeToString(b[16:])
}

func notice(path string, id uint64, gnu string) *schema.ExecutableNotice {
	return &schema.ExecutableNotice{FileID: schema.FileID{Hi: id, Lo: ^id}, FileName: filepath.Base(path), Path: path,
		GNUBuildID: gnu, HasDescriptor: true}
}

func submitFile(t testing.TB, u *Uploader, n *schema.ExecutableNotice) bool {
	t.Helper()
	f, err := os.Open(n.Path)
	if err != nil {
		t.Fatal(err)
	}
	return u.Submit(n, f)
}

// idle waits until nothing is queued or uploading.
func idle(t testing.TB, u *Uploader) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		u.mu.Lock()
		n := len(u.inFlight)
		u.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("uploads did not finish")
}

func counter(c *prometheus.CounterVec, label string) int {
	return int(testutil.ToFloat64(c.WithLabelValues(label)))
}

// TestDecisionTable runs the reference's cases end to end against the
// in-process server, over the gRPC strategy with stripping and over the
// signed-URL strategy with whole files.
func TestDecisionTable(t *testing.T) {
	for _, signed := range []bool{false, true} {
		name := "grpc"
		if signed {
			name = "signed_url"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bin := copyBinary(t, cBinary, dir, "sha256sum")
			orig, _ := os.ReadFile(bin)
			gnu := gnuBuildID(t, bin)
			if gnu == "" {
				privtest.SkipOrFail(t, "%s has no GNU build id", cBinary)
			}
			s := startParcaServer(t, signed)
			cfg := testConfig(t)
			cfg.Strip = !signed
			u, _ := newTestUploader(t, s, cfg)

			// First upload.
			if !submitFile(t, u, notice(bin, 1, strings.ToUpper(gnu))) {
				t.Fatal("not queued")
			}
			idle(t, u)
			e, ok := s.Entry(gnu)
			if !ok || e.Uploading || e.Invalid {
				t.Fatalf("after the first upload: %+v, %v (want uploaded and valid, keyed by the lower-case GNU build id)", e, ok)
			}
			if e.Hash != (schema.FileID{Hi: 1, Lo: ^uint64(1)}).Hex() {
				t.Errorf("hash %q, want the file id", e.Hash)
			}
			if got := counter(u.m.uploads, resultSuccess); got != 1 {
				t.Errorf("successes %d, want 1", got)
			}
			ef, err := elf.NewFile(bytes.NewReader(e.Data))
			if err != nil {
				t.Fatalf("uploaded bytes are not an ELF: %v", err)
			}
			if signed {
				if !bytes.Equal(e.Data, orig) || s.Calls("PUT") != 1 || s.Calls("Upload") != 0 {
					t.Errorf("signed URL: %d bytes stored (want the %d of the file), PUTs %d, streams %d", len(e.Data), len(orig), s.Calls("PUT"), s.Calls("Upload"))
				}
			} else {
				if ef.Section(".text").Type != elf.SHT_NOBITS || len(e.Data) >= len(orig)/2 {
					t.Errorf("gRPC: uploaded %d bytes of %d, .text %v: want a stripped copy", len(e.Data), len(orig), ef.Section(".text").Type)
				}
				if s.Calls("Upload") != 1 {
					t.Errorf("%d Upload streams, want 1", s.Calls("Upload"))
				}
			}
			if got := int(testutil.ToFloat64(u.m.bytes)); got != len(e.Data) {
				t.Errorf("uploaded bytes metric %d, want %d", got, len(e.Data))
			}

			// The same file again: the do-not-retry cache answers, no RPC.
			should := s.Calls("ShouldInitiateUpload")
			if submitFile(t, u, notice(bin, 1, gnu)) {
				t.Error("queued a file that was just uploaded")
			}
			if s.Calls("ShouldInitiateUpload") != should || counter(u.m.skipped, "do_not_retry") != 1 {
				t.Error("a cached file reached the server")
			}

			// Already uploaded (another file id, same build id): the server
			// says no, nothing is sent, and the file is not asked about again.
			submitFile(t, u, notice(bin, 2, gnu))
			idle(t, u)
			if counter(u.m.uploads, resultNotNeeded) != 1 || s.Calls("InitiateUpload") != 1 {
				t.Errorf("already uploaded: not_needed %d, InitiateUpload calls %d", counter(u.m.uploads, resultNotNeeded), s.Calls("InitiateUpload"))
			}
			if !u.dnr.contains(schema.FileID{Hi: 2, Lo: ^uint64(2)}) {
				t.Error("already uploaded: not cached")
			}

			// In progress: cached for RetryLater only, then asked again.
			s.Set("deadbeef", parcatest.Debuginfo{Uploading: true, UploadID: "x", Started: time.Now()})
			clock := time.Now()
			u.dnr.now = func() time.Time { return clock }
			submitFile(t, u, notice(bin, 3, "deadbeef"))
			idle(t, u)
			id3 := schema.FileID{Hi: 3, Lo: ^uint64(3)}
			if counter(u.m.uploads, resultRetryLater) != 1 || !u.dnr.contains(id3) {
				t.Fatalf("in progress: retry_later %d, cached %v", counter(u.m.uploads, resultRetryLater), u.dnr.contains(id3))
			}
			clock = clock.Add(cfg.RetryLater + time.Second)
			if u.dnr.contains(id3) {
				t.Error("in progress: still cached after RetryLater")
			}
			// The in-progress upload went stale: now it is taken over.
			s.SetClock(func() time.Time { return time.Now().Add(s.MaxUploadDuration() + 3*time.Minute) })
			submitFile(t, u, notice(bin, 3, "deadbeef"))
			idle(t, u)
			if e, _ := s.Entry("deadbeef"); e.Uploading || len(e.Data) == 0 {
				t.Errorf("stale upload not taken over: %+v", e)
			}
			s.SetClock(nil)

			// Invalid, then re-upload with a different hash; the same hash
			// is refused (AlreadyExists) and cached for good.
			s.Set("badbad", parcatest.Debuginfo{Invalid: true, Hash: "some other hash", Data: []byte("junk")})
			submitFile(t, u, notice(bin, 4, "badbad"))
			idle(t, u)
			if e, _ := s.Entry("badbad"); e.Invalid || e.Uploading || !bytes.HasPrefix(e.Data, []byte("\x7fELF")) {
				t.Errorf("invalid then re-upload: %+v", e.Invalid)
			}
			s.Set("badbad2", parcatest.Debuginfo{Invalid: true, Hash: (schema.FileID{Hi: 5, Lo: ^uint64(5)}).Hex(), Data: []byte("junk")})
			before := counter(u.m.uploads, resultNotNeeded)
			submitFile(t, u, notice(bin, 5, "badbad2"))
			idle(t, u)
			if counter(u.m.uploads, resultNotNeeded) != before+1 || !u.dnr.contains(schema.FileID{Hi: 5, Lo: ^uint64(5)}) {
				t.Errorf("invalid with the same hash: want not_needed and cached")
			}

			// No GNU build id: keyed by the file id.
			submitFile(t, u, notice(bin, 6, ""))
			idle(t, u)
			if _, ok := s.Entry((schema.FileID{Hi: 6, Lo: ^uint64(6)}).Hex()); !ok {
				t.Error("no GNU build id: not uploaded under the file id")
			}
			if n := openFDs(t, dir); n != 0 {
				t.Errorf("%d descriptors still open", n)
			}
		})
	}
}

// TestQueueAndDescriptors fills the queue behind a blocked server: what
// does not fit is dropped and counted, duplicates are skipped, Close drops
// what is still queued, and every descriptor ends up closed.
func TestQueueAndDescriptors(t *testing.T) {
	dir := t.TempDir()
	bin := copyBinary(t, cBinary, dir, "sha256sum")
	s := startParcaServer(t, false)
	release := make(chan struct{})
	entered := make(chan struct{}, 100)
	s.SetBeforeShould(func() error { entered <- struct{}{}; <-release; return nil })
	cfg := testConfig(t)
	cfg.MaxParallel, cfg.QueueSize = 2, 3
	u, _ := newTestUploader(t, s, cfg)

	if n := openFDs(t, dir); n != 0 {
		t.Fatalf("%d descriptors open at start", n)
	}
	var queued int
	for i := range 10 {
		if submitFile(t, u, notice(bin, uint64(100+i), "")) {
			queued++
		}
		if i < 2 {
			<-entered // the two workers are busy before the queue fills
		}
	}
	if queued != 5 {
		t.Errorf("queued %d, want 2 running + 3 queued", queued)
	}
	if got := counter(u.m.dropped, "queue_full"); got != 5 {
		t.Errorf("dropped %d, want 5", got)
	}
	if got := openFDs(t, dir); got != 5 {
		t.Errorf("%d descriptors open, want 5 (2 uploading, 3 queued)", got)
	}
	// The same file id while it is queued: skipped, closed.
	if submitFile(t, u, notice(bin, 104, "")) || counter(u.m.skipped, "in_progress") != 1 {
		t.Error("duplicate of a queued file was not skipped")
	}
	// No descriptor: counted.
	if u.Submit(notice(bin, 200, ""), nil) || counter(u.m.skipped, "no_descriptor") != 1 {
		t.Error("notice without descriptor not counted")
	}
	if got := int(testutil.ToFloat64(u.m.descriptors)); got != 5 {
		t.Errorf("descriptor gauge %d, want 5", got)
	}

	// Close while two run and three wait: the waiting ones are dropped,
	// the running ones finish once the server answers.
	closed := make(chan error)
	go func() { closed <- u.Close(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := counter(u.m.dropped, resultShutdownDrop); got != 3 {
		t.Errorf("dropped at shutdown %d, want 3", got)
	}
	if got := counter(u.m.uploads, resultSuccess); got != 2 {
		t.Errorf("%d uploads finished, want the 2 running", got)
	}
	if submitFile(t, u, notice(bin, 300, "")) || counter(u.m.dropped, "closed") != 1 {
		t.Error("Submit after Close queued")
	}
	if n := openFDs(t, dir); n != 0 {
		t.Errorf("%d descriptors open after Close, want 0", n)
	}
	if ents, _ := os.ReadDir(filepath.Join(cfg.TempDir, scratchSubdir)); len(ents) != 0 {
		t.Errorf("scratch files left: %v", ents)
	}
}

// TestCloseCancels: a server that never answers does not hold Close past
// its context, and the descriptors are still closed.
func TestCloseCancels(t *testing.T) {
	dir := t.TempDir()
	bin := copyBinary(t, cBinary, dir, "sha256sum")
	s := startParcaServer(t, false)
	block := make(chan struct{})
	defer close(block)
	entered := make(chan struct{}, 3)
	s.SetBeforeShould(func() error { entered <- struct{}{}; <-block; return nil })
	u, _ := newTestUploader(t, s, testConfig(t))
	for i := range 3 {
		submitFile(t, u, notice(bin, uint64(i+1), ""))
	}
	<-entered // at least one upload is waiting for the server
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := u.Close(ctx); err == nil {
		t.Error("Close returned nil although uploads were cancelled")
	}
	if n := openFDs(t, dir); n != 0 {
		t.Errorf("%d descriptors open after Close, want 0", n)
	}
}

// TestRejectsAndRetries: a non-ELF file is never retried; a transient
// Unavailable is retried inside the upload; a server error leaves the file
// uncached for the next notice.
func TestRejectsAndRetries(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755)
	bin := copyBinary(t, cBinary, dir, "sha256sum")
	s := startParcaServer(t, false)
	var mu sync.Mutex
	failures := 2
	code := codes.Unavailable
	s.SetBeforeShould(func() error {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return status.Error(code, "try again")
		}
		return nil
	})
	u, _ := newTestUploader(t, s, testConfig(t))

	submitFile(t, u, notice(bin, 1, ""))
	idle(t, u)
	if counter(u.m.uploads, resultSuccess) != 1 || s.Calls("ShouldInitiateUpload") != 3 {
		t.Errorf("Unavailable twice: successes %d, ShouldInitiateUpload calls %d (want 1, 3)", counter(u.m.uploads, resultSuccess), s.Calls("ShouldInitiateUpload"))
	}

	submitFile(t, u, notice(script, 2, ""))
	idle(t, u)
	if counter(u.m.uploads, resultRejected) != 1 || !u.dnr.contains(schema.FileID{Hi: 2, Lo: ^uint64(2)}) {
		t.Error("a shell script was not rejected for good")
	}

	mu.Lock()
	failures, code = 1, codes.Internal
	mu.Unlock()
	submitFile(t, u, notice(bin, 3, ""))
	idle(t, u)
	if counter(u.m.uploads, resultFailed) != 1 || u.dnr.contains(schema.FileID{Hi: 3, Lo: ^uint64(3)}) {
		t.Error("a server error: want failed and not cached")
	}
	submitFile(t, u, notice(bin, 3, ""))
	idle(t, u)
	if counter(u.m.uploads, resultSuccess) != 2 {
		t.Error("the next notice after a failure did not upload")
	}
	if n := openFDs(t, dir); n != 0 {
		t.Errorf("%d descriptors open", n)
	}
}

func TestNewCleansTempDir(t *testing.T) {
	cfg := testConfig(t)
	stale := filepath.Join(cfg.TempDir, scratchSubdir, "strip-old")
	os.MkdirAll(filepath.Dir(stale), 0o700)
	os.WriteFile(stale, []byte("x"), 0o600)
	other := filepath.Join(cfg.TempDir, "not-ours")
	os.WriteFile(other, []byte("x"), 0o600)
	s := startParcaServer(t, false)
	newTestUploader(t, s, cfg)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale scratch file survived New: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("New removed a file it does not own: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"default", func(*Config) {}, ""},
		{"queue", func(c *Config) { c.QueueSize = 0 }, "--debuginfo-upload-queue-size=0"},
		{"parallel", func(c *Config) { c.MaxParallel = -1 }, "--debuginfo-upload-max-parallel=-1"},
		{"temp dir", func(c *Config) { c.TempDir = "" }, "--debuginfo-temp-dir is empty"},
		{"temp dir unused without strip", func(c *Config) { c.TempDir, c.Strip = "", false }, ""},
		{"timeout", func(c *Config) { c.Timeout = 0 }, "--debuginfo-upload-timeout=0s"},
		{"chunk", func(c *Config) { c.ChunkSize = 64 << 20 }, "chunk size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestBuildID(t *testing.T) {
	n := &schema.ExecutableNotice{FileID: schema.FileID{Hi: 0x0123456789abcdef, Lo: 0xfedcba9876543210}}
	if id, typ := BuildID(n); id != "0123456789abcdeffedcba9876543210" || typ.String() != "BUILD_ID_TYPE_HASH" {
		t.Errorf("file id: %s %v", id, typ)
	}
	n.GNUBuildID = "ABCDEF01"
	if id, typ := BuildID(n); id != "abcdef01" || typ.String() != "BUILD_ID_TYPE_GNU" {
		t.Errorf("GNU: %s %v", id, typ)
	}
}

// BenchmarkUpload measures upload throughput of a 32 MiB payload (whole
// file, no stripping) over both strategies on loopback.
func BenchmarkUpload(b *testing.B) {
	for _, signed := range []bool{false, true} {
		name := "grpc"
		if signed {
			name = "signed_url"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "blob")
			payload := bytes.Repeat([]byte("0123456789abcdef"), 2<<20)
			if err := os.WriteFile(path, payload, 0o600); err != nil {
				b.Fatal(err)
			}
			s := startParcaServer(b, signed)
			cfg := testConfig(b)
			cfg.Strip = false
			u, _ := newTestUploader(b, s, cfg)
			b.SetBytes(int64(len(payload)))
			i := uint64(0)
			for b.Loop() {
				i++
				submitFile(b, u, notice(path, i, ""))
				idle(b, u)
			}
			if got := counter(u.m.uploads, resultSuccess); got != int(i) {
				b.Fatalf("%d successes of %d", got, i)
			}
		})
	}
	// Strip this test binary (a Go binary with DWARF) and upload the copy;
	// bytes/s are of the input.
	b.Run("strip_grpc", func(b *testing.B) {
		exe, err := os.Executable()
		if err != nil {
			b.Skip(err)
		}
		fi, err := os.Stat(exe)
		if err != nil {
			b.Skip(err)
		}
		s := startParcaServer(b, false)
		u, _ := newTestUploader(b, s, testConfig(b))
		b.SetBytes(fi.Size())
		i := uint64(0)
		for b.Loop() {
			i++
			submitFile(b, u, notice(exe, i, ""))
			idle(b, u)
		}
		if got := counter(u.m.uploads, resultSuccess); got != int(i) {
			b.Fatalf("%d successes of %d", got, i)
		}
		in, out := testutil.ToFloat64(u.m.stripBytes.WithLabelValues("input")), testutil.ToFloat64(u.m.stripBytes.WithLabelValues("output"))
		b.ReportMetric(out/in, "out/in")
	})
}

// TestGRPCChunks: a whole file in many small chunks arrives byte for byte.
func TestGRPCChunks(t *testing.T) {
	dir := t.TempDir()
	bin := copyBinary(t, cBinary, dir, "sha256sum")
	orig, _ := os.ReadFile(bin)
	s := startParcaServer(t, false)
	cfg := testConfig(t)
	cfg.Strip, cfg.ChunkSize = false, 1000
	u, _ := newTestUploader(t, s, cfg)
	submitFile(t, u, notice(bin, 1, ""))
	idle(t, u)
	e, ok := s.Entry((schema.FileID{Hi: 1, Lo: ^uint64(1)}).Hex())
	if !ok || !bytes.Equal(e.Data, orig) {
		t.Fatalf("stored %d bytes, want the %d of the file", len(e.Data), len(orig))
	}
}

// TestRPCRetryWaitsOnTheClock: a unary RPC failing with Unavailable is
// retried after the one retry policy's wait, measured on its clock: not
// before the fake clock passes it, and at once after.
func TestRPCRetryWaitsOnTheClock(t *testing.T) {
	bin := copyBinary(t, cBinary, t.TempDir(), "sha256sum")
	s := startParcaServer(t, false)
	var mu sync.Mutex
	failures := 1
	s.SetBeforeShould(func() error {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return status.Error(codes.Unavailable, "try again")
		}
		return nil
	})
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	cfg := testConfig(t)
	cfg.RPCRetry = retry.Policy{Initial: 10 * time.Second, Max: 10 * time.Second, Clock: clk}
	u, _ := newTestUploader(t, s, cfg)
	submitFile(t, u, notice(bin, 1, ""))
	waittest.For(t, "the uploader to wait before retrying", clk.HasWaiters)
	clk.Step(9 * time.Second)
	if n := s.Calls("ShouldInitiateUpload"); n != 1 || !clk.HasWaiters() {
		t.Fatalf("%d ShouldInitiateUpload calls 9 s into a 10 s wait, want 1", n)
	}
	clk.Step(time.Second)
	idle(t, u)
	if n := s.Calls("ShouldInitiateUpload"); n != 2 || counter(u.m.uploads, resultSuccess) != 1 {
		t.Errorf("after the wait: %d ShouldInitiateUpload calls, %d successes; want 2 and 1", n, counter(u.m.uploads, resultSuccess))
	}
}

// TestRPCRetryHonoursServerDelay: a server that answers ResourceExhausted
// with a RetryInfo of a minute is called again after that minute, not after
// the policy's shorter wait.
func TestRPCRetryHonoursServerDelay(t *testing.T) {
	bin := copyBinary(t, cBinary, t.TempDir(), "sha256sum")
	s := startParcaServer(t, false)
	var mu sync.Mutex
	failures := 1
	s.SetBeforeShould(func() error {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			st, err := status.New(codes.ResourceExhausted, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Minute)})
			if err != nil {
				return err
			}
			return st.Err()
		}
		return nil
	})
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	cfg := testConfig(t)
	cfg.RPCRetry = retry.Policy{Initial: time.Second, Max: time.Second, Clock: clk}
	u, _ := newTestUploader(t, s, cfg)
	submitFile(t, u, notice(bin, 1, ""))
	waittest.For(t, "the uploader to wait before retrying", clk.HasWaiters)
	clk.Step(59 * time.Second)
	if n := s.Calls("ShouldInitiateUpload"); n != 1 || !clk.HasWaiters() {
		t.Fatalf("%d ShouldInitiateUpload calls 59 s into the server's 1 min delay, want 1", n)
	}
	clk.Step(time.Second)
	idle(t, u)
	if n := s.Calls("ShouldInitiateUpload"); n != 2 || counter(u.m.uploads, resultSuccess) != 1 {
		t.Errorf("after the delay: %d ShouldInitiateUpload calls, %d successes; want 2 and 1", n, counter(u.m.uploads, resultSuccess))
	}
}
