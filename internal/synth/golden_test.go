package synth

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/golden"
)

// digester hashes a stream's content as length-prefixed fields.
type digester struct{ buf []byte }

func (d *digester) u(xs ...uint64) {
	for _, x := range xs {
		d.buf = binary.AppendUvarint(d.buf, x)
	}
}

func (d *digester) s(ss ...string) {
	for _, s := range ss {
		d.u(uint64(len(s)))
		d.buf = append(d.buf, s...)
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// contentDigest hashes what a stream says, message by message in stream
// order, with every string index resolved: a change of the protocol
// version, of the batch layout or of how a BatchBuilder numbers its tables
// leaves it unchanged, a change of any event does not.
func contentDigest(msgs []Message) string {
	h := sha256.New()
	var d digester
	samples := 0
	for _, m := range msgs {
		d.buf = d.buf[:0]
		switch m.Kind {
		case KindHello:
			// The protocol version is left out: it says how the stream
			// is written, not what it says.
			o := m.Hello
			d.s("hello", o.SamplerVersion, o.NodeName, o.KernelRelease, o.BootID, string(o.SessionID[:]))
			d.s(o.Tracers...)
			d.u(uint64(o.SamplingFrequencyHz), uint64(o.StartTimeUnixNano), uint64(o.OffCPUThreshold))
		case KindExecutable:
			o := m.Executable
			d.s("executable", o.FileName, o.Path, o.GNUBuildID, o.GoBuildID, o.DebuglinkFileName)
			d.u(o.FileID.Hi, o.FileID.Lo, uint64(o.PID), b2u(o.HasDescriptor), b2u(o.IsVDSO))
		case KindBatch:
			samples += len(m.Batch.Samples)
			d.batch(m.Batch)
		}
		h.Write(d.buf)
	}
	return fmt.Sprintf("%d samples %s", samples, hex.EncodeToString(h.Sum(nil)))
}

func (d *digester) batch(b *schema.Batch) {
	d.s("batch")
	d.u(b.Sequence)
	// Each stack is rendered once per batch; a sample appends its stack's.
	var stacks digester
	ends := make([]int, b.NumStacks()+1)
	for i := range b.NumStacks() {
		st := b.Stack(uint32(i))
		stacks.u(uint64(len(st)))
		for _, fi := range st {
			f := &b.Frames[fi]
			stacks.s(b.String(f.FunctionName), b.String(f.SourceFile))
			stacks.u(uint64(f.Kind), b2u(f.Error), f.AddressOrLine, uint64(f.SourceLine), uint64(f.SourceColumn), uint64(f.FunctionOffset), uint64(f.Mapping))
			if f.Mapping != 0 {
				m := &b.Mappings[f.Mapping-1]
				stacks.s(b.String(m.FileName), b.String(m.Path), b.String(m.GNUBuildID), b.String(m.GoBuildID))
				stacks.u(m.FileID.Hi, m.FileID.Lo, m.Start, m.End, m.FileOffset)
			}
		}
		ends[i+1] = len(stacks.buf)
	}
	kvs := func(l []schema.KeyValue) {
		d.u(uint64(len(l)))
		for _, kv := range l {
			d.s(b.String(kv.Key), b.String(kv.Value))
		}
	}
	for _, s := range b.Samples {
		p := &b.Processes[s.Process]
		d.u(uint64(s.TimestampUnixNano), uint64(s.Origin), uint64(s.Value), uint64(s.TID), uint64(s.CPU), uint64(p.PID))
		d.s(b.String(s.ThreadName), b.String(p.Comm), b.String(p.ExecutablePath), b.String(p.ContainerID), b.String(p.SystemdUnit), b.String(p.ServiceName))
		kvs(p.EnvVars)
		kvs(s.Labels)
		d.buf = append(d.buf, stacks.buf[ends[s.Stack]:ends[s.Stack+1]]...)
	}
}

// TestStreamsUnchanged pins the events of the default stream (what the
// stream and encoder benchmarks of docs/benchmarks/ replay) and of the small
// one (the encoder's correctness tests): figures measured on a stream stay
// reproducible only while it is the same.
func TestStreamsUnchanged(t *testing.T) {
	got := "default " + contentDigest(defaultStream(t)) + "\n" +
		"small " + contentDigest(collect(t, SmallConfig())) + "\n"
	golden.Check(t, filepath.Join("testdata", "streams.golden"), got,
		"(a change on purpose invalidates the figures measured on these streams; rewrite the file with "+
			"go test ./internal/synth -run TestStreamsUnchanged -args -update)")
}
