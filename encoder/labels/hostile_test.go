package labels

import (
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/schema"
)

// TestHostileWorkloadLabels: a process whose name, path, unit, service,
// environment value, thread name and custom labels hold invalid UTF-8
// reaches the labeler through the real aggregator, with relabelling that
// copies every __meta_ label into a target label. Every label name and
// value that comes out is valid UTF-8 (Parca and protobuf receivers reject
// anything else), with the bad bytes escaped.
func TestHostileWorkloadLabels(t *testing.T) {
	bad := func(s string) string { return s + "\xfe\xff" }
	b := schema.NewBatchBuilder()
	st := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameCPython, FunctionName: b.String("f"), SourceLine: 1})})
	p := b.Process(schema.Process{
		PID: 7, Comm: b.String(bad("comm")), ExecutablePath: b.String(bad("/bin/x")),
		SystemdUnit: b.String(bad("u.service")), ServiceName: b.String(bad("svc")),
		EnvVars: []schema.KeyValue{{Key: b.String("REGION"), Value: b.String(bad("eu"))}},
	})
	b.AddSample(schema.Sample{TimestampUnixNano: 1, Origin: schema.OriginCPUSampling, Value: 1, Process: p, TID: 8,
		ThreadName: b.String(bad("thread")), Stack: st,
		Labels: []schema.KeyValue{{Key: b.String("span"), Value: b.String(bad("id"))}}})
	a, err := aggregate.NewAggregator(aggregate.DefaultConfig(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Add(&schema.Hello{NodeName: bad("node")}, b.Batch()); err != nil {
		t.Fatal(err)
	}
	f := a.Flush(time.Unix(0, 10))

	l, err := New(Config{RelabelConfigs: rules(t, "- action: labelmap\n  regex: __meta_(.+)\n  replacement: m_$1\n")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, keep := l.Labels(nil, f, &f.Samples[0])
	if !keep {
		t.Fatal("sample dropped")
	}
	want := map[string]string{
		"comm": `comm\xfe\xff`, "thread_name": `thread\xfe\xff`, "node": `node\xfe\xff`, "span": `id\xfe\xff`,
		"m_process_executable_path": `/bin/x\xfe\xff`, "m_env_var_REGION": `eu\xfe\xff`,
	}
	seen := map[string]string{}
	for _, lb := range got {
		if !utf8.ValidString(lb.Name) || !utf8.ValidString(lb.Value) {
			t.Errorf("label %q=%q is not valid UTF-8", lb.Name, lb.Value)
		}
		seen[lb.Name] = lb.Value
	}
	for name, v := range want {
		if seen[name] != v {
			t.Errorf("label %s = %q, want %q (all: %v)", name, seen[name], v, got)
		}
	}
}
