package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/ebpf-profiler/libpf"
	"golang.org/x/sys/unix"

	"github.com/tandem-profiler/tandem/confine"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/ipc/ipcserver"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/test/proctest"
	"github.com/tandem-profiler/tandem/test/sdnotifytest"
)

// This test runs the whole command as the operator would: flags, the real
// tracer, the IPC client against an ipcserver.Server standing in for the
// encoder, a dump, SIGHUP (ignored) and SIGTERM (clean stop, exit 0). It
// needs root with eBPF; it skips outside CI when that is missing and fails
// under CI=true.

func requireRoot(t *testing.T) {
	t.Helper()
	privtest.RequireRoot(t)
	if _, _, errno := unix.Syscall(unix.SYS_BPF, 0, 0, 0); errno == unix.ENOSYS {
		privtest.SkipOrFail(t, "BPF unavailable: no bpf syscall")
	}
}

type received struct {
	hello         schema.Hello
	batches       int
	lastSeq       uint64
	childSamples  int
	executables   int
	descriptors   int
	fileIDMatches int
	goodbye       *schema.Goodbye
	// The encoder here is this test process: its samples (none may
	// arrive) and the sampler's count of those it left out, from the
	// latest stats frame.
	encoderSamples, encoderLeftOut int
}

// wantChildSamples is how many samples of the busy child the test waits
// for: at 19 Hz a quiet machine gives them in under a second; a loaded
// one (2 cores, load 40) gives the child a small share of a CPU.
const wantChildSamples = 10

// The sampler, running against this test process as its encoder, must
// leave this process's samples out and count them: the test burns a CPU
// in a goroutine so that there is something to leave out.
func TestPrivilegedCommandStreamsToEncoder(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "tandem.sock")
	dump := filepath.Join(dir, "stream.dump")

	srv, err := ipcserver.Listen(ipcserver.Config{Path: socket, AllowedUIDs: []uint32{0}}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	childPID, childExited := startBusyChild(t)
	encoderPID := uint32(os.Getpid())
	burnCtx, stopBurning := context.WithCancel(context.Background())
	defer stopBurning()
	go func() {
		for burnCtx.Err() == nil {
		}
	}()

	notify := sdnotifytest.Listen(t, dir)
	t.Setenv("NOTIFY_SOCKET", notify.Path())
	stderr := &proctest.Output{}
	sampler, exit, exited := startCommand(t, []string{
		"--socket", socket, "--encoder-uid", "0", "--record", dump, "--node", "e2e",
		"--metrics-log-interval", "0", "--log-format", "json", "--stats-interval", "1s",
	}, stderr)

	// The wait for its connection ends as soon as the sampler exits.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ctx, cancelExit := proctest.WithExit(ctx, exited)
	defer cancelExit()
	conn, err := srv.Accept(ctx)
	if err != nil {
		t.Fatalf("accept: %v (%v; sampler said: %s)", err, context.Cause(ctx), stderr.String())
	}
	defer conn.Close()

	var got received
	var dict schema.Dictionary // the connection's (protocol 1.4)
	signalled := false
	var sampling time.Time
	// It stops the sampler once what the test waits for has arrived: the
	// child's samples, a count of the encoder's samples left out, and a
	// batch after the SIGHUP one (it survived). A generous deadline from
	// the first batch bounds the wait, as the child's exit does.
	const deadline = 2 * time.Minute
	batchesAtHUP := 0
	for got.goodbye == nil {
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		f, err := conn.Next()
		if err != nil {
			t.Fatalf("read frame: %v (sampler said: %s)", err, stderr.String())
		}
		switch f.Type {
		case ipc.FrameHello:
			if got.hello, err = schema.DecodeHello(f.Payload); err != nil {
				t.Fatal(err)
			}
		case ipc.FrameDictionary:
			applyChunk(t, &dict, f.Payload)
		case ipc.FrameBatch:
			var b schema.Batch
			if err := schema.DecodeBatchWith(f.Payload, &dict, &b); err != nil {
				t.Fatal(err)
			}
			got.batches++
			got.lastSeq = b.Sequence
			for _, s := range b.Samples {
				switch pid := b.Processes[s.Process].PID; {
				case pid == childPID && len(b.Stack(s.Stack)) > 0:
					got.childSamples++
				case pid == encoderPID:
					got.encoderSamples++
				}
			}
			if err := conn.Ack(b.Sequence); err != nil {
				t.Fatal(err)
			}
			if sampling.IsZero() {
				sampling = time.Now()
				batchesAtHUP = got.batches
				// SIGHUP must not stop it.
				if err := sampler.Process.Signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
			}
		case ipc.FrameLoss:
			r, err := schema.DecodeLossReport(f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			got.lastSeq = r.Sequence
			if err := conn.Ack(r.Sequence); err != nil {
				t.Fatal(err)
			}
		case ipc.FrameExecutable:
			n, err := schema.DecodeExecutableNotice(f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			got.executables++
			if f.File != nil {
				got.descriptors++
				id, err := libpf.FileIDFromExecutableReader(f.File)
				if err == nil && id.Hi() == n.FileID.Hi && id.Lo() == n.FileID.Lo {
					got.fileIDMatches++
				}
				f.File.Close()
			}
		case ipc.FrameStats:
			st, err := schema.DecodeSamplerStats(f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range st.Metrics {
				if m.Name == "tandem_sampler_reporter_encoder_traces_total" {
					got.encoderLeftOut = int(m.Value)
				}
			}
		case ipc.FrameGoodbye:
			g, err := schema.DecodeGoodbye(f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			got.goodbye = &g
		}
		if signalled || sampling.IsZero() {
			continue
		}
		select {
		case <-childExited:
			t.Fatalf("the busy child exited; %d of its samples had arrived", got.childSamples)
		default:
		}
		if time.Since(sampling) > deadline {
			t.Fatalf("%v after the first batch: %d samples of the busy child (want >= %d), %d of the encoder's left out (want > 0), %d batches (%d after SIGHUP)",
				deadline, got.childSamples, wantChildSamples, got.encoderLeftOut, got.batches, got.batches-batchesAtHUP)
		}
		if got.childSamples >= wantChildSamples && got.encoderLeftOut > 0 && got.batches > batchesAtHUP {
			signalled = true
			stopBurning()
			checkConfined(t, sampler.Process.Pid, notify, exited)
			if err := sampler.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit status %d after SIGTERM, want 0; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the sampler did not exit within 15 s of its goodbye")
	}
	t.Logf("hello %+v; %d batches, %d child samples in %v, %d executables (%d descriptors, %d FileIDs recomputed equal), %d of the encoder's samples left out, goodbye %+v",
		got.hello, got.batches, got.childSamples, time.Since(sampling).Round(time.Millisecond), got.executables, got.descriptors, got.fileIDMatches, got.encoderLeftOut, *got.goodbye)

	if !notify.Received("READY=1") || !notify.Received("STOPPING=1") {
		t.Errorf("sd_notify: READY=1 %v, STOPPING=1 %v; want both", notify.Received("READY=1"), notify.Received("STOPPING=1"))
	}
	if got.hello.NodeName != "e2e" || got.hello.SamplingFrequencyHz != 19 || got.hello.MajorVersion != schema.MajorVersion || got.hello.KernelRelease == "" || got.hello.BootID == "" {
		t.Errorf("hello %+v", got.hello)
	}
	if got.encoderSamples != 0 {
		t.Errorf("%d samples of the encoder's process (pid %d) arrived, want none: the sampler leaves them out", got.encoderSamples, encoderPID)
	}
	if got.descriptors == 0 || got.fileIDMatches != got.descriptors {
		t.Errorf("%d descriptors, %d with the notice's FileID; want > 0 and all", got.descriptors, got.fileIDMatches)
	}
	if got.goodbye.LastSequence != got.lastSeq {
		t.Errorf("goodbye last sequence %d, last received %d", got.goodbye.LastSequence, got.lastSeq)
	}

	// The dump holds the same stream: hello first, goodbye last.
	r, err := ipc.OpenDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var types []ipc.FrameType
	batches := 0
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, f.Type)
		if f.Type == ipc.FrameBatch {
			batches++
		}
	}
	if len(types) < 3 || types[0] != ipc.FrameHello || types[len(types)-1] != ipc.FrameGoodbye || batches != got.batches {
		t.Errorf("dump: %d frames, first %v, last %v, %d batches (socket %d)", len(types), types[0], types[len(types)-1], batches, got.batches)
	}
}

// With no encoder for a while and a small --max-buffer-bytes, the oldest
// batches are evicted; the loss report, which is never evicted, tells the
// encoder once it is there, in band, how many samples were lost (stage
// resend_buffer), and the sequence numbers show the gap.
func TestPrivilegedCommandReportsEvictions(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	socket := filepath.Join(dir, "tandem.sock")
	startBusyChild(t)

	notify := sdnotifytest.Listen(t, dir)
	t.Setenv("NOTIFY_SOCKET", notify.Path())
	stderr := &proctest.Output{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sampler, exit, exited := startCommand(t, []string{
		"--socket", socket, "--encoder-uid", "0", "--max-buffer-bytes", "2048",
		"--metrics-log-interval", "0", "--log-level", "info",
	}, stderr)
	// The tracer's load takes ~2 s on a quiet machine and much longer on a
	// loaded one: count the ~10 one-second batches, with nobody listening,
	// from when sampling starts (READY=1).
	if err := notify.WaitFor("READY=1", exited, 2*time.Minute); err != nil {
		t.Fatalf("the sampler did not start sampling: %v\n%s", err, stderr.String())
	}
	time.Sleep(10 * time.Second)

	srv, err := ipcserver.Listen(ipcserver.Config{Path: socket, AllowedUIDs: []uint32{0}}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	defer acancel()
	actx, acancelExit := proctest.WithExit(actx, exited)
	defer acancelExit()
	conn, err := srv.Accept(actx)
	if err != nil {
		t.Fatalf("accept: %v (%v; sampler said: %s)", err, context.Cause(actx), stderr.String())
	}
	defer conn.Close()
	var seqs []uint64
	var loss *schema.LossReport
	var dict schema.Dictionary
	batches := 0
	deadline := time.Now().Add(20 * time.Second)
	for (loss == nil || batches == 0) && time.Now().Before(deadline) {
		_ = conn.SetReadDeadline(deadline)
		f, err := conn.Next()
		if err != nil {
			t.Fatalf("read: %v (sampler said: %s)", err, stderr.String())
		}
		switch f.Type {
		case ipc.FrameDictionary:
			applyChunk(t, &dict, f.Payload)
		case ipc.FrameBatch:
			var b schema.Batch
			if err := schema.DecodeBatchWith(f.Payload, &dict, &b); err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, b.Sequence)
			batches++
			_ = conn.Ack(b.Sequence)
		case ipc.FrameLoss:
			r, err := schema.DecodeLossReport(f.Payload)
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, r.Sequence)
			_ = conn.Ack(r.Sequence)
			for _, l := range r.Losses {
				if l.Stage == schema.LossResendBuffer {
					loss = &r
				}
			}
		case ipc.FrameExecutable:
			if f.File != nil {
				f.File.Close()
			}
		}
	}
	_ = sampler.Process.Signal(syscall.SIGTERM)
	<-exited
	if code := <-exit; code != 0 {
		t.Errorf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if loss == nil {
		t.Fatalf("no resend_buffer loss report; sequences received %v", seqs)
	}
	t.Logf("sequences received %v; loss report %+v", seqs, *loss)
	if len(seqs) < 2 || seqs[0] == 1 {
		t.Errorf("sequences %v: the first batches should have been evicted", seqs)
	}
	for _, l := range loss.Losses {
		if l.Stage == schema.LossResendBuffer && (l.Samples == 0 || l.Bytes == 0) {
			t.Errorf("resend_buffer loss %+v counts nothing", l)
		}
	}
}

// checkConfined fails the test unless the running sampler pid, ready,
// shows its confinement in /proc/PID/status on every thread: seccomp
// filter mode, no_new_privs, the filters, and effective and bounding sets
// reduced to the steady set (the test runs it as root with every
// capability).
func checkConfined(t *testing.T, pid int, notify *sdnotifytest.Socket, exited <-chan struct{}) {
	t.Helper()
	// READY=1 follows the confinement.
	if err := notify.WaitFor("READY=1", exited, time.Minute); err != nil {
		t.Fatalf("sampling, but no READY=1: %v", err)
	}
	st, err := confine.CheckConfined(pid, confine.Sampler)
	if err != nil {
		t.Fatalf("the running sampler is not confined: %v", err)
	}
	if st.CapEff == 0 || st.CapBnd != st.CapEff || st.CapEff.Has(confine.CapSysAdmin) || st.CapEff.Has(confine.CapPerfmon) {
		t.Errorf("CapEff %v, CapBnd %v: want the steady set in both", st.CapEff, st.CapBnd)
	}
	t.Logf("confined sampler: Seccomp %d, NoNewPrivs %d, Seccomp_filters %d, CapEff %v, CapBnd %v",
		st.Seccomp, st.NoNewPrivs, st.SeccompFilters, st.CapEff, st.CapBnd)
}

// applyChunk extends a connection's dictionary with a FrameDictionary
// payload, as the encoder's ingest does.
func applyChunk(t *testing.T, dict *schema.Dictionary, payload []byte) {
	t.Helper()
	var c schema.DictionaryChunk
	if err := schema.DecodeDictionaryChunk(payload, &c); err != nil {
		t.Fatal(err)
	}
	if err := dict.Apply(&c); err != nil {
		t.Fatal(err)
	}
}
