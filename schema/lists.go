package schema

import (
	"errors"
	"fmt"

	"github.com/tandem-profiler/tandem/schema/internal/wire"
)

// Decoders of the list layout (layoutLists, protocols 1.0 and 1.1): the
// string table, frames and stacks as Cap'n Proto lists, read element by
// element. Current samplers send the packed layout (packed.go); these read
// older streams and dumps.

func decodeStringsList(w wire.Batch, pl int, into *Batch) error {
	strs, err := w.Strings()
	if err != nil {
		return malformed("batch strings", err)
	}
	n, err := listLen("batch strings", strs.Len(), pl, 8)
	if err != nil {
		return err
	}
	into.Strings = grow(into.Strings, n)
	for i := range n {
		bs, err := strs.BytesAt(i)
		if err != nil {
			return malformed("batch string", err)
		}
		if len(bs) > maxTextBytes {
			return malformed("batch string", fmt.Errorf("string %d has %d bytes, limit %d", i, len(bs), maxTextBytes))
		}
		into.Strings[i] = string(bs)
	}
	if n == 0 || into.Strings[0] != "" {
		return malformed("batch strings", errors.New("string 0 must be the empty string"))
	}
	return nil
}

func decodeFramesList(w wire.Batch, pl int, nstr, nmap uint32, into *Batch) error {
	fl, err := w.Frames()
	if err != nil {
		return malformed("batch frames", err)
	}
	n, err := listLen("batch frames", fl.Len(), pl, 8)
	if err != nil {
		return err
	}
	into.Frames = grow(into.Frames, n)
	for i := range n {
		fw := fl.At(i)
		f := Frame{
			Kind:           FrameKind(fw.Kind()),
			Error:          fw.Error(),
			AddressOrLine:  fw.AddressOrLine(),
			Mapping:        fw.Mapping(),
			FunctionName:   fw.FunctionName(),
			SourceFile:     fw.SourceFile(),
			SourceLine:     fw.SourceLine(),
			SourceColumn:   fw.SourceColumn(),
			FunctionOffset: fw.FunctionOffset(),
		}
		if err := checkFrame("batch", i, &f, nstr, nmap); err != nil {
			return err
		}
		into.Frames[i] = f
	}
	return nil
}

func decodeStacksList(w wire.Batch, pl int, into *Batch) error {
	sf, err := w.StackFrames()
	if err != nil {
		return malformed("batch stack frames", err)
	}
	n, err := listLen("batch stack frames", sf.Len(), pl, 4)
	if err != nil {
		return err
	}
	nframes := uint32(len(into.Frames))
	into.StackFrames = grow(into.StackFrames, n)
	for i := range n {
		v := sf.At(i)
		if v >= nframes {
			return malformed("batch stack frames", fmt.Errorf("entry %d references frame %d of %d", i, v, nframes))
		}
		into.StackFrames[i] = v
	}
	se, err := w.StackEnds()
	if err != nil {
		return malformed("batch stack ends", err)
	}
	if n, err = listLen("batch stack ends", se.Len(), pl, 4); err != nil {
		return err
	}
	into.StackEnds = grow(into.StackEnds, n)
	prev := uint32(0)
	for i := range n {
		v := se.At(i)
		if v < prev || int(v) > len(into.StackFrames) {
			return malformed("batch stack ends", fmt.Errorf("stack %d ends at %d (previous %d, %d frame entries)", i, v, prev, len(into.StackFrames)))
		}
		into.StackEnds[i] = v
		prev = v
	}
	return nil
}

// checkFrame validates the references of frame i, whatever its layout.
func checkFrame(what string, i int, f *Frame, nstr, nmap uint32) error {
	if f.Mapping > nmap {
		return malformed(what+" frame", fmt.Errorf("frame %d references mapping %d of %d", i, f.Mapping, nmap))
	}
	if f.FunctionName >= nstr || f.SourceFile >= nstr {
		return malformed(what+" frame", fmt.Errorf("frame %d references a string beyond the %d-entry table", i, nstr))
	}
	return nil
}

func decodeProcessesList(w wire.Batch, pl int, nstr uint32, into *Batch) error {
	pls, err := w.Processes()
	if err != nil {
		return malformed("batch processes", err)
	}
	n, err := listLen("batch processes", pls.Len(), pl, 8)
	if err != nil {
		return err
	}
	into.Processes = grow(into.Processes, n)
	for i := range n {
		pw := pls.At(i)
		p := Process{
			PID:            pw.Pid(),
			Comm:           pw.Comm(),
			ExecutablePath: pw.ExecutablePath(),
			ContainerID:    pw.ContainerId(),
			SystemdUnit:    pw.SystemdUnit(),
			ServiceName:    pw.ServiceName(),
		}
		if err := checkProcess(i, &p, nstr); err != nil {
			return err
		}
		if pw.HasEnvVars() {
			kl, err := pw.EnvVars()
			if err != nil {
				return malformed("batch process env", err)
			}
			if p.EnvVars, err = decodeKeyValues("batch process env", kl, pl, nstr, into.Processes[i].EnvVars[:0]); err != nil {
				return err
			}
		}
		into.Processes[i] = p
	}
	return nil
}

func decodeSamplesList(w wire.Batch, pl int, nstr, nstacks uint32, into *Batch) error {
	sl, err := w.Samples()
	if err != nil {
		return malformed("batch samples", err)
	}
	n, err := listLen("batch samples", sl.Len(), pl, 8)
	if err != nil {
		return err
	}
	nproc := uint32(len(into.Processes))
	into.Samples = grow(into.Samples, n)
	for i := range n {
		sw := sl.At(i)
		s := Sample{
			TimestampUnixNano: sw.TimestampUnixNano(),
			Origin:            Origin(sw.Origin()),
			Value:             sw.Value(),
			Process:           sw.Process(),
			TID:               sw.Tid(),
			CPU:               sw.Cpu(),
			ThreadName:        sw.ThreadName(),
			Stack:             sw.Stack(),
		}
		if err := checkSample(i, &s, nstr, nproc, nstacks); err != nil {
			return err
		}
		if sw.HasLabels() {
			kl, err := sw.Labels()
			if err != nil {
				return malformed("batch sample labels", err)
			}
			if s.Labels, err = decodeKeyValues("batch sample labels", kl, pl, nstr, into.Samples[i].Labels[:0]); err != nil {
				return err
			}
		}
		into.Samples[i] = s
	}
	return nil
}

// checkProcess validates the string references of process i.
func checkProcess(i int, p *Process, nstr uint32) error {
	if p.Comm >= nstr || p.ExecutablePath >= nstr || p.ContainerID >= nstr || p.SystemdUnit >= nstr || p.ServiceName >= nstr {
		return malformed("batch process", fmt.Errorf("process %d references a string beyond the %d-entry table", i, nstr))
	}
	return nil
}

// checkSample validates the references of sample i.
func checkSample(i int, s *Sample, nstr, nproc, nstacks uint32) error {
	if s.Process >= nproc || s.Stack >= nstacks || s.ThreadName >= nstr {
		return malformed("batch sample", fmt.Errorf("sample %d references process %d of %d, stack %d of %d, string %d of %d",
			i, s.Process, nproc, s.Stack, nstacks, s.ThreadName, nstr))
	}
	return nil
}
