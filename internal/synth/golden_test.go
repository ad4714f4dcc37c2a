package synth

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"path/filepath"
	"testing"

	"github.com/tandem-profiler/tandem/internal/golden"
	"github.com/tandem-profiler/tandem/schema"
)

// contentDigest hashes what a stream says, message by message in stream
// order, with every string index resolved: a change of the protocol
// version, of the batch layout or of how a BatchBuilder numbers its tables
// leaves it unchanged, a change of any event does not.
func contentDigest(t testing.TB, cfg Config) string {
	t.Helper()
	h := sha256.New()
	samples := 0
	if err := Generate(cfg, func(m Message) error {
		switch m.Kind {
		case KindHello:
			// The protocol version is left out: it says how the stream
			// is written, not what it says.
			o := m.Hello
			fmt.Fprintf(h, "hello %q %q %q %q %d %q %x %d %d\n", o.SamplerVersion, o.NodeName, o.KernelRelease, o.BootID,
				o.SamplingFrequencyHz, o.Tracers, o.SessionID, o.StartTimeUnixNano, o.OffCPUThreshold)
		case KindExecutable:
			o := m.Executable
			fmt.Fprintf(h, "executable %x/%x %q %q %q %q %q %d %t %t\n", o.FileID.Hi, o.FileID.Lo, o.FileName, o.Path,
				o.GNUBuildID, o.GoBuildID, o.DebuglinkFileName, o.PID, o.HasDescriptor, o.IsVDSO)
		case KindBatch:
			samples += len(m.Batch.Samples)
			digestBatch(h, m.Batch)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d samples %s", samples, hex.EncodeToString(h.Sum(nil)))
}

func digestBatch(h hash.Hash, b *schema.Batch) {
	fmt.Fprintf(h, "batch %d\n", b.Sequence)
	// Each stack is rendered once per batch: a sample writes its stack's text.
	stacks := make([][]byte, b.NumStacks())
	for i := range stacks {
		var st []byte
		for _, fi := range b.Stack(uint32(i)) {
			f := &b.Frames[fi]
			st = fmt.Appendf(st, " frame %d %t %#x %q %q %d:%d +%d", f.Kind, f.Error, f.AddressOrLine,
				b.String(f.FunctionName), b.String(f.SourceFile), f.SourceLine, f.SourceColumn, f.FunctionOffset)
			if f.Mapping != 0 {
				m := &b.Mappings[f.Mapping-1]
				st = fmt.Appendf(st, " in %q %q gnu=%q go=%q %x/%x %#x-%#x@%#x", b.String(m.FileName), b.String(m.Path),
					b.String(m.GNUBuildID), b.String(m.GoBuildID), m.FileID.Hi, m.FileID.Lo, m.Start, m.End, m.FileOffset)
			}
			st = append(st, '\n')
		}
		stacks[i] = st
	}
	kvs := func(l []schema.KeyValue) {
		for _, kv := range l {
			fmt.Fprintf(h, " %q=%q", b.String(kv.Key), b.String(kv.Value))
		}
	}
	for _, s := range b.Samples {
		p := &b.Processes[s.Process]
		fmt.Fprintf(h, "sample ts=%d origin=%d value=%d tid=%d cpu=%d thread=%q pid=%d comm=%q exe=%q container=%q unit=%q service=%q env",
			s.TimestampUnixNano, s.Origin, s.Value, s.TID, s.CPU, b.String(s.ThreadName),
			p.PID, b.String(p.Comm), b.String(p.ExecutablePath), b.String(p.ContainerID), b.String(p.SystemdUnit), b.String(p.ServiceName))
		kvs(p.EnvVars)
		fmt.Fprint(h, " labels")
		kvs(s.Labels)
		h.Write([]byte{'\n'})
		h.Write(stacks[s.Stack])
	}
}

// TestStreamsUnchanged pins the events of the default stream (what the
// stream and encoder benchmarks in BENCHMARKS.md replay) and of the small
// one (the encoder's correctness tests): figures measured on a stream stay
// reproducible only while it is the same.
func TestStreamsUnchanged(t *testing.T) {
	got := "default " + contentDigest(t, DefaultConfig()) + "\n" +
		"small " + contentDigest(t, SmallConfig()) + "\n"
	golden.Check(t, filepath.Join("testdata", "streams.golden"), got,
		"(a change on purpose invalidates the figures measured on these streams; rewrite the file with "+
			"go test ./internal/synth -run TestStreamsUnchanged -args -update)")
}
