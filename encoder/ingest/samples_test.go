package ingest

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

func TestSamplesCountedByOrigin(t *testing.T) {
	bb := schema.NewBatchBuilder()
	f := bb.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 1})
	proc := bb.Process(schema.Process{PID: 1})
	stack := bb.Stack([]uint32{f})
	for _, o := range []schema.Origin{schema.OriginCPUSampling, schema.OriginCPUSampling, schema.OriginOffCPU, schema.Origin(99)} {
		bb.AddSample(schema.Sample{Process: proc, Stack: stack, Value: 1, Origin: o})
	}
	b := bb.Batch()
	b.Sequence = 1
	p, err := schema.EncodeBatch(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	tr := newTracker(t, &recordingSink{}, nil, reg)
	bf := ipc.Frame{Type: ipc.FrameBatch, Payload: p}
	// The resent copy of the batch is a duplicate and is not counted again.
	if err := tr.Serve(context.Background(), &frames{list: []ipc.Frame{hello(t, schema.MajorVersion, 1), bf, bf}}, nil); err != nil {
		t.Fatal(err)
	}
	for origin, want := range map[string]float64{"cpu": 2, "off_cpu": 1, "unknown": 1, "probe": 0} {
		if got := testutil.ToFloat64(tr.metrics.samples[originIndex(origin)]); got != want {
			t.Errorf("samples{origin=%q} = %v, want %v", origin, got, want)
		}
	}
}

func originIndex(name string) int {
	for i := range 4 {
		if schema.Origin(i).String() == name {
			return i
		}
	}
	return 0
}
