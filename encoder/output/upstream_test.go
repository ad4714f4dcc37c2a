//go:build upstreamcompare

// Built only with -tags upstreamcompare and without the build overlay (which
// leaves upstream's reporter out of every Tandem binary, tests included):
//
//	GOFLAGS=-mod=vendor go test -tags upstreamcompare -run TestOTLPSizeAgainstUpstream -v ./encoder/output/

package output_test

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/xconsumer"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"go.opentelemetry.io/ebpf-profiler/libpf"
	"go.opentelemetry.io/ebpf-profiler/reporter"
	"go.opentelemetry.io/ebpf-profiler/reporter/samples"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/otlp"
	"github.com/tandem-profiler/tandem/schema"
)

// The same events through upstream's OTLP reporter (the pinned
// go.opentelemetry.io/ebpf-profiler), so the two encoders' sizes are
// compared on one corpus rather than on two corpora of the same shape.
// The events come from a Flush: every observation of every sample is
// reported once, with the frames, mappings, process and thread the Flush
// resolved, exactly as the tracer would have handed them to upstream.

// upstreamFeeder turns Flush content into libpf values, interning each
// mapping and stack once.
type upstreamFeeder struct {
	f      *aggregate.Flush
	maps   map[uint32]libpf.FrameMapping
	stacks map[uint32]libpf.Frames
}

func (u *upstreamFeeder) str(id uint32) libpf.String {
	if id == 0 {
		return libpf.NullString
	}
	return libpf.Intern(u.f.Strings[id])
}

func (u *upstreamFeeder) mapping(id uint32) libpf.FrameMapping {
	if id == 0 {
		return libpf.FrameMapping{}
	}
	if m, ok := u.maps[id]; ok {
		return m
	}
	m := &u.f.Mappings[id]
	name := m.FileName
	if name == 0 {
		name = m.Path
	}
	fm := libpf.NewFrameMapping(libpf.FrameMappingData{
		File: libpf.NewFrameMappingFile(libpf.FrameMappingFileData{
			FileID:     libpf.NewFileID(m.FileID.Hi, m.FileID.Lo),
			FileName:   u.str(name),
			GnuBuildID: u.f.Strings[m.GNUBuildID],
			GoBuildID:  u.f.Strings[m.GoBuildID],
		}),
		Start:      libpf.Address(m.Start),
		End:        libpf.Address(m.End),
		FileOffset: m.FileOffset,
	})
	u.maps[id] = fm
	return fm
}

func (u *upstreamFeeder) frames(stack uint32) libpf.Frames {
	if fs, ok := u.stacks[stack]; ok {
		return fs
	}
	var fs libpf.Frames
	for _, l := range u.f.Stack(stack) {
		loc := &u.f.Locations[l]
		ty := libpf.InterpreterType(loc.Kind).Frame()
		if loc.Error {
			ty = ty.Error()
		}
		fr := libpf.Frame{
			Type:            ty,
			AddressOrLineno: libpf.AddressOrLineno(loc.Address),
			Mapping:         u.mapping(loc.Mapping),
			SourceLine:      libpf.SourceLineno(loc.Line),
			SourceColumn:    libpf.SourceColumn(loc.Column),
		}
		if fn := loc.Function; fn != 0 {
			fr.FunctionName = u.str(u.f.Functions[fn].Name)
			fr.SourceFile = u.str(u.f.Functions[fn].File)
		}
		fs.Append(&fr)
	}
	u.stacks[stack] = fs
	return fs
}

func (u *upstreamFeeder) labels(set uint32) map[libpf.String]libpf.String {
	if set == 0 {
		return nil
	}
	m := map[libpf.String]libpf.String{}
	for _, kv := range u.f.LabelSet(set) {
		m[u.str(kv.Key)] = u.str(kv.Value)
	}
	return m
}

// upstreamProfiles reports every observation of f to upstream's collector
// reporter and returns the one profile batch it generates. Samples of
// origins upstream does not know are not reported; skipped counts them.
func upstreamProfiles(tb testing.TB, f *aggregate.Flush, hz int) (p pprofile.Profiles, skipped int) {
	tb.Helper()
	got := make(chan pprofile.Profiles, 1)
	next, err := xconsumer.NewProfiles(func(_ context.Context, p pprofile.Profiles) error {
		got <- p
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	r, err := reporter.NewCollector(&reporter.Config{
		Name: "upstream", SamplesPerSecond: hz, ReportInterval: time.Millisecond,
	}, next)
	if err != nil {
		tb.Fatal(err)
	}
	u := &upstreamFeeder{f: f, maps: map[uint32]libpf.FrameMapping{}, stacks: map[uint32]libpf.Frames{}}
	env := map[uint32]map[libpf.String]libpf.String{}
	for i := range f.Samples {
		s := &f.Samples[i]
		switch s.Origin {
		case schema.OriginCPUSampling, schema.OriginOffCPU, schema.OriginProbe:
		default:
			skipped++
			continue
		}
		res := &f.Resources[s.Resource]
		if _, ok := env[s.Resource]; !ok {
			env[s.Resource] = u.labels(res.EnvVars)
		}
		// Upstream keys a sample by trace hash, thread and CPU; the tracer's
		// hash covers the frames and the custom labels, so two Flush samples
		// that differ only in labels stay apart here too.
		trace := &libpf.Trace{
			Frames:       u.frames(s.Stack),
			Hash:         libpf.NewTraceHash(uint64(s.Stack), uint64(s.Labels)),
			CustomLabels: u.labels(s.Labels),
		}
		meta := samples.TraceEventMeta{
			Comm:           u.str(s.ThreadName),
			ProcessName:    u.str(res.Comm),
			ExecutablePath: u.str(res.ExecutablePath),
			ContainerID:    u.str(res.ContainerID),
			EnvVars:        env[s.Resource],
			APMServiceName: f.Strings[res.ServiceName],
			CPU:            s.CPU,
			Origin:         libpf.Origin(s.Origin),
			PID:            libpf.PID(res.PID),
			TID:            libpf.PID(s.TID),
		}
		for j, ts := range s.Timestamps {
			meta.Timestamp = libpf.UnixTime64(ts)
			meta.Value = s.Values[j]
			if err := r.ReportTraceEvent(trace, &meta); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := r.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	defer r.Stop()
	select {
	case p = <-got:
	case <-time.After(time.Minute):
		tb.Fatal("upstream reporter generated no profile")
	}
	return p, skipped
}

// gzip1 returns the size of b compressed at level 1, as the exporter
// compresses.
func gzip1(tb testing.TB, b []byte) int {
	tb.Helper()
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Len()
}

// otlpSizes are per-sample bytes of one flush's request.
type otlpSizes struct{ proto, gzip float64 }

func sizesOf(tb testing.TB, b []byte, samples int) otlpSizes {
	return otlpSizes{float64(len(b)) / float64(samples), float64(gzip1(tb, b)) / float64(samples)}
}

// tandemRequest cuts one flush from the corpus and returns it (for the
// caller to release) with Tandem's request for it, marshaled as the
// exporter sends it.
func tandemRequest(tb testing.TB, p *pipe) (*aggregate.Flush, []byte) {
	tb.Helper()
	f := p.accumulate()
	enc, err := otlp.NewEncoder(otlp.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	b, err := enc.Encode(f).MarshalProto()
	if err != nil {
		tb.Fatal(err)
	}
	return f, b
}

// upstreamRuns is how many times the upstream side is generated: its
// dictionaries follow Go map order, so its gzip size moves by a few percent
// from run to run; the median is reported.
const upstreamRuns = 3

// compareWithUpstream encodes one flush of the corpus with Tandem's
// encoder and with upstream's reporter and returns both sizes per sample
// (upstream's the median of upstreamRuns).
func compareWithUpstream(tb testing.TB, p *pipe) (tandem, upstream otlpSizes) {
	tb.Helper()
	f, b := tandemRequest(tb, p)
	defer p.p.Aggregator().Release(f)
	n := f.Events
	var ups []otlpSizes
	for range upstreamRuns {
		up, skipped := upstreamProfiles(tb, f, int(p.c.Hello.SamplingFrequencyHz))
		if skipped > 0 {
			n = f.Events - skipped
		}
		// What upstream's OTLP reporter sends: its gRPC client marshals the
		// request as built, resource attributes inline.
		ub, err := pprofileotlp.NewExportRequestFromProfiles(up).MarshalProto()
		if err != nil {
			tb.Fatal(err)
		}
		ups = append(ups, sizesOf(tb, ub, n))
	}
	slices.SortFunc(ups, func(a, b otlpSizes) int { return cmp.Compare(a.gzip, b.gzip) })
	return sizesOf(tb, b, f.Events), ups[len(ups)/2]
}

// TestOTLPSizeAgainstUpstream compares both encoders' request sizes on the
// same events (the benchmark corpus, or $TANDEM_BENCH_CORPUS). Tandem's
// request after gzip-1 must not be larger than upstream's; docs/benchmarks/encoding.md
// has the figures.
func TestOTLPSizeAgainstUpstream(t *testing.T) {
	c := benchCorpus(t)
	p, _ := newPipe(t, c, export.CompressionNone)
	tandem, upstream := compareWithUpstream(t, p)
	t.Logf("protobuf B/sample: tandem %.2f, upstream %.2f (%.3f×)", tandem.proto, upstream.proto, tandem.proto/upstream.proto)
	t.Logf("gzip-1 B/sample: tandem %.2f, upstream %.2f (%.3f×)", tandem.gzip, upstream.gzip, tandem.gzip/upstream.gzip)
	if tandem.gzip > upstream.gzip {
		t.Errorf("gzip-1: tandem %.2f B/sample, more than upstream's %.2f on the same events", tandem.gzip, upstream.gzip)
	}
}
