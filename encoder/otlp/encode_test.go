package otlp_test

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/otlpcorpus"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/otlp"
	"github.com/tandem-profiler/tandem/schema"
)

func newEncoder(t testing.TB) *otlp.Encoder {
	t.Helper()
	e, err := otlp.NewEncoder(otlp.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// checkRequest decodes req strictly and compares it with the corpus.
func checkRequest(t *testing.T, req pprofileotlp.ExportRequest, c *testcorpus.Corpus) *otlpcorpus.Result {
	t.Helper()
	res, err := otlpcorpus.Decode(req.Profiles())
	if err != nil {
		t.Fatal(err)
	}
	if diff := testcorpus.Diff(testcorpus.Events(c), res.Events, 5); diff != nil {
		t.Fatalf("request differs from input:\n%s", strings.Join(diff, "\n"))
	}
	checkResources(t, res, c)
	return res
}

// checkResources compares resource attributes with the processes of the
// corpus.
func checkResources(t *testing.T, res *otlpcorpus.Result, c *testcorpus.Corpus) {
	t.Helper()
	want := map[string]map[string]string{}
	for _, b := range c.Batches {
		for _, p := range b.Processes {
			exe := b.String(p.ExecutablePath)
			attrs := map[string]string{
				"service.name": aggregate.ServiceName(b.String(p.ServiceName), b.String(p.Comm), exe, p.PID),
				"process.pid":  fmt.Sprint(p.PID),
				"host.name":    c.Hello.NodeName,
			}
			if exe != "" {
				attrs["process.executable.path"] = exe
				attrs["process.executable.name"] = path.Base(exe)
			}
			if s := b.String(p.ContainerID); s != "" {
				attrs["container.id"] = s
			}
			if s := b.String(p.SystemdUnit); s != "" {
				attrs["systemd.unit"] = s
			}
			for _, kv := range p.EnvVars {
				attrs["process.environment_variable."+b.String(kv.Key)] = b.String(kv.Value)
			}
			want[fmt.Sprint(p.PID)] = attrs
		}
	}
	seen := map[string]bool{}
	for _, r := range res.Resources {
		pid := r.Attrs["process.pid"]
		if seen[pid] {
			t.Errorf("two resources for pid %s", pid)
		}
		seen[pid] = true
		if got, exp := fmt.Sprint(r.Attrs), fmt.Sprint(want[pid]); got != exp {
			t.Errorf("pid %s attributes:\n got %s\nwant %s", pid, got, exp)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d resources, want %d", len(seen), len(want))
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Flush(t, flushtest.NewAggregator(t, aggregate.DefaultConfig()), c)
	req, err := otlp.Encode(f, otlp.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	res := checkRequest(t, req, c)

	types := slices.Clone(res.ProfileTypes)
	slices.Sort(types)
	types = slices.Compact(types)
	want := []string{
		"events/count events/count 1",
		"off_cpu/nanoseconds samples/count 0",
		"samples/count cpu/nanoseconds 10309278", // 1e9 / the corpus's 97 Hz
		"unknown_origin_9/count unknown_origin_9/count 1",
	}
	if !slices.Equal(types, want) {
		t.Errorf("profile types %q, want %q", types, want)
	}
}

func TestEncodeValues(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	req := newEncoder(t).Encode(flushtest.Flush(t, flushtest.NewAggregator(t, aggregate.DefaultConfig()), c))
	dict := req.Profiles().Dictionary()
	for _, rp := range req.Profiles().ResourceProfiles().All() {
		for _, prof := range rp.ScopeProfiles().At(0).Profiles().All() {
			typ := dict.StringTable().At(int(prof.SampleType().TypeStrindex()))
			for _, s := range prof.Samples().All() {
				switch {
				case typ == "samples" && s.Values().Len() != 0:
					t.Fatalf("CPU sample carries %d values; counts are implied by timestamps", s.Values().Len())
				case typ == "off_cpu" && s.Values().Len() != s.TimestampsUnixNano().Len():
					t.Fatalf("off-CPU sample has %d values for %d timestamps", s.Values().Len(), s.TimestampsUnixNano().Len())
				}
			}
		}
	}
}

func TestEncodeWireRoundTrip(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	req := newEncoder(t).Encode(flushtest.Flush(t, flushtest.NewAggregator(t, aggregate.DefaultConfig()), c))
	buf, err := req.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	back := pprofileotlp.NewExportRequest()
	if err := back.UnmarshalProto(buf); err != nil {
		t.Fatal(err)
	}
	checkRequest(t, back, c)
}

// TestEncodeReuse encodes flushes of different shapes into recycled
// requests: shrinking and growing every table in place must not leave stale
// entries behind.
func TestEncodeReuse(t *testing.T) {
	small := testcorpus.Generate(testcorpus.Small())
	tinyCfg := testcorpus.Small()
	tinyCfg.Seed, tinyCfg.Samples, tinyCfg.Stacks = 3, 200, 10
	tinyCfg.UnknownOriginFraction = 0
	tiny := testcorpus.Generate(tinyCfg)
	otherCfg := testcorpus.Small()
	otherCfg.Seed = 11
	other := testcorpus.Generate(otherCfg)

	e := newEncoder(t)
	a := flushtest.NewAggregator(t, aggregate.DefaultConfig())
	for i, c := range []*testcorpus.Corpus{small, tiny, small, other, small, small} {
		f := flushtest.Flush(t, a, c)
		req := e.Encode(f)
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkRequest(t, req, c) })
		e.Release(req)
		a.Release(f)
	}
}

func TestEncodeEmpty(t *testing.T) {
	a := flushtest.NewAggregator(t, aggregate.DefaultConfig())
	f := a.Flush(time.Now())
	req := newEncoder(t).Encode(f)
	res, err := otlpcorpus.Decode(req.Profiles())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Events) != 0 || req.Profiles().ResourceProfiles().Len() != 0 {
		t.Errorf("empty flush produced %d events", len(res.Events))
	}
}

func TestEncodeEdgeFrames(t *testing.T) {
	b := schema.NewBatchBuilder()
	proc := b.Process(schema.Process{PID: 5})
	empty := b.Stack(nil)
	abort := b.Stack([]uint32{
		b.Frame(schema.Frame{Kind: schema.FrameUnknown, Error: true, AddressOrLine: 3}),
		b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x99}), // no mapping
		b.Frame(schema.Frame{Kind: schema.FrameKernel, AddressOrLine: 0x10, FunctionName: b.String("schedule")}),
		b.Frame(schema.Frame{Kind: schema.FrameV8, SourceFile: b.String("app.js"), SourceLine: 7, SourceColumn: 3}),
	})
	b.AddSample(schema.Sample{TimestampUnixNano: 10, Origin: schema.OriginCPUSampling, Value: 1, Process: proc, TID: 5, Stack: empty})
	b.AddSample(schema.Sample{TimestampUnixNano: 11, Origin: schema.OriginCPUSampling, Value: 3, Process: proc, TID: 5, Stack: abort})
	c := &testcorpus.Corpus{Hello: schema.Hello{SamplingFrequencyHz: 0}, Batches: []*schema.Batch{b.Batch()}}
	a := flushtest.NewAggregator(t, aggregate.DefaultConfig())
	if err := a.Add(&c.Hello, c.Batches[0]); err != nil {
		t.Fatal(err)
	}
	req := newEncoder(t).Encode(a.Flush(time.Unix(0, 20)))
	res, err := otlpcorpus.Decode(req.Profiles())
	if err != nil {
		t.Fatal(err)
	}
	// Unknown frequency: one event per sample (period 1 of samples/count,
	// which receivers naming profiles by their period type can name). A
	// count sample with a value of 3 keeps its values.
	if diff := testcorpus.Diff(testcorpus.Events(c), res.Events, 5); diff != nil {
		t.Fatalf("%s", strings.Join(diff, "\n"))
	}
	if got := res.ProfileTypes; !slices.Equal(got, []string{"samples/count samples/count 1"}) {
		t.Errorf("profile types %q", got)
	}
	if name := res.Resources[0].Attrs["service.name"]; name != "unknown_service:pid-5" {
		t.Errorf("service.name = %q", name)
	}
}

func TestEncodeAllocations(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	a := flushtest.NewAggregator(t, aggregate.DefaultConfig())
	f := flushtest.Flush(t, a, c)
	e := newEncoder(t)
	e.Release(e.Encode(f))
	e.Release(e.Encode(f))
	allocs := testing.AllocsPerRun(5, func() { e.Release(e.Encode(f)) })
	if per := allocs / float64(f.Events); per > 0.02 {
		t.Errorf("steady-state Encode: %.0f allocations for %d samples (%.3f/sample)", allocs, f.Events, per)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := otlp.DefaultConfig().Validate(); err != nil {
		t.Error(err)
	}
	if _, err := otlp.NewEncoder(otlp.Config{}); err == nil {
		t.Error("empty scope name accepted")
	}
}

// encodeWhole encodes f with no size limit, which must give one request,
// and returns it (to be released) with its serialized size.
func encodeWhole(t *testing.T, e *otlp.Encoder, f *aggregate.Flush) (pprofileotlp.ExportRequest, int) {
	t.Helper()
	whole, err := e.EncodeLimited(f, 0)
	if err != nil || len(whole) != 1 {
		t.Fatalf("no limit: %d requests, %v", len(whole), err)
	}
	buf, err := whole[0].MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return whole[0], len(buf)
}

func TestEncodeLimitedSplits(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Flush(t, flushtest.NewAggregator(t, aggregate.DefaultConfig()), c)
	e := newEncoder(t)
	whole, size := encodeWhole(t, e, f)
	e.Release(whole)
	limit := size / 3
	reqs, err := e.EncodeLimited(f, limit)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) < 3 {
		t.Fatalf("%d requests under a limit of a third of the whole, want at least 3", len(reqs))
	}
	var events []testcorpus.Event
	for _, r := range reqs {
		b, err := r.MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > limit {
			t.Errorf("request of %d bytes over the %d limit", len(b), limit)
		}
		res, err := otlpcorpus.Decode(r.Profiles())
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, res.Events...)
	}
	if diff := testcorpus.Diff(testcorpus.Events(c), events, 5); diff != nil {
		t.Fatalf("split requests differ from input:\n%s", strings.Join(diff, "\n"))
	}
	for _, r := range reqs {
		e.Release(r)
	}
	if _, err := e.EncodeLimited(f, 100); !errors.Is(err, otlp.ErrTooLarge) {
		t.Fatalf("limit below one sample: err = %v, want ErrTooLarge", err)
	}
}

// TestFileIDAsGNUBuildID: with the option on, a mapping without a GNU build
// id carries its file id hex (the debuginfo upload key) as the GNU build id;
// one with a GNU build id keeps it; with the option off the attribute is
// left out.
func TestFileIDAsGNUBuildID(t *testing.T) {
	withGNU := schema.FileID{Hi: 0x1111, Lo: 0x2222}
	withoutGNU := schema.FileID{Hi: 0x0123456789abcdef, Lo: 0xfedcba9876543210}
	b := schema.NewBatchBuilder()
	proc := b.Process(schema.Process{PID: 5})
	m1 := b.Mapping(schema.Mapping{FileName: b.String("withgnu"), Path: b.String("/usr/bin/withgnu"), GNUBuildID: b.String("abcdef0123"), FileID: withGNU, Start: 0x1000, End: 0x2000})
	m2 := b.Mapping(schema.Mapping{FileName: b.String("nognu"), Path: b.String("/opt/nognu"), FileID: withoutGNU, Start: 0x3000, End: 0x4000})
	stack := b.Stack([]uint32{
		b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x1100, Mapping: m1}),
		b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x3100, Mapping: m2}),
	})
	b.AddSample(schema.Sample{TimestampUnixNano: 10, Origin: schema.OriginCPUSampling, Value: 1, Process: proc, TID: 5, Stack: stack})
	hello := schema.Hello{SamplingFrequencyHz: 19}

	for _, tc := range []struct {
		on   bool
		want map[string]string // mapping file name -> build_id.gnu
	}{
		{false, map[string]string{"withgnu": "abcdef0123", "nognu": ""}},
		{true, map[string]string{"withgnu": "abcdef0123", "nognu": "0123456789abcdeffedcba9876543210"}},
	} {
		t.Run(fmt.Sprint(tc.on), func(t *testing.T) {
			a := flushtest.NewAggregator(t, aggregate.DefaultConfig())
			if err := a.Add(&hello, b.Batch()); err != nil {
				t.Fatal(err)
			}
			cfg := otlp.DefaultConfig()
			cfg.FileIDAsGNUBuildID = tc.on
			req, err := otlp.Encode(a.Flush(time.Unix(0, 20)), cfg)
			if err != nil {
				t.Fatal(err)
			}
			d := req.Profiles().Dictionary()
			got := map[string]string{}
			for i := 1; i < d.MappingTable().Len(); i++ {
				m := d.MappingTable().At(i)
				file := d.StringTable().At(int(m.FilenameStrindex()))
				got[file] = ""
				for _, ai := range m.AttributeIndices().All() {
					kv := d.AttributeTable().At(int(ai))
					if d.StringTable().At(int(kv.KeyStrindex())) == otlp.AttrBuildIDGNU {
						got[file] = kv.Value().Str()
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("build_id.gnu by mapping = %v, want %v", got, tc.want)
			}
		})
	}
}
