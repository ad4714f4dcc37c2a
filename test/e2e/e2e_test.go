package e2e

import (
	"fmt"

	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/otlptest"
)

const (
	// workloadTime is TestPairProfilesThisMachine's: at hz the Python
	// workload's two functions get 60-110 samples together on a loaded
	// machine, enough for their share's 30-70% window (3-4 standard
	// deviations).
	workloadTime = 15 * time.Second
	// restartWorkloadTime is the Go workload's in TestEncoderRestart.
	restartWorkloadTime = 10 * time.Second
	hz                  = 19
)

// pair is a running encoder (unprivileged) and sampler (root), with the
// OTLP receiver the encoder exports to by default.
type pair struct {
	*harness.Pair
	bin  string
	dump string // the sampler's --record
	recv *otlptest.Receiver
	// output replaces the encoder's default output flags (OTLP to recv,
	// symbol upload off).
	output []string
}

// encoderArgs are the encoder's flags: its outputs, then the test's
// settings.
func (p *pair) encoderArgs() []string {
	output := p.output
	if output == nil {
		output = []string{"--remote-store-address", p.recv.Addr(), "--remote-store-insecure", "--remote-store-compression", "none",
			"--debuginfo-upload-disable"} // the OTLP test receiver has no DebuginfoService
	}
	return append(slices.Clone(output), "--profiling-duration", "2s", "--log-level", "debug")
}

// startEncoder (re)starts the pair's encoder, exporting to p.recv (which
// the test may have replaced) unless p.output says otherwise.
func startEncoder(t *testing.T, p *pair) {
	t.Helper()
	p.Config.EncoderArgs = p.encoderArgs()
	p.StartEncoder(t)
}

func startPair(t *testing.T, samplerArgs ...string) *pair {
	t.Helper()
	return startPairOrdered(t, false, nil, samplerArgs...)
}

// startPairOrdered starts the pair; with samplerFirst the sampler starts
// before the encoder listens and must keep retrying until it does. output
// replaces the encoder's default output flags.
func startPairOrdered(t *testing.T, samplerFirst bool, output []string, samplerArgs ...string) *pair {
	t.Helper()
	requirePrivileges(t)
	p := &pair{bin: binaries(t), recv: otlptest.StartReceiver(t), output: output}
	dir := sharedDir(t)
	p.dump = filepath.Join(dir, "sampler.dump")
	p.Pair = harness.StartPair(t, harness.PairConfig{
		Bin: p.bin, Dir: dir, SamplerFirst: samplerFirst, EncoderArgs: p.encoderArgs(),
		SamplerArgs: append([]string{"--record", p.dump, "--profiling-cpu-sampling-frequency", fmt.Sprint(hz), "--log-level", "debug"}, samplerArgs...),
	})
	return p
}

// key identifies a stack of one process and origin for comparisons. The
// names of native frames are left out: the encoder names them from the
// executables, and a replay reads those by path, so the frames of
// executables gone since (a finished test binary, the vDSO) come back
// unnamed. TestSymbolizeNative checks the names a replay keeps.
func key(s *otlptest.Sample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s|%s|", s.Resource["process.pid"], s.Attributes["thread.id"], s.SampleType, s.SampleUnit)
	for _, f := range s.Frames {
		if f.Type == "native" {
			f.Function, f.File, f.Line = "", "", 0
		}
		fmt.Fprintf(&b, "%s:%s:%s:%d:%x:%s;", f.Type, f.Function, f.File, f.Line, f.Address, f.MappingFile)
	}
	return b.String()
}

func countsByStack(samples []otlptest.Sample) map[string]int64 {
	m := make(map[string]int64)
	for i := range samples {
		m[key(&samples[i])] += samples[i].Total()
	}
	return m
}

func hasFunction(s *otlptest.Sample, frameType, fn string) *otlptest.Frame {
	for i := range s.Frames {
		if s.Frames[i].Type == frameType && s.Frames[i].Function == fn {
			return &s.Frames[i]
		}
	}
	return nil
}

var hashLike = regexp.MustCompile(`^[0-9a-f]{16,}$`)

// TestPairProfilesThisMachine runs the pair against known workloads and
// checks what reaches an OTLP receiver; the sampler's recording, replayed
// without the sampler, must give the same stacks and counts.
//
// The encoder's own samples are left out by the sampler (it knows the
// encoder's pid from the socket): none may arrive.
func TestPairProfilesThisMachine(t *testing.T) {
	t.Parallel()
	p := startPair(t, "--stats-interval", "1s")
	encoderPID := strconv.Itoa(p.Encoder.Pid())
	dump := p.dump
	w := startWorkloads(t, p.bin, workloadTime)
	w.wait(t, workloadTime+30*time.Second)
	// The privileged side, having profiled the workloads, holds no
	// network socket: only its Unix socket to the encoder.
	inet, unixSockets := inetSockets(t, p.Sampler.Pid())
	if len(inet) > 0 {
		t.Errorf("the sampler holds AF_INET/AF_INET6 sockets: %v", inet)
	}
	if unixSockets == 0 {
		t.Errorf("the sampler holds no Unix socket: is it connected to the encoder?")
	}
	p.Sampler.Stop(t, 30*time.Second)
	// Let the encoder flush what the sampler sent last, then read its
	// counters before stopping it.
	p.WaitDelivered(t, 1)
	if lost := harness.EncoderMetric(t, p.HTTPAddr, "tandem_encoder_sampler_lost_samples_total"); lost != 0 {
		t.Errorf("sampler reported %v lost samples in-band, want 0", lost)
	}
	if gaps := harness.EncoderMetric(t, p.HTTPAddr, "tandem_encoder_ingest_sequence_gaps_total"); gaps != 0 {
		t.Errorf("encoder saw %v missing sequences, want 0", gaps)
	}
	leftOut := harness.EncoderMetric(t, p.HTTPAddr, "tandem_sampler_reporter_encoder_traces_total")
	p.Encoder.Stop(t, 30*time.Second)

	all := p.recv.Samples(t)
	if len(all) == 0 {
		t.Fatal("no samples reached the receiver")
	}

	var alpha, beta, goNative, sha, kernelFrames, encoderSamples int64
	for i := range all {
		s := &all[i]
		if len(s.Frames) == 0 {
			t.Errorf("sample with an empty stack: %+v", s.Attributes)
		}
		if s.Resource["process.pid"] == encoderPID {
			encoderSamples += s.Total()
		}
		svc := s.Resource["service.name"]
		if svc == "" || hashLike.MatchString(svc) {
			t.Errorf("service.name %q for pid %s: want the process name", svc, s.Resource["process.pid"])
		}
		for _, f := range s.Frames {
			if f.Type == "kernel" {
				kernelFrames++
				if f.Function == "" {
					t.Errorf("kernel frame without a function name at %#x", f.Address)
				}
			}
		}
		if f := hasFunction(s, "cpython", "tandem_py_alpha"); f != nil {
			alpha += s.Total()
			checkPythonFrame(t, f, svc)
		}
		if f := hasFunction(s, "cpython", "tandem_py_beta"); f != nil {
			beta += s.Total()
			checkPythonFrame(t, f, svc)
		}
		switch svc {
		case "gobusy":
			for _, f := range s.Frames {
				if f.Type == "go" {
					t.Errorf("Go frame %q symbolized without --symbolize-go", f.Function)
				}
				if f.Type == "native" && f.MappingFile == "gobusy" {
					if f.BuildID == "" {
						t.Errorf("native frame of gobusy at %#x without a build id", f.Address)
					}
					goNative += s.Total()
					break
				}
			}
		case "sha256sum":
			sha += s.Total()
		}
	}
	t.Logf("samples: %d rows; alpha %d, beta %d, gobusy native %d, sha256sum %d, kernel frames %d; %v of the encoder's left out by the sampler",
		len(all), alpha, beta, goNative, sha, kernelFrames, leftOut)
	if encoderSamples != 0 {
		t.Errorf("%d samples of the encoder (pid %s) arrived, want none: the sampler leaves them out", encoderSamples, encoderPID)
	}
	if alpha == 0 || beta == 0 {
		t.Fatalf("python functions: alpha %d, beta %d samples; want both present", alpha, beta)
	}
	if share := float64(alpha) / float64(alpha+beta); share < 0.3 || share > 0.7 {
		t.Errorf("tandem_py_alpha has %.0f%% of alpha+beta samples, want roughly half (stacks merged?)", share*100)
	}
	if goNative == 0 {
		t.Error("no native frames from the gobusy binary")
	}
	if sha == 0 {
		t.Error("no samples of sha256sum")
	}
	if kernelFrames == 0 {
		t.Error("no kernel frames at all")
	}

	// Replay the sampler's own recording without the sampler: same stacks,
	// same counts.
	replayRecv := otlptest.StartReceiver(t)
	out, err := runCommand(filepath.Join(p.bin, "tandem-encoder"), "replay", "--remote-store-address", replayRecv.Addr(),
		"--remote-store-insecure", "--profiling-duration", "2s", dump) // replay never needs --debuginfo-upload-disable
	if err != nil {
		t.Fatalf("replay %s: %v\n%s", dump, err, out)
	}
	replayed := countsByStack(replayRecv.Samples(t))
	want := countsByStack(all)
	if len(replayed) == 0 {
		t.Fatal("replay exported nothing")
	}
	diff := 0
	for k, v := range want {
		if replayed[k] != v {
			if diff < 5 {
				t.Errorf("stack %.200s: live %d, replay %d", k, v, replayed[k])
			}
			diff++
		}
	}
	for k, v := range replayed {
		if _, ok := want[k]; !ok {
			if diff < 10 {
				t.Errorf("stack only in replay (%d): %.200s", v, k)
			}
			diff++
		}
	}
	if diff > 0 {
		t.Errorf("%d of %d stacks differ between the live run and the replay", diff, len(want))
	}
}

func checkPythonFrame(t *testing.T, f *otlptest.Frame, svc string) {
	t.Helper()
	if !strings.HasSuffix(f.File, "busy.py") || f.Line <= 0 {
		t.Errorf("python frame %s: file %q line %d, want busy.py with a line", f.Function, f.File, f.Line)
	}
	if !strings.HasPrefix(svc, "python") {
		t.Errorf("python frame %s under service.name %q", f.Function, svc)
	}
}

// TestSymbolizeGo checks that --symbolize-go makes Go frames arrive with
// their function names.
func TestSymbolizeGo(t *testing.T) {
	t.Parallel()
	p := startPair(t, "--symbolize-go")
	// 5 s: about 95 samples of one busy CPU at hz, 30-60 on a loaded
	// machine; one named frame is what the check needs.
	g := start(t, "go workload", 0, filepath.Join(p.bin, "gobusy"), "5s")
	select {
	case <-g.Done():
	case <-time.After(40 * time.Second):
		t.Fatal("go workload did not finish")
	}
	p.Sampler.Stop(t, 30*time.Second)
	p.WaitDelivered(t, 1)
	p.Encoder.Stop(t, 30*time.Second)
	var hot int64
	for _, s := range p.recv.Samples(t) {
		if f := hasFunction(&s, "go", "main.tandemGoHotLoop"); f != nil {
			hot += s.Total()
			if f.File == "" || f.Line == 0 {
				t.Errorf("Go frame main.tandemGoHotLoop without file and line: %+v", f)
			}
		}
	}
	if hot == 0 {
		t.Fatal("no Go frame named main.tandemGoHotLoop with --symbolize-go")
	}
	t.Logf("main.tandemGoHotLoop: %d samples", hot)
}

// TestEncoderRestart stops the encoder in the middle of a run and starts a
// new one: the sampler must reconnect and resend what was not acknowledged,
// with nothing lost and nothing duplicated.
//
// The sampler also starts before the encoder listens, as it may under
// systemd or in a pod, and must keep retrying.
func TestEncoderRestart(t *testing.T) {
	t.Parallel()
	p := startPairOrdered(t, true, nil)
	begin := time.Now()
	ingested := func() float64 { return harness.EncoderMetric(t, p.HTTPAddr, "tandem_encoder_ingest_samples_total") }
	before := ingested()
	// The workload runs through the restart and a few seconds past it:
	// samples before the stop, during it (resent) and after it.
	g := start(t, "go workload", 0, filepath.Join(p.bin, "gobusy"), restartWorkloadTime.String())
	// Stop the encoder once the workload's samples flow: a few seconds of
	// one busy CPU at hz, however long the loaded machine takes.
	harness.WaitFor(t, "samples to reach the first encoder", time.Minute, func() bool { return ingested() >= before+3*hz },
		p.Sampler, p.Encoder)
	firstHTTP := p.HTTPAddr
	lostBefore := harness.EncoderMetric(t, firstHTTP, "tandem_encoder_sampler_lost_samples_total")
	p.Encoder.Stop(t, 30*time.Second)
	time.Sleep(2 * time.Second) // samples wait in the sampler: about 2*hz of gobusy's
	startEncoder(t, p)
	select {
	case <-g.Done():
	case <-time.After(restartWorkloadTime + 30*time.Second):
		t.Fatal("go workload did not finish")
	}
	ran := time.Since(begin)
	p.Sampler.Stop(t, 30*time.Second)
	p.WaitDelivered(t, 1)
	lostAfter := harness.EncoderMetric(t, p.HTTPAddr, "tandem_encoder_sampler_lost_samples_total")
	p.Encoder.Stop(t, 30*time.Second)
	if lostBefore+lostAfter != 0 {
		t.Errorf("sampler reported %v lost samples, want 0", lostBefore+lostAfter)
	}

	checkNothingLostOrDuplicated(t, p.recv.Samples(t), g, ran, "the restart", p.dump)
}

func runCommand(bin string, args ...string) (string, error) {
	out, err := execCommand(bin, args...)
	return out, err
}
