package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/test/streamtest"
)

// activator plays systemd's part for a socket-activated encoder: it holds
// the listening socket for the whole test (as tandem-encoder.socket does),
// and each generation of the encoder is started by systemd-socket-activate,
// which inherits that socket (LISTEN_FDS), waits for a connection, sets
// LISTEN_PID and execs `setpriv` (uid 65534) and then tandem-encoder, all
// in one process. When an encoder dies, the next generation is started
// (Restart=on-failure) on the same socket: connections made meanwhile wait
// in its backlog.
type activator struct {
	t        *testing.T
	bin      string
	socket   string
	ln       *os.File // the listening socket, held here across generations
	notify   *net.UnixConn
	recvAddr string

	mu       sync.Mutex
	current  *proc
	all      []*proc
	gens     int
	httpAddr string
	ready    atomic.Int64 // READY=1 messages received
	watchdog atomic.Int64 // WATCHDOG=1 messages received
	stopped  bool
	done     chan struct{}
}

func newActivator(t *testing.T, bin, dir, recvAddr string) *activator {
	t.Helper()
	if lookPath("systemd-socket-activate") == "" || lookPath("setpriv") == "" {
		privtest.SkipOrFail(t, "systemd-socket-activate and setpriv are needed for the socket-activation test")
	}
	a := &activator{t: t, bin: bin, socket: filepath.Join(dir, "tandem.sock"), recvAddr: recvAddr, done: make(chan struct{})}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: a.socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	// Mode and owner as tandem-encoder.socket sets them: the root sampler
	// is the owner; the encoder never opens the path.
	if err := os.Chmod(a.socket, 0o660); err != nil {
		t.Fatal(err)
	}
	if a.ln, err = ln.File(); err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // a.ln holds its own descriptor of the socket
	notifyPath := filepath.Join(dir, "notify.sock")
	if a.notify, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(notifyPath, 0o666); err != nil {
		t.Fatal(err)
	}
	go a.readNotifications()
	t.Cleanup(func() {
		a.mu.Lock()
		a.stopped = true
		cur := a.current
		a.mu.Unlock()
		if cur != nil {
			cur.Kill()
		}
		<-a.done
		a.notify.Close()
		a.ln.Close()
		if t.Failed() {
			for _, p := range a.all {
				t.Logf("---- %s output ----\n%s", p.Name, p.Out.Tail(40))
			}
		}
	})
	return a
}

// readNotifications counts the sd_notify messages the encoders send.
func (a *activator) readNotifications() {
	buf := make([]byte, 4096)
	for {
		n, err := a.notify.Read(buf)
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(buf[:n]), "\n") {
			switch line {
			case "READY=1":
				a.ready.Add(1)
			case "WATCHDOG=1":
				a.watchdog.Add(1)
			}
		}
	}
}

const (
	// restartDelay is RestartSec= of tandem-encoder.service, shortened.
	restartDelay = 200 * time.Millisecond
	// maxGenerations stops an encoder that fails at every start.
	maxGenerations = 10
)

// run starts generations of the encoder until the test ends.
func (a *activator) run() {
	go func() {
		defer close(a.done)
		for {
			a.mu.Lock()
			if a.stopped {
				a.mu.Unlock()
				return
			}
			if a.gens >= maxGenerations {
				a.mu.Unlock()
				a.t.Errorf("the encoder was activated %d times: it keeps failing", a.gens)
				return
			}
			a.gens++
			gen := a.gens
			a.httpAddr = "127.0.0.1:0"
			if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
				a.httpAddr = ln.Addr().String()
				ln.Close()
			}
			p := a.startGeneration(gen, a.httpAddr)
			a.current = p
			a.mu.Unlock()
			<-p.Done()
			time.Sleep(restartDelay)
		}
	}()
}

func (a *activator) startGeneration(gen int, httpAddr string) *proc {
	// systemd-socket-activate takes inherited sockets only when LISTEN_PID
	// names it: the shell sets it to its own pid and execs.
	script := `LISTEN_PID=$$ LISTEN_FDS=1 exec "$@"`
	args := []string{"-c", script, "sh",
		"systemd-socket-activate",
		"-E", "NOTIFY_SOCKET=" + a.notify.LocalAddr().String(),
		"-E", "WATCHDOG_USEC=2000000",
		"setpriv", "--reuid", strconv.Itoa(encoderUID), "--regid", strconv.Itoa(encoderUID), "--clear-groups", "--no-new-privs", "--",
		filepath.Join(a.bin, "tandem-encoder"), "serve", "--allowed-uid", "0",
		"--remote-store-address", a.recvAddr, "--remote-store-insecure", "--remote-store-compression", "none",
		"--debuginfo-upload-disable", // the OTLP test receiver has no DebuginfoService
		"--profiling-duration", "2s", "--http-address", httpAddr, "--log-level", "debug"}
	name := fmt.Sprintf("encoder generation %d", gen)
	p, err := harness.Launch(harness.ProcConfig{Name: name, Path: "/bin/sh", Args: args, ExtraFiles: []*os.File{a.ln}})
	if err != nil {
		a.t.Errorf("%v", err)
		return p
	}
	a.all = append(a.all, p)
	return p
}

// encoder returns the running generation, its number and its HTTP address.
func (a *activator) encoder() (*proc, int, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.current, a.gens, a.httpAddr
}

// waitGeneration waits for generation gen to serve /metrics.
func (a *activator) waitGeneration(t *testing.T, gen int, within time.Duration) (*proc, string) {
	t.Helper()
	var p *proc
	var addr string
	harness.WaitFor(t, fmt.Sprintf("encoder generation %d", gen), within, func() bool {
		var g int
		p, g, addr = a.encoder()
		if g < gen || p == nil {
			return false
		}
		return harness.HTTPOK(addr + "/readyz")
	})
	return p, addr
}

// slowReceiver delays every export by d before the receiver sees it, and
// refuses one whose client went away meanwhile, as a receiver that
// commits only completed requests does. inFlight counts exports being
// delayed, so the test can kill the encoder in the middle of one.
func slowReceiver(d time.Duration, inFlight *atomic.Int64) grpc.ServerOption {
	return grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		if ctx.Err() != nil {
			return nil, status.Error(codes.Canceled, "client went away")
		}
		return h(ctx, req)
	})
}

// TestSocketActivatedRestart kills -9 a socket-activated encoder while one
// of its exports is in flight, twice, and lets the next one be activated
// on the same listening socket: every sample the sampler produced reaches
// the receiver exactly once.
func TestSocketActivatedRestart(t *testing.T) {
	t.Parallel()
	requirePrivileges(t)
	bin := binaries(t)
	dir := sharedDir(t)
	var inFlight atomic.Int64
	recv := otlptest.StartReceiver(t, slowReceiver(700*time.Millisecond, &inFlight))
	a := newActivator(t, bin, dir, recv.Addr())
	a.run()

	dump := filepath.Join(dir, "sampler.dump")
	sampler := start(t, "sampler", 0, filepath.Join(bin, "tandem-sampler"), "--socket", a.socket,
		"--encoder-uid", strconv.Itoa(encoderUID), "--profiling-cpu-sampling-frequency", strconv.Itoa(hz), "--stats-interval", "2s",
		"--record", dump, "--log-level", "debug")
	first, httpAddr := a.waitGeneration(t, 1, 90*time.Second)
	harness.WaitFor(t, "the first batch at the encoder", 90*time.Second, func() bool {
		return harness.EncoderMetric(t, httpAddr, `tandem_encoder_ingest_frames_total{type="batch"}`) > 0
	}, sampler, first)
	if a.ready.Load() == 0 {
		t.Error("the encoder sent no READY=1 to NOTIFY_SOCKET")
	}
	harness.WaitFor(t, "the sampler's counters in-band", 30*time.Second, func() bool {
		return harness.EncoderMetric(t, httpAddr, "tandem_sampler_ipc_client_frames_sent_total") > 0
	}, sampler, first)

	begin := time.Now()
	g := start(t, "go workload", 0, filepath.Join(bin, "gobusy"), workloadTime.String())
	var lost float64
	// The encoders' pids: socket activation hands the sampler the
	// listening socket's creator (this test) in SO_PEERCRED, and the
	// sampler must still find each encoder and leave its samples out.
	encoderPIDs := map[string]bool{}
	for gen := 1; gen <= 2; gen++ {
		time.Sleep(4 * time.Second)
		enc, _, addr := a.encoder()
		encoderPIDs[strconv.Itoa(enc.Pid())] = true
		// Kill in the middle of an export: the receiver holds it, not yet
		// committed, and the sampler has not had its acknowledgement.
		harness.WaitFor(t, "an export in flight", 10*time.Second, func() bool { return inFlight.Load() > 0 }, sampler, enc)
		lost += harness.EncoderMetric(t, addr, "tandem_encoder_sampler_lost_samples_total")
		t.Logf("encoder generation %d: peak RSS %.1f MiB; sampler RSS %.1f MiB", gen,
			float64(statusBytes(t, enc.Pid(), "VmHWM"))/(1<<20), float64(statusBytes(t, sampler.Pid(), "VmRSS"))/(1<<20))
		if err := syscall.Kill(enc.Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-enc.Done()
		t.Logf("killed encoder generation %d (pid %d) with an export in flight", gen, enc.Pid())
		a.waitGeneration(t, gen+1, 30*time.Second)
	}
	select {
	case <-g.Done():
	case <-time.After(workloadTime + 30*time.Second):
		t.Fatal("go workload did not finish")
	}
	ran := time.Since(begin)
	sampler.Stop(t, 30*time.Second)
	last, gens, addr := a.encoder()
	encoderPIDs[strconv.Itoa(last.Pid())] = true
	harness.WaitDelivered(t, addr, 1, last)
	lost += harness.EncoderMetric(t, addr, "tandem_encoder_sampler_lost_samples_total")
	if lost != 0 {
		t.Errorf("sampler reported %v lost samples, want 0", lost)
	}
	if a.watchdog.Load() == 0 {
		t.Error("no WATCHDOG=1 from the encoders with WATCHDOG_USEC=2000000")
	}
	t.Logf("%d encoder generations; %d READY=1 and %d WATCHDOG=1 notifications", gens, a.ready.Load(), a.watchdog.Load())

	samples := recv.Samples(t)
	checkNothingLostOrDuplicated(t, samples, g, ran, "the restarts", dump)
	for _, s := range samples {
		if pid := s.Resource["process.pid"]; encoderPIDs[pid] {
			t.Errorf("a sample of the encoder (pid %s) arrived: the sampler must leave the socket-activated encoder's samples out", pid)
			break
		}
	}
	if out := sampler.Out.String(); strings.Contains(out, "panic:") {
		t.Error("the sampler panicked")
	}
}

// TestEncoderStopped stops a socket-activated encoder with SIGSTOP for 20
// s while the sampler runs with a small --max-buffer-bytes: the sampler's
// memory stays bounded, it evicts the oldest batches, and nothing is lost
// silently: every sample the sampler produced (its recording holds them
// all) reaches the receiver or is reported lost in-band, exactly, and the
// sampler's own counters agree.
//
// It runs alone (not t.Parallel): its sample rate, and so whether the
// buffer overflows, and the sampler's RSS depend on everything else the
// machine runs.
func TestEncoderStopped(t *testing.T) {
	requirePrivileges(t)
	bin := binaries(t)
	dir := sharedDir(t)
	recv := otlptest.StartReceiver(t)
	a := newActivator(t, bin, dir, recv.Addr())
	a.run()
	const maxBuffer = 64 << 10
	// More than the buffer and the socket's kernel buffers (about 200
	// KiB) can hold over the stop (on two busy CPUs with protocol 1.4's
	// dictionaries), so that batches are evicted before being written,
	// and lost, not only delayed. At 199 Hz they held about 1,800
	// samples, under 5 s of the stop: a 20 s stop loses about 5,000 (a
	// 60 s stop at 97 Hz lost 7,800), and still thousands at the
	// tracer's 60% on a loaded machine.
	const stoppedHz = 199
	dump := filepath.Join(dir, "sampler.dump")
	sampler := start(t, "sampler", 0, filepath.Join(bin, "tandem-sampler"), "--socket", a.socket,
		"--encoder-uid", strconv.Itoa(encoderUID), "--profiling-cpu-sampling-frequency", strconv.Itoa(stoppedHz),
		"--max-buffer-bytes", strconv.Itoa(maxBuffer), "--stats-interval", "2s", "--record", dump, "--log-level", "debug")
	enc, httpAddr := a.waitGeneration(t, 1, 90*time.Second)
	harness.WaitFor(t, "the first batch at the encoder", 90*time.Second, func() bool {
		return harness.EncoderMetric(t, httpAddr, `tandem_encoder_ingest_frames_total{type="batch"}`) > 0
	}, sampler, enc)
	// The baseline starts once the workloads' samples have arrived named
	// (the tracer has read their executables and interpreters: that
	// work's transient heap once grew RSS by 40 MiB within seconds of a
	// stop started 3 s after the workloads, and was taken for the
	// stop's cost), and is the peak over 3 s before the stop.
	const stopFor = 20 * time.Second
	w := startWorkloads(t, bin, stopFor+15*time.Second)
	waitWorkloadSamples(t, recv, sampler, enc, w.python, w.gobusy)
	before := rssBytes(t, sampler.Pid())
	for range 6 {
		time.Sleep(500 * time.Millisecond)
		before = max(before, rssBytes(t, sampler.Pid()))
	}
	if err := syscall.Kill(enc.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	peak := before
	deadline := time.Now().Add(stopFor)
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		if sampler.Exited() {
			t.Fatalf("sampler exited while the encoder was stopped: %v", sampler.Err())
		}
		peak = max(peak, rssBytes(t, sampler.Pid()))
	}
	if err := syscall.Kill(enc.Pid(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Settled: the batches evicted after being written were acknowledged
	// (delivered), and the loss reports carry what the sampler counts
	// lost (its counters arrive in-band, every 2 s).
	const (
		reportedLost = `tandem_encoder_sampler_lost_samples_total{stage="resend_buffer"}`
		samplerLost  = "tandem_sampler_ipc_client_lost_samples_total"
	)
	var lost, counted, evicted, delivered, unconfirmed float64
	settled := false
	t.Cleanup(func() {
		if !settled {
			t.Logf("last in-band figures: %v samples reported lost; the sampler counts %v lost, %v evicted, %v delivered after eviction, %v unconfirmed",
				lost, counted, evicted, delivered, unconfirmed)
		}
	})
	harness.WaitFor(t, "the sampler's losses reported in-band", 30*time.Second, func() bool {
		lost = harness.EncoderMetric(t, httpAddr, reportedLost)
		counted = harness.EncoderMetric(t, httpAddr, samplerLost)
		evicted = harness.EncoderMetric(t, httpAddr, "tandem_sampler_ipc_client_evicted_samples_total")
		delivered = harness.EncoderMetric(t, httpAddr, "tandem_sampler_ipc_client_evicted_delivered_samples_total")
		unconfirmed = harness.EncoderMetric(t, httpAddr, "tandem_sampler_ipc_client_evicted_unconfirmed_samples")
		return lost > 0 && lost == counted && unconfirmed == 0 && evicted == counted+delivered
	}, sampler, enc)
	settled = true
	t.Logf("while settled: %v samples reported lost in-band; the sampler counts %v lost, %v evicted of which %v delivered",
		lost, counted, evicted, delivered)
	w.wait(t, 40*time.Second)
	// A clean exit means the goodbye went out and every batch was
	// acknowledged, i.e. exported.
	sampler.Stop(t, 30*time.Second)
	t.Logf("sampler RSS peak %.1f MiB in the 3 s before the stop, %.1f MiB during %v (--max-buffer-bytes %d KiB)",
		float64(before)/(1<<20), float64(peak)/(1<<20), stopFor, maxBuffer>>10)
	// The bound: the buffer, the tracer queue (8 MiB by default) and the
	// garbage collector's headroom over them.
	if growth := peak - before; growth > 24<<20 {
		t.Errorf("sampler RSS grew by %.1f MiB while the encoder was stopped, want the buffer bound to hold it under 24 MiB", float64(growth)/(1<<20))
	}
	if _, gens, _ := a.encoder(); gens != 1 {
		t.Errorf("%d encoder generations, want 1: the stopped encoder must continue, not be replaced", gens)
	}
	for _, p := range []*proc{sampler, enc} {
		if strings.Contains(p.Out.String(), "panic:") {
			t.Errorf("%s panicked", p.Name)
		}
	}

	// The balance, exact: produced = received + reported lost.
	produced, lossReports := streamtest.DumpTotals(t, dump)
	// The sampler waited for its last acknowledgements (exports) before
	// exiting, within its --shutdown-timeout: in case it ran out, wait
	// for the encoder's last flush.
	harness.WaitDelivered(t, httpAddr, 1, enc)
	var received int64
	for _, s := range recv.Samples(t) {
		received += s.Total()
	}
	ingested := harness.EncoderMetric(t, httpAddr, "tandem_encoder_ingest_samples_total")
	lost = harness.EncoderMetric(t, httpAddr, reportedLost)
	t.Logf("balance: the sampler produced %d samples (its recording), the receiver got %d (encoder ingested %v), %v reported lost in-band (%d in the sampler's loss reports)",
		produced, received, ingested, lost, lossReports)
	if float64(produced) != float64(received)+lost {
		t.Errorf("produced %d != received %d + reported lost %v (difference %v)", produced, received, lost, float64(produced)-float64(received)-lost)
	}
	if float64(received) != ingested {
		t.Errorf("the receiver got %d samples, the encoder ingested %v", received, ingested)
	}
	if float64(lossReports) != lost {
		t.Errorf("the sampler's loss reports carry %d samples, the encoder counted %v: a loss report went missing", lossReports, lost)
	}
	for _, m := range []string{"tandem_encoder_ingest_duplicate_frames_total", "tandem_encoder_rejected_batches_total",
		"tandem_encoder_lost_samples_total"} {
		if v := harness.EncoderMetric(t, httpAddr, m); v != 0 {
			t.Errorf("%s = %v, want 0", m, v)
		}
	}
}

// rssBytes reads VmRSS of pid.
// waitWorkloadSamples waits until the receiver holds a sample of every
// one of the workloads.
func waitWorkloadSamples(t *testing.T, recv *otlptest.Receiver, sampler, enc *proc, workloads ...*proc) {
	t.Helper()
	harness.WaitFor(t, "a sample of every workload at the receiver", 60*time.Second, func() bool {
		seen := map[string]bool{}
		for _, s := range recv.Samples(t) {
			seen[s.Resource["process.pid"]] = true
		}
		for _, w := range workloads {
			if !seen[strconv.Itoa(w.Pid())] {
				return false
			}
		}
		return true
	}, append([]*proc{sampler, enc}, workloads...)...)
}

func rssBytes(t *testing.T, pid int) int64 {
	t.Helper()
	return statusBytes(t, pid, "VmRSS")
}

// statusBytes reads a size field (VmRSS, VmHWM) of /proc/PID/status.
func statusBytes(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read status of %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("parse %s %q: %v", field, rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s for %d", field, pid)
	return 0
}
