package aggregate_test

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/otlp"
	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/encoder/pprofout"
	"github.com/tandem-profiler/tandem/encoder/symbolize"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/promtest"
)

// lateTarget is the native frame of TestExecutableAfterFirstFlush: a
// function of this test binary, which is the executable.
//
//go:noinline
func lateTarget() {}

const lateName = "github.com/tandem-profiler/tandem/encoder/aggregate_test.lateTarget"

// TestExecutableAfterFirstFlush: a native frame flushed before its
// executable reached the symbolizer is named from the first flush after
// the executable arrived, in every format the aggregator feeds, each
// through one encoder kept across flushes as an output keeps it; the
// earlier flush is left as it was. The Arrow stack (as
// --symbolize-native=on feeds it) after the arrival must also equal what
// an aggregator that had the executable from the start writes: the
// encoder's caches of the dictionary generation drop the unnamed frame.
func TestExecutableAfterFirstFlush(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	id := schema.FileID{Hi: 0x1a7e, Lo: 0x1a7e}
	n := &schema.ExecutableNotice{FileID: id, Path: exe, HasDescriptor: true}
	addr := uint64(reflect.ValueOf(lateTarget).Pointer())
	hello := &schema.Hello{NodeName: "n"}
	batch := func() *schema.Batch {
		b := schema.NewBatchBuilder()
		m := b.Mapping(schema.Mapping{FileName: b.String("aggregate.test"), FileID: id, Start: 0x400000, End: 0x4000000})
		stack := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: addr, Mapping: m})})
		b.AddSample(schema.Sample{TimestampUnixNano: 1, Origin: schema.OriginCPUSampling, Value: 1,
			Process: b.Process(schema.Process{PID: 42}), TID: 42, Stack: stack})
		return b.Batch()
	}
	type run struct {
		a   *aggregate.Aggregator
		reg *prometheus.Registry
		sym *symbolize.Symbolizer
		enc *encoders
	}
	start := func() *run {
		sym, err := symbolize.New(symbolize.DefaultConfig(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sym.Close)
		cfg := aggregate.DefaultConfig()
		cfg.Symbolizer = sym
		reg := prometheus.NewRegistry()
		a, err := aggregate.NewAggregator(cfg, reg)
		if err != nil {
			t.Fatal(err)
		}
		return &run{a, reg, sym, newEncoders(t)}
	}
	arrive := func(r *run) {
		f, err := os.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		r.sym.Add(n, f) // as executables.Router does, then the aggregator hears of it
		r.a.NoteExecutable(n)
	}
	flush := func(r *run, sec int64) *aggregate.Flush {
		if err := r.a.Add(hello, batch()); err != nil {
			t.Fatal(err)
		}
		return r.a.Flush(time.Unix(sec, 0))
	}

	early := start()
	arrive(early)
	want := early.enc.encode(t, flush(early, 10))
	want.check(t, "executable from the start", true)

	late := start()
	before := flush(late, 10)
	late.enc.encode(t, before).check(t, "before the executable", false)
	if got := promtest.Value(t, late.reg, "tandem_encoder_aggregator_late_locations"); got != 1 {
		t.Errorf("%v locations waiting for their executable, want 1", got)
	}
	arrive(late)
	after := late.enc.encode(t, flush(late, 20))
	after.check(t, "after the executable", true)
	if after.arrow != want.arrow {
		t.Errorf("Arrow stack after the executable:\n%s\nwant, as with it from the start:\n%s", after.arrow, want.arrow)
	}
	if got := promtest.Value(t, late.reg, "tandem_encoder_aggregator_late_locations"); got != 0 {
		t.Errorf("%v locations still waiting, want 0", got)
	}
	newEncoders(t).encode(t, before).check(t, "the earlier flush, again", false)
}

// encoders are one of each format's encoder.
type encoders struct {
	otlp  *otlp.Encoder
	arrow *arrow.V2Encoder
}

func newEncoders(t *testing.T) *encoders {
	t.Helper()
	o, err := otlp.NewEncoder(otlp.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	a, err := arrow.NewV2Encoder(arrow.DefaultConfig(), nil, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return &encoders{o, a}
}

// names are the function names of the single native frame of a flush
// (comma-separated), as each format has them; arrow is its Arrow stack,
// arrowFn the function its location carries there.
type names struct{ flush, otlp, pprof, arrow, arrowFn string }

func (e *encoders) encode(t *testing.T, f *aggregate.Flush) names {
	t.Helper()
	if len(f.Samples) != 1 {
		t.Fatalf("%d samples, want 1", len(f.Samples))
	}
	var out names
	var fl []string
	for _, ln := range f.NativeLines(f.Stack(f.Samples[0].Stack)[0]) {
		fl = append(fl, f.Strings[f.Functions[ln.Function].Name])
	}
	out.flush = strings.Join(fl, ",")

	dict := e.otlp.Encode(f).Profiles().Dictionary()
	var on []string
	for i := range dict.FunctionTable().Len() {
		if name := dict.StringTable().At(int(dict.FunctionTable().At(i).NameStrindex())); name != "" {
			on = append(on, name)
		}
	}
	out.otlp = strings.Join(on, ",")

	var pn []string
	for _, fn := range pprofout.Profile(f).Function {
		pn = append(pn, fn.Name)
	}
	out.pprof = strings.Join(pn, ",")

	g, _, err := output.NameLocations(f) // as --symbolize-native=on feeds Arrow
	if err != nil {
		t.Fatal(err)
	}
	bufs, err := e.arrow.Encode(g)
	if err != nil || len(bufs) != 1 {
		t.Fatalf("Arrow: %d payloads, %v", len(bufs), err)
	}
	rows, err := parcatest.DecodeV2(bufs[0], memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	out.arrow = rows[0].Stack
	// The Location fields, as parcatest.Location.String joins them.
	if fields := strings.Split(out.arrow, "|"); len(fields) == 10 {
		out.arrowFn = fields[7]
	}
	return out
}

func (n names) check(t *testing.T, what string, named bool) {
	t.Helper()
	for _, f := range []struct{ format, got string }{{"Flush.NativeLines", n.flush}, {"OTLP", n.otlp}, {"pprof", n.pprof}, {"Arrow", n.arrowFn}} {
		if (f.got == lateName) != named {
			t.Errorf("%s: %s names %q, want named %v", what, f.format, f.got, named)
		}
	}
}
