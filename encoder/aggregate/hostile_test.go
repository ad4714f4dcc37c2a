package aggregate

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tandem-profiler/tandem/schema"
)

func TestEscapeInvalidUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            "plain",
		"caf\xe9":          `caf\xe9`,
		"\xff\xfe":         `\xff\xfe`,
		"ok é \xc3 end":    `ok é \xc3 end`,
		"😀\xf0\x9f\x98":    `😀\xf0\x9f\x98`,
		"nul\x00 is valid": "nul\x00 is valid",
	} {
		if got := escapeInvalidUTF8(in); got != want || !utf8.ValidString(got) {
			t.Errorf("escapeInvalidUTF8(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHostileStringsEscaped: a workload's names, paths, environment and
// labels may be any bytes (and so may symbols in an ELF file and, in a
// dump, any string). Every string a Flush holds, which is every string the
// OTLP, Arrow and pprof writers and the labeler read, is valid UTF-8, with
// the bad bytes written as \xNN; identical strings still share one entry.
func TestHostileStringsEscaped(t *testing.T) {
	bad := func(s string) string { return s + "\xff\xc3" }
	b := schema.NewBatchBuilder()
	m := b.Mapping(schema.Mapping{FileName: b.String(bad("lib")), FileID: schema.FileID{Hi: 1, Lo: 2}, Start: 0x1000, End: 0x2000})
	st := b.Stack([]uint32{
		b.Frame(schema.Frame{Kind: schema.FrameCPython, AddressOrLine: 2, FunctionName: b.String(bad("fn")), SourceFile: b.String(bad("src.py")), SourceLine: 1}),
		b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x1234, Mapping: m}),
	})
	p := b.Process(schema.Process{
		PID: 7, Comm: b.String(bad("comm")), ExecutablePath: b.String(bad("/bin/x")),
		ContainerID: b.String(bad("c")), SystemdUnit: b.String(bad("u.service")), ServiceName: b.String(bad("svc")),
		EnvVars: []schema.KeyValue{{Key: b.String("TOKEN"), Value: b.String(bad("v"))}},
	})
	b.AddSample(schema.Sample{TimestampUnixNano: 1, Origin: schema.OriginCPUSampling, Value: 1, Process: p, TID: 7,
		ThreadName: b.String(bad("thread")), Stack: st,
		Labels: []schema.KeyValue{{Key: b.String(bad("k")), Value: b.String(bad("l"))}}})
	batch := *b.Batch()

	a := newTestAggregator(t)
	hello := schema.Hello{NodeName: bad("node")}
	for range 2 { // the second time every string is found, not added
		if err := a.Add(&hello, &batch); err != nil {
			t.Fatal(err)
		}
	}
	f := a.Flush(time.Unix(0, 10))
	seen := map[string]bool{}
	for i, s := range f.Strings {
		if !utf8.ValidString(s) {
			t.Errorf("string %d %q is not valid UTF-8", i, s)
		}
		if seen[s] {
			t.Errorf("string %q stored twice", s)
		}
		seen[s] = true
	}
	for _, want := range []string{`comm\xff\xc3`, `/bin/x\xff\xc3`, `v\xff\xc3`, `thread\xff\xc3`, `fn\xff\xc3`, `l\xff\xc3`, `node\xff\xc3`} {
		if !seen[want] {
			t.Errorf("no escaped string %q among %q", want, strings.Join(f.Strings, " | "))
		}
	}
	if len(f.Samples) != 1 || len(f.Samples[0].Values) != 2 {
		t.Errorf("the two identical samples did not merge: %d samples", len(f.Samples))
	}
}
