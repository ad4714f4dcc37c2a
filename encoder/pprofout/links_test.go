package pprofout_test

import (
	"encoding/hex"
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/pprofout"
	"github.com/tandem-profiler/tandem/schema"
)

// TestTraceLinkLabels: a linked sample carries trace_id and span_id string
// labels (lower-case hex), an unlinked one neither, and `go tool pprof
// -tagfocus=span_id=...` keeps exactly that span's samples.
func TestTraceLinkLabels(t *testing.T) {
	link := schema.TraceLink{
		TraceID: [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  [8]byte{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	}
	traceHex, spanHex := hex.EncodeToString(link.TraceID[:]), hex.EncodeToString(link.SpanID[:])
	b := schema.NewBatchBuilder()
	st := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameGo, AddressOrLine: 0x4010, FunctionName: b.String("main.work"), SourceFile: b.String("main.go"), SourceLine: 12})})
	p := b.Process(schema.Process{PID: 3, Comm: b.String("app")})
	for i := range 5 {
		s := schema.Sample{TimestampUnixNano: int64(1000 + i), Origin: schema.OriginCPUSampling, Value: 1, Process: p, TID: 3, Stack: st}
		if i < 3 {
			b.AddLinkedSample(s, link)
		} else {
			b.AddSample(s)
		}
	}
	c := &testcorpus.Corpus{Hello: schema.Hello{SamplingFrequencyHz: 100}, Batches: []*schema.Batch{b.Batch()}}
	cfg := pprofout.DefaultConfig()
	cfg.Dir = t.TempDir()
	sink, err := pprofout.NewSink(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	path, err := sink.Write(flushtest.Default(t, c))
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := profile.Parse(fh)
	fh.Close()
	if err != nil {
		t.Fatal(err)
	}
	var linked, unlinked int64
	for _, s := range prof.Sample {
		switch tr, sp := s.Label[pprofout.LabelTraceID], s.Label[pprofout.LabelSpanID]; {
		case len(tr) == 0 && len(sp) == 0:
			unlinked += s.Value[0]
		case len(tr) == 1 && tr[0] == traceHex && len(sp) == 1 && sp[0] == spanHex:
			linked += s.Value[0]
		default:
			t.Errorf("sample labels trace_id %v span_id %v, want %s and %s or none", tr, sp, traceHex, spanHex)
		}
	}
	if linked != 3 || unlinked != 2 {
		t.Errorf("%d linked and %d unlinked samples, want 3 and 2", linked, unlinked)
	}

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	for _, tag := range []string{"span_id=" + spanHex, "trace_id=" + traceHex} {
		out, err := exec.Command(goBin, "tool", "pprof", "-top", "-symbolize=none", "-tagfocus="+tag, path).CombinedOutput()
		if err != nil {
			t.Fatalf("go tool pprof -tagfocus=%s: %v\n%s", tag, err, out)
		}
		if !regexp.MustCompile(`(?m)^\s*3\s+60(\.00)?%.*main\.work$`).Match(out) {
			t.Errorf("-tagfocus=%s: want the 3 linked samples of 5:\n%s", tag, out)
		}
	}
}
