package schema

import (
	"testing"

	capnp "capnproto.org/go/capnp/v3"

	"github.com/tandem-profiler/tandem/schema/internal/wire"
)

// encodeBatchLists encodes b in the list layout of protocols 1.0 and 1.1,
// as samplers before 1.2 did (this is their EncodeBatch), so that tests
// can check that old streams and dumps still decode.
func encodeBatchLists(t testing.TB, b *Batch) []byte {
	t.Helper()
	msg, seg, err := newMessage()
	if err != nil {
		t.Fatal(err)
	}
	if err := encodeBatchListLayout(seg, b); err != nil {
		t.Fatal(err)
	}
	data, err := finish(msg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func encodeBatchListLayout(seg *capnp.Segment, b *Batch) error {
	w, err := wire.NewRootBatch(seg)
	if err != nil {
		return err
	}
	w.SetSequence(b.Sequence)

	strs, err := w.NewStrings(int32(len(b.Strings)))
	if err != nil {
		return err
	}
	for i, s := range b.Strings {
		if err := strs.Set(i, s); err != nil {
			return err
		}
	}

	if err := encodeMappings(w, b.Mappings); err != nil {
		return err
	}

	fl, err := w.NewFrames(int32(len(b.Frames)))
	if err != nil {
		return err
	}
	for i := range b.Frames {
		f, fw := &b.Frames[i], fl.At(i)
		fw.SetKind(wire.FrameKind(f.Kind))
		fw.SetError(f.Error)
		fw.SetAddressOrLine(f.AddressOrLine)
		fw.SetMapping(f.Mapping)
		fw.SetFunctionName(f.FunctionName)
		fw.SetSourceFile(f.SourceFile)
		fw.SetSourceLine(f.SourceLine)
		fw.SetSourceColumn(f.SourceColumn)
		fw.SetFunctionOffset(f.FunctionOffset)
	}

	sf, err := w.NewStackFrames(int32(len(b.StackFrames)))
	if err != nil {
		return err
	}
	for i, v := range b.StackFrames {
		sf.Set(i, v)
	}
	se, err := w.NewStackEnds(int32(len(b.StackEnds)))
	if err != nil {
		return err
	}
	for i, v := range b.StackEnds {
		se.Set(i, v)
	}

	pl, err := w.NewProcesses(int32(len(b.Processes)))
	if err != nil {
		return err
	}
	for i := range b.Processes {
		p, pw := &b.Processes[i], pl.At(i)
		pw.SetPid(p.PID)
		pw.SetComm(p.Comm)
		pw.SetExecutablePath(p.ExecutablePath)
		pw.SetContainerId(p.ContainerID)
		pw.SetSystemdUnit(p.SystemdUnit)
		pw.SetServiceName(p.ServiceName)
		if len(p.EnvVars) > 0 {
			kl, err := pw.NewEnvVars(int32(len(p.EnvVars)))
			if err != nil {
				return err
			}
			for j, kv := range p.EnvVars {
				kl.At(j).SetKey(kv.Key)
				kl.At(j).SetValue(kv.Value)
			}
		}
	}

	sl, err := w.NewSamples(int32(len(b.Samples)))
	if err != nil {
		return err
	}
	for i := range b.Samples {
		s, sw := &b.Samples[i], sl.At(i)
		sw.SetTimestampUnixNano(s.TimestampUnixNano)
		sw.SetOrigin(wire.Origin(s.Origin))
		sw.SetValue(s.Value)
		sw.SetProcess(s.Process)
		sw.SetTid(s.TID)
		sw.SetCpu(s.CPU)
		sw.SetThreadName(s.ThreadName)
		sw.SetStack(s.Stack)
		if len(s.Labels) > 0 {
			kl, err := sw.NewLabels(int32(len(s.Labels)))
			if err != nil {
				return err
			}
			for j, kv := range s.Labels {
				kl.At(j).SetKey(kv.Key)
				kl.At(j).SetValue(kv.Value)
			}
		}
	}
	return nil
}
