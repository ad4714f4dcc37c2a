package pprofout_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/pprofout"
	"github.com/tandem-profiler/tandem/schema"
)

// key identifies an aggregated pprof sample by content.
func key(pid, tid, cpu int64, comm, thread, labels, typ, stack string) string {
	return fmt.Sprintf("pid=%d tid=%d cpu=%d comm=%q thread=%q labels=%q type=%s\n%s", pid, tid, cpu, comm, thread, labels, typ, stack)
}

func frameString(addr uint64, file, buildID, fn, src string, line int64) string {
	return fmt.Sprintf("%#x|%s|%s|%s|%s|%d", addr, file, buildID, fn, src, line)
}

// inputTotals sums the corpus's values by content key.
func inputTotals(c *testcorpus.Corpus) map[string]int64 {
	out := map[string]int64{}
	for _, b := range c.Batches {
		for _, s := range b.Samples {
			var frames []string
			for _, fi := range b.Stack(s.Stack) {
				f := b.Frames[fi]
				file, buildID := "", ""
				if f.Mapping != 0 {
					m := b.Mappings[f.Mapping-1]
					file = b.String(m.Path)
					if file == "" {
						file = b.String(m.FileName)
					}
					buildID = schema.KeyOf(b.String(m.GNUBuildID), m.FileID).String()
				}
				frames = append(frames, frameString(f.AddressOrLine, file, buildID, b.String(f.FunctionName), b.String(f.SourceFile), int64(f.SourceLine)))
			}
			var labels []string
			for _, kv := range s.Labels {
				labels = append(labels, b.String(kv.Key)+"="+b.String(kv.Value))
			}
			p := b.Processes[s.Process]
			// Every process label the stream holds.
			for k, v := range map[string]string{"executable": b.String(p.ExecutablePath), "container_id": b.String(p.ContainerID),
				"systemd_unit": b.String(p.SystemdUnit), "service_name": b.String(p.ServiceName), "node": c.Hello.NodeName} {
				if v != "" {
					labels = append(labels, k+"="+v)
				}
			}
			for _, kv := range p.EnvVars {
				labels = append(labels, "env_"+b.String(kv.Key)+"="+b.String(kv.Value))
			}
			sort.Strings(labels)
			st := aggregate.SampleTypeOf(s.Origin, c.Hello.SamplingFrequencyHz)
			out[key(int64(p.PID), int64(s.TID), int64(s.CPU), b.String(p.Comm), b.String(s.ThreadName),
				strings.Join(labels, ","), st.Type+"/"+st.Unit, strings.Join(frames, "\n"))] += s.Value
		}
	}
	return out
}

// profileTotals sums a parsed profile's values by content key.
func profileTotals(t *testing.T, p *profile.Profile) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, s := range p.Sample {
		var frames []string
		for _, l := range s.Location {
			file, buildID, fn, src, line := "", "", "", "", int64(0)
			if l.Mapping != nil {
				file, buildID = l.Mapping.File, l.Mapping.BuildID
			}
			if len(l.Line) > 1 {
				t.Fatalf("location %d has %d lines", l.ID, len(l.Line))
			}
			if len(l.Line) == 1 {
				fn, src, line = l.Line[0].Function.Name, l.Line[0].Function.Filename, l.Line[0].Line
			}
			frames = append(frames, frameString(l.Address, file, buildID, fn, src, line))
		}
		var labels []string
		for k, vs := range s.Label {
			if k == pprofout.LabelComm || k == pprofout.LabelThreadName {
				continue
			}
			for _, v := range vs {
				labels = append(labels, k+"="+v)
			}
		}
		sort.Strings(labels)
		str := func(k string) string {
			if v := s.Label[k]; len(v) == 1 {
				return v[0]
			}
			return ""
		}
		num := func(k string) int64 { // present even when 0
			if v := s.NumLabel[k]; len(v) == 1 {
				return v[0]
			}
			t.Fatalf("sample without numeric label %s: %v", k, s.NumLabel)
			return 0
		}
		nonZero := 0
		for i, v := range s.Value {
			if v == 0 {
				continue
			}
			nonZero++
			st := p.SampleType[i]
			out[key(num(pprofout.LabelPID), num(pprofout.LabelTID), num(pprofout.LabelCPU),
				str(pprofout.LabelComm), str(pprofout.LabelThreadName), strings.Join(labels, ","),
				st.Type+"/"+st.Unit, strings.Join(frames, "\n"))] += v
		}
		if nonZero != 1 {
			t.Fatalf("sample with %d non-zero values: %v", nonZero, s.Value)
		}
	}
	return out
}

func TestProfileMatchesInput(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	p := pprofout.Profile(f)
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	parsed, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want, got := inputTotals(c), profileTotals(t, parsed)
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("sample %s: got %d, want %d", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d distinct samples, want %d", len(got), len(want))
	}
	var types []string
	for _, st := range parsed.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	sort.Strings(types)
	if got, want := strings.Join(types, " "), "events/count samples/count unknown_origin_9/count wallclock/nanoseconds"; got != want {
		t.Errorf("sample types %q, want %q", got, want)
	}
	if parsed.PeriodType.Type != "cpu" || parsed.Period != int64(1e9)/97 || parsed.DefaultSampleType != "samples" {
		t.Errorf("period %v %d, default %q", parsed.PeriodType, parsed.Period, parsed.DefaultSampleType)
	}
	if parsed.TimeNanos != f.StartUnixNano || parsed.DurationNanos != f.EndUnixNano-f.StartUnixNano {
		t.Errorf("time %d+%d, want %d+%d", parsed.TimeNanos, parsed.DurationNanos, f.StartUnixNano, f.EndUnixNano-f.StartUnixNano)
	}
}

func TestSinkWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "profiles")
	cfg := pprofout.DefaultConfig()
	cfg.Dir = dir
	s, err := pprofout.NewSink(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	first, err := s.Write(f)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Write(f) // same interval end: must not overwrite
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`/tandem-\d{8}T\d{6}\.\d{3}Z\.pb\.gz$`).MatchString(first) ||
		!strings.HasSuffix(second, "-1.pb.gz") {
		t.Errorf("paths %q, %q", first, second)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries (temporary files left?)", len(entries))
	}
	// The directory's group (make run: the user who ran sudo) reads them,
	// unless the umask says otherwise.
	if fi, err := os.Stat(first); err != nil || fi.Mode().Perm() != pprofout.FileMode&^umask(t) {
		t.Errorf("%s: mode %v (%v), want %v less the umask %v", first, fi.Mode(), err, os.FileMode(pprofout.FileMode), umask(t))
	}
	fh, err := os.Open(first)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	parsed, err := profile.Parse(fh)
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed.Sample) != len(f.Samples) {
		t.Errorf("%d samples, want %d", len(parsed.Sample), len(f.Samples))
	}

	a, _ := aggregate.NewAggregator(aggregate.DefaultConfig(), nil)
	if path, err := s.Write(a.Flush(time.Now())); path != "" || err != nil {
		t.Errorf("empty flush: %q, %v", path, err)
	}

	if _, err := pprofout.NewSink(pprofout.Config{}, nil); err == nil {
		t.Error("empty config accepted")
	}
}

// TestGoToolPprof checks that `go tool pprof` reads the file.
func TestGoToolPprof(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	cfg := pprofout.DefaultConfig()
	cfg.Dir = t.TempDir()
	s, err := pprofout.NewSink(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := schema.NewBatchBuilder()
	st := b.Stack([]uint32{
		b.Frame(schema.Frame{Kind: schema.FrameGo, AddressOrLine: 0x4010, FunctionName: b.String("main.work"), SourceFile: b.String("main.go"), SourceLine: 12}),
		b.Frame(schema.Frame{Kind: schema.FrameGo, AddressOrLine: 0x4020, FunctionName: b.String("main.main"), SourceFile: b.String("main.go"), SourceLine: 5}),
	})
	for i := range 5 {
		b.AddSample(schema.Sample{TimestampUnixNano: int64(1000 + i), Origin: schema.OriginCPUSampling, Value: 1,
			Process: b.Process(schema.Process{PID: 3, Comm: b.String("app")}), TID: 3, Stack: st})
	}
	c := &testcorpus.Corpus{Hello: schema.Hello{SamplingFrequencyHz: 100}, Batches: []*schema.Batch{b.Batch()}}
	path, err := s.Write(flushtest.Default(t, c))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(goBin, "tool", "pprof", "-top", "-symbolize=none", path).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^\s*5\s+100%.*main\.work$`).Match(out) || !bytes.Contains(out, []byte("main.main")) {
		t.Errorf("unexpected output:\n%s", out)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg pprofout.Config
		ok  bool
	}{
		{pprofout.Config{Dir: "/tmp/x"}, true}, // empty prefix takes the default
		{pprofout.Config{Dir: "/tmp/x", Prefix: "node-a"}, true},
		{pprofout.Config{}, false},
		{pprofout.Config{Dir: "/tmp/x", Prefix: "a/b"}, false},
		{pprofout.Config{Dir: "/tmp/x", MaxBytes: 1 << 20}, true},
		{pprofout.Config{Dir: "/tmp/x", MaxBytes: -1}, false},
	} {
		if err := tt.cfg.Validate(); (err == nil) != tt.ok {
			t.Errorf("%+v: Validate = %v", tt.cfg, err)
		}
	}
}

// TestProfileNamesAndPaths: a mapping whose stream entry has only a base
// name gets the full path its executable notice announced; names are
// written as resolved, and only mangled ones get a system name (which
// pprof would demangle; it strips the brackets of "<module>" otherwise).
func TestProfileNamesAndPaths(t *testing.T) {
	a, err := aggregate.NewAggregator(aggregate.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := schema.FileID{Hi: 7, Lo: 9}
	a.NoteExecutable(&schema.ExecutableNotice{FileID: id, FileName: "libpython3.11.so.1.0", Path: "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"})
	bb := schema.NewBatchBuilder()
	m := bb.Mapping(schema.Mapping{FileName: bb.String("libpython3.11.so.1.0"), FileID: id, Start: 0x1000, End: 0x9000})
	frames := []uint32{
		bb.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x1234, Mapping: m}),
		bb.Frame(schema.Frame{Kind: schema.FrameCPython, FunctionName: bb.String("<module>"), SourceFile: bb.String("busy.py"), SourceLine: 3}),
		bb.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x2000, Mapping: m, FunctionName: bb.String("_ZN3foo3barEv")}),
		bb.Frame(schema.Frame{Kind: schema.FrameGo, AddressOrLine: 0x3000, FunctionName: bb.String("main.main"), SourceFile: bb.String("main.go"), SourceLine: 7,
			Mapping: bb.Mapping(schema.Mapping{FileName: bb.String("gobusy"), Path: bb.String("/opt/gobusy"), Start: 0x1000, End: 0x9000})}),
	}
	proc := bb.Process(schema.Process{PID: 42, Comm: bb.String("python3")})
	bb.AddSample(schema.Sample{TimestampUnixNano: 2e9, Origin: schema.OriginCPUSampling, Value: 1, Process: proc, TID: 42, CPU: 0, Stack: bb.Stack(frames)})
	hello := &schema.Hello{NodeName: "n1", SamplingFrequencyHz: 19, StartTimeUnixNano: 1e9}
	if err := a.Add(hello, bb.Batch()); err != nil {
		t.Fatal(err)
	}
	p := pprofout.Profile(a.Flush(time.Unix(3, 0)))
	if len(p.Mapping) != 2 || p.Mapping[0].File != "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0" || p.Mapping[0].BuildID != id.Hex() || p.Mapping[1].File != "/opt/gobusy" {
		t.Fatalf("mappings %+v, want the notice's full path and the file id, then the stream's path", p.Mapping)
	}
	// pprof symbolizes from local files only mappings not marked
	// symbolized: the one with an unnamed frame.
	if m := p.Mapping[0]; m.HasFunctions {
		t.Errorf("libpython marked symbolized with an unnamed frame: %+v", m)
	}
	if m := p.Mapping[1]; !m.HasFunctions || !m.HasFilenames || !m.HasLineNumbers {
		t.Errorf("gobusy, every frame named with file and line, not marked symbolized: %+v", m)
	}
	got := map[string]string{}
	for _, fn := range p.Function {
		got[fn.Name] = fn.SystemName
	}
	if want := map[string]string{"<module>": "", "_ZN3foo3barEv": "_ZN3foo3barEv", "main.main": ""}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("functions (name: system name) %v, want %v", got, want)
	}
	if s := p.Sample[0]; fmt.Sprint(s.NumLabel["cpu"], s.Label["node"]) != "[0] [n1]" {
		t.Errorf("labels %v %v", s.NumLabel, s.Label)
	}
}

type oneWorkload struct {
	id string
	w  *aggregate.Workload
}

func (o oneWorkload) Lookup(id string) *aggregate.Workload {
	if id == o.id {
		return o.w
	}
	return nil
}

// TestProfileKubernetesLabels: a process in a known pod's container gets
// the pod's Kubernetes labels, through the one process label list.
func TestProfileKubernetesLabels(t *testing.T) {
	cid := strings.Repeat("ab", 32)
	cfg := aggregate.DefaultConfig()
	cfg.Workloads = oneWorkload{cid, &aggregate.Workload{Labels: []aggregate.Attr{
		{Key: "container", Value: "web"}, {Key: "namespace", Value: "shop"}, {Key: "pod", Value: "web-7d4b9"}}}}
	a, err := aggregate.NewAggregator(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	bb := schema.NewBatchBuilder()
	stack := bb.Stack([]uint32{bb.Frame(schema.Frame{Kind: schema.FrameCPython, FunctionName: bb.String("handle")})})
	for i, c := range []string{cid, ""} {
		proc := bb.Process(schema.Process{PID: uint32(10 + i), Comm: bb.String("python3"), ContainerID: bb.String(c)})
		bb.AddSample(schema.Sample{TimestampUnixNano: 2e9, Origin: schema.OriginCPUSampling, Value: 1, Process: proc, TID: 1, Stack: stack})
	}
	if err := a.Add(&schema.Hello{NodeName: "n1", SamplingFrequencyHz: 19, StartTimeUnixNano: 1e9}, bb.Batch()); err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for _, s := range pprofout.Profile(a.Flush(time.Unix(3, 0))).Sample {
		got[s.NumLabel["pid"][0]] = fmt.Sprint(s.Label["namespace"], s.Label["pod"], s.Label["container"], s.Label["container_id"])
	}
	if want := fmt.Sprint([]string{"shop"}, []string{"web-7d4b9"}, []string{"web"}, []string{cid}); got[10] != want {
		t.Errorf("the pod's process: labels %s, want %s", got[10], want)
	}
	if got[11] != "[] [] [] []" {
		t.Errorf("a process outside containers: labels %s", got[11])
	}
}

// umask reads this process's umask from /proc/self/status, without
// changing it.
func umask(t *testing.T) os.FileMode {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Umask:\s*([0-7]+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no Umask line in /proc/self/status")
	}
	v, err := strconv.ParseUint(string(m[1]), 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	return os.FileMode(v)
}
