package schema

import (
	"errors"
	"fmt"

	capnp "capnproto.org/go/capnp/v3"

	"github.com/tandem-profiler/tandem/schema/internal/wire"
)

// ErrMalformed is wrapped by every decode error caused by the input bytes.
var ErrMalformed = errors.New("malformed message")

// Decode limits. A frame is at most 16 MiB, so these only bite on hostile
// input; they keep a small message from claiming a huge allocation.
const (
	maxListLen     = 1 << 21
	maxTextBytes   = 1 << 16
	traverseFactor = 4
	minTraverse    = 1 << 16
)

func malformed(what string, err error) error {
	if err == nil {
		return fmt.Errorf("decode %s: %w", what, ErrMalformed)
	}
	return fmt.Errorf("decode %s: %w: %w", what, ErrMalformed, err)
}

// newMessage starts a message for encoding.
func newMessage() (*capnp.Message, *capnp.Segment, error) {
	return capnp.NewMessage(capnp.SingleSegment(nil))
}

// finish marshals msg, appends it to dst and releases the message.
func finish(msg *capnp.Message, dst []byte) ([]byte, error) {
	data, err := msg.Marshal()
	msg.Release()
	if err != nil {
		return dst, fmt.Errorf("marshal message: %w", err)
	}
	if len(dst) == 0 {
		return data, nil
	}
	return append(dst, data...), nil
}

// openMessage parses payload with limits proportional to its size.
func openMessage(payload []byte) (*capnp.Message, error) {
	msg, err := capnp.Unmarshal(payload)
	if err != nil {
		return nil, err
	}
	limit := uint64(len(payload)) * traverseFactor
	if limit < minTraverse {
		limit = minTraverse
	}
	msg.TraverseLimit = limit
	msg.DepthLimit = 8
	return msg, nil
}

// listLen bounds a list length by the absolute cap and by what the payload
// could legitimately hold at minBytes per element.
func listLen(what string, n, payloadLen, minBytes int) (int, error) {
	if n > maxListLen || n*minBytes > payloadLen {
		return 0, malformed(what, fmt.Errorf("list of %d elements in a %d-byte message", n, payloadLen))
	}
	return n, nil
}

func text(what string, get func() (string, error)) (string, error) {
	s, err := get()
	if err != nil {
		return "", malformed(what, err)
	}
	if len(s) > maxTextBytes {
		return "", malformed(what, fmt.Errorf("text of %d bytes exceeds %d", len(s), maxTextBytes))
	}
	return s, nil
}

// EncodeHello appends the encoded hello to dst.
func EncodeHello(h *Hello, dst []byte) ([]byte, error) {
	msg, seg, err := newMessage()
	if err != nil {
		return dst, fmt.Errorf("encode hello: %w", err)
	}
	w, err := wire.NewRootHello(seg)
	if err != nil {
		return dst, fmt.Errorf("encode hello: %w", err)
	}
	w.SetMajorVersion(h.MajorVersion)
	w.SetMinorVersion(h.MinorVersion)
	w.SetSamplingFrequencyHz(h.SamplingFrequencyHz)
	w.SetStartTimeUnixNano(h.StartTimeUnixNano)
	w.SetOffCpuThreshold(h.OffCPUThreshold)
	err = errors.Join(
		w.SetSamplerVersion(h.SamplerVersion),
		w.SetNodeName(h.NodeName),
		w.SetKernelRelease(h.KernelRelease),
		w.SetBootId(h.BootID),
		w.SetSessionId(h.SessionID[:]),
	)
	if err != nil {
		return dst, fmt.Errorf("encode hello: %w", err)
	}
	tl, err := w.NewTracers(int32(len(h.Tracers)))
	if err != nil {
		return dst, fmt.Errorf("encode hello: %w", err)
	}
	for i, t := range h.Tracers {
		if err := tl.Set(i, t); err != nil {
			return dst, fmt.Errorf("encode hello: %w", err)
		}
	}
	return finish(msg, dst)
}

// DecodeHello decodes a hello payload.
func DecodeHello(payload []byte) (Hello, error) {
	var h Hello
	msg, err := openMessage(payload)
	if err != nil {
		return h, malformed("hello", err)
	}
	w, err := wire.ReadRootHello(msg)
	if err != nil {
		return h, malformed("hello", err)
	}
	h.MajorVersion = w.MajorVersion()
	h.MinorVersion = w.MinorVersion()
	h.SamplingFrequencyHz = w.SamplingFrequencyHz()
	h.StartTimeUnixNano = w.StartTimeUnixNano()
	h.OffCPUThreshold = w.OffCpuThreshold()
	if h.SamplerVersion, err = text("hello sampler version", w.SamplerVersion); err != nil {
		return h, err
	}
	if h.NodeName, err = text("hello node name", w.NodeName); err != nil {
		return h, err
	}
	if h.KernelRelease, err = text("hello kernel release", w.KernelRelease); err != nil {
		return h, err
	}
	if h.BootID, err = text("hello boot id", w.BootId); err != nil {
		return h, err
	}
	sid, err := w.SessionId()
	if err != nil {
		return h, malformed("hello session id", err)
	}
	if len(sid) != 0 && len(sid) != len(h.SessionID) {
		return h, malformed("hello session id", fmt.Errorf("%d bytes, want %d", len(sid), len(h.SessionID)))
	}
	copy(h.SessionID[:], sid)
	tl, err := w.Tracers()
	if err != nil {
		return h, malformed("hello tracers", err)
	}
	n, err := listLen("hello tracers", tl.Len(), len(payload), 8)
	if err != nil {
		return h, err
	}
	h.Tracers = make([]string, n)
	for i := range n {
		if h.Tracers[i], err = text("hello tracer", func() (string, error) { return tl.At(i) }); err != nil {
			return h, err
		}
	}
	return h, nil
}

// EncodeBatch appends the encoded batch to dst, in the packed layout of
// protocol 1.2 (which 1.0 and 1.1 readers reject).
func EncodeBatch(b *Batch, dst []byte) ([]byte, error) {
	msg, seg, err := newMessage()
	if err != nil {
		return dst, fmt.Errorf("encode batch: %w", err)
	}
	if err := encodeBatch(seg, b); err != nil {
		msg.Release()
		return dst, fmt.Errorf("encode batch %d: %w", b.Sequence, err)
	}
	return finish(msg, dst)
}

func encodeBatch(seg *capnp.Segment, b *Batch) error {
	w, err := wire.NewRootBatch(seg)
	if err != nil {
		return err
	}
	w.SetSequence(b.Sequence)
	if err := encodeMappings(w, b.Mappings); err != nil {
		return err
	}
	return encodePacked(w, b)
}

// encodeMappings writes the mapping list, the same in every layout.
func encodeMappings(w wire.Batch, mappings []Mapping) error {
	ml, err := w.NewMappings(int32(len(mappings)))
	if err != nil {
		return err
	}
	fillMappings(ml, mappings)
	return nil
}

// fillMappings writes mappings into ml (a Batch's or a DictionaryChunk's).
func fillMappings(ml wire.Mapping_List, mappings []Mapping) {
	for i := range mappings {
		m, mw := &mappings[i], ml.At(i)
		mw.SetFileName(m.FileName)
		mw.SetPath(m.Path)
		mw.SetGnuBuildId(m.GNUBuildID)
		mw.SetGoBuildId(m.GoBuildID)
		mw.SetFileIdHi(m.FileID.Hi)
		mw.SetFileIdLo(m.FileID.Lo)
		mw.SetStart(m.Start)
		mw.SetEnd(m.End)
		mw.SetFileOffset(m.FileOffset)
	}
}

// DecodeBatch decodes a batch payload into `into`, reusing its slices. On
// success every index in the batch is in range (see the package doc). It
// reads the batch layouts that carry their own tables: packed (protocol
// 1.2 and 1.3, what EncodeBatch writes) and lists (1.0 and 1.1). A layout-2
// batch (1.4) refers to its connection's dictionary: DecodeBatch rejects it,
// DecodeBatchWith reads it.
func DecodeBatch(payload []byte, into *Batch) error {
	return decodeBatch(payload, nil, into)
}

// DecodeBatchWith decodes a batch payload like DecodeBatch, and also reads
// layout 2 (protocol 1.4) against dict, the dictionary the connection's (or
// dump's) FrameDictionary chunks built: the batch must name dict's
// generation, and every reference in it must be below dict's table lengths.
// The decoded batch's Strings, Mappings, Frames, StackFrames and StackEnds
// are then dict's tables as they are now (slice headers, not copies:
// shared, read-only, and valid for ever, since a dictionary only appends),
// and into.Dictionary is dict. Layouts 0 and 1 decode as with DecodeBatch
// (dict is not used; into.Dictionary is nil).
func DecodeBatchWith(payload []byte, dict *Dictionary, into *Batch) error {
	return decodeBatch(payload, dict, into)
}

func decodeBatch(payload []byte, dict *Dictionary, into *Batch) error {
	into.Reset()
	msg, err := openMessage(payload)
	if err != nil {
		return malformed("batch", err)
	}
	w, err := wire.ReadRootBatch(msg)
	if err != nil {
		return malformed("batch", err)
	}
	into.Sequence = w.Sequence()
	pl := len(payload)

	layout := w.Layout()
	if layout == layoutDictionary {
		return decodeDictionaryBatch(w, dict, into)
	}
	if layout != layoutLists && layout != layoutPacked {
		return malformed("batch", fmt.Errorf("layout %d is not one this build reads (%d, %d or %d)", layout, layoutLists, layoutPacked, layoutDictionary))
	}
	packed := layout == layoutPacked

	if packed {
		err = decodeStringsPacked(w, into)
	} else {
		err = decodeStringsList(w, pl, into)
	}
	if err != nil {
		return err
	}
	nstr := uint32(len(into.Strings))
	if err := decodeMappings(w, pl, nstr, into); err != nil {
		return err
	}
	nmap := uint32(len(into.Mappings))
	if packed {
		err = decodeFramesPacked(w, nstr, nmap, into)
	} else {
		err = decodeFramesList(w, pl, nstr, nmap, into)
	}
	if err != nil {
		return err
	}
	if packed {
		err = decodeStacksPacked(w, into)
	} else {
		err = decodeStacksList(w, pl, into)
	}
	if err != nil {
		return err
	}
	nstacks := uint32(len(into.StackEnds))

	if packed {
		err = decodeProcessesPacked(w, nstr, into)
	} else {
		err = decodeProcessesList(w, pl, nstr, into)
	}
	if err != nil {
		return err
	}
	if packed {
		return decodeSamplesPacked(w, nstr, nstacks, into)
	}
	return decodeSamplesList(w, pl, nstr, nstacks, into)
}

func decodeMappings(w wire.Batch, pl int, nstr uint32, into *Batch) error {
	ml, err := w.Mappings()
	if err != nil {
		return malformed("batch mappings", err)
	}
	into.Mappings, err = decodeMappingList("batch", 0, ml, pl, nstr, into.Mappings)
	return err
}

// decodeMappingList decodes ml into dst (reused when large enough),
// checking that every string reference is below nstr. firstID is the
// 0-based index of the first mapping, for errors.
func decodeMappingList(what string, firstID int, ml wire.Mapping_List, pl int, nstr uint32, dst []Mapping) ([]Mapping, error) {
	n, err := listLen(what+" mappings", ml.Len(), pl, 8)
	if err != nil {
		return dst, err
	}
	dst = grow(dst, n)
	for i := range n {
		mw := ml.At(i)
		m := Mapping{
			FileName:   mw.FileName(),
			Path:       mw.Path(),
			GNUBuildID: mw.GnuBuildId(),
			GoBuildID:  mw.GoBuildId(),
			FileID:     FileID{Hi: mw.FileIdHi(), Lo: mw.FileIdLo()},
			Start:      mw.Start(),
			End:        mw.End(),
			FileOffset: mw.FileOffset(),
		}
		if err := checkMapping(what, firstID+i, &m, nstr); err != nil {
			return dst, err
		}
		dst[i] = m
	}
	return dst, nil
}

// checkMapping validates the string references of mapping i (0-based).
func checkMapping(what string, i int, m *Mapping, nstr uint32) error {
	if m.FileName >= nstr || m.Path >= nstr || m.GNUBuildID >= nstr || m.GoBuildID >= nstr {
		return malformed(what+" mapping", fmt.Errorf("mapping %d references a string beyond the %d-entry table", i, nstr))
	}
	return nil
}

func decodeKeyValues(what string, kl wire.KeyValue_List, payloadLen int, nstr uint32, dst []KeyValue) ([]KeyValue, error) {
	n, err := listLen(what, kl.Len(), payloadLen, 8)
	if err != nil {
		return nil, err
	}
	for j := range n {
		kv := KeyValue{Key: kl.At(j).Key(), Value: kl.At(j).Value()}
		if kv.Key >= nstr || kv.Value >= nstr {
			return nil, malformed(what, fmt.Errorf("pair %d references a string beyond the %d-entry table", j, nstr))
		}
		dst = append(dst, kv)
	}
	return dst, nil
}

// grow returns s resized to n, reusing its backing array when it can.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// EncodeExecutableNotice appends the encoded notice to dst.
func EncodeExecutableNotice(n *ExecutableNotice, dst []byte) ([]byte, error) {
	msg, seg, err := newMessage()
	if err != nil {
		return dst, fmt.Errorf("encode executable notice: %w", err)
	}
	w, err := wire.NewRootExecutableNotice(seg)
	if err != nil {
		return dst, fmt.Errorf("encode executable notice: %w", err)
	}
	w.SetFileIdHi(n.FileID.Hi)
	w.SetFileIdLo(n.FileID.Lo)
	w.SetPid(n.PID)
	w.SetHasDescriptor(n.HasDescriptor)
	w.SetIsVdso(n.IsVDSO)
	if err := errors.Join(
		w.SetFileName(n.FileName),
		w.SetPath(n.Path),
		w.SetGnuBuildId(n.GNUBuildID),
		w.SetGoBuildId(n.GoBuildID),
		w.SetDebuglinkFileName(n.DebuglinkFileName),
	); err != nil {
		return dst, fmt.Errorf("encode executable notice: %w", err)
	}
	return finish(msg, dst)
}

// DecodeExecutableNotice decodes an executable notice payload.
func DecodeExecutableNotice(payload []byte) (ExecutableNotice, error) {
	var n ExecutableNotice
	msg, err := openMessage(payload)
	if err != nil {
		return n, malformed("executable notice", err)
	}
	w, err := wire.ReadRootExecutableNotice(msg)
	if err != nil {
		return n, malformed("executable notice", err)
	}
	n.FileID = FileID{Hi: w.FileIdHi(), Lo: w.FileIdLo()}
	n.PID = w.Pid()
	n.HasDescriptor = w.HasDescriptor()
	n.IsVDSO = w.IsVdso()
	for _, f := range []struct {
		dst *string
		get func() (string, error)
	}{
		{&n.FileName, w.FileName}, {&n.Path, w.Path}, {&n.GNUBuildID, w.GnuBuildId},
		{&n.GoBuildID, w.GoBuildId}, {&n.DebuglinkFileName, w.DebuglinkFileName},
	} {
		if *f.dst, err = text("executable notice", f.get); err != nil {
			return n, err
		}
	}
	return n, nil
}

// EncodeLossReport appends the encoded loss report to dst.
func EncodeLossReport(r *LossReport, dst []byte) ([]byte, error) {
	msg, seg, err := newMessage()
	if err != nil {
		return dst, fmt.Errorf("encode loss report: %w", err)
	}
	w, err := wire.NewRootLossReport(seg)
	if err != nil {
		return dst, fmt.Errorf("encode loss report: %w", err)
	}
	w.SetSequence(r.Sequence)
	ll, err := w.NewLosses(int32(len(r.Losses)))
	if err != nil {
		return dst, fmt.Errorf("encode loss report: %w", err)
	}
	for i, l := range r.Losses {
		lw := ll.At(i)
		lw.SetStage(wire.LossStage(l.Stage))
		lw.SetSamples(l.Samples)
		lw.SetBytes(l.Bytes)
		lw.SetDescriptors(l.Descriptors)
		if err := lw.SetReason(l.Reason); err != nil {
			return dst, fmt.Errorf("encode loss report: %w", err)
		}
	}
	return finish(msg, dst)
}

// DecodeLossReport decodes a loss report payload.
func DecodeLossReport(payload []byte) (LossReport, error) {
	var r LossReport
	msg, err := openMessage(payload)
	if err != nil {
		return r, malformed("loss report", err)
	}
	w, err := wire.ReadRootLossReport(msg)
	if err != nil {
		return r, malformed("loss report", err)
	}
	r.Sequence = w.Sequence()
	ll, err := w.Losses()
	if err != nil {
		return r, malformed("loss report losses", err)
	}
	n, err := listLen("loss report losses", ll.Len(), len(payload), 8)
	if err != nil {
		return r, err
	}
	r.Losses = make([]Loss, n)
	for i := range n {
		lw := ll.At(i)
		r.Losses[i] = Loss{Stage: LossStage(lw.Stage()), Samples: lw.Samples(), Bytes: lw.Bytes(), Descriptors: lw.Descriptors()}
		if r.Losses[i].Reason, err = text("loss reason", lw.Reason); err != nil {
			return r, err
		}
	}
	return r, nil
}

// EncodeGoodbye appends the encoded goodbye to dst.
func EncodeGoodbye(g *Goodbye, dst []byte) ([]byte, error) {
	msg, seg, err := newMessage()
	if err != nil {
		return dst, fmt.Errorf("encode goodbye: %w", err)
	}
	w, err := wire.NewRootGoodbye(seg)
	if err != nil {
		return dst, fmt.Errorf("encode goodbye: %w", err)
	}
	w.SetLastSequence(g.LastSequence)
	if err := w.SetReason(g.Reason); err != nil {
		return dst, fmt.Errorf("encode goodbye: %w", err)
	}
	return finish(msg, dst)
}

// DecodeGoodbye decodes a goodbye payload.
func DecodeGoodbye(payload []byte) (Goodbye, error) {
	var g Goodbye
	msg, err := openMessage(payload)
	if err != nil {
		return g, malformed("goodbye", err)
	}
	w, err := wire.ReadRootGoodbye(msg)
	if err != nil {
		return g, malformed("goodbye", err)
	}
	g.LastSequence = w.LastSequence()
	g.Reason, err = text("goodbye reason", w.Reason)
	return g, err
}

// EncodeSamplerStats appends the encoded sampler stats to dst.
func EncodeSamplerStats(st *SamplerStats, dst []byte) ([]byte, error) {
	msg, seg, err := newMessage()
	if err != nil {
		return dst, fmt.Errorf("encode sampler stats: %w", err)
	}
	w, err := wire.NewRootSamplerStats(seg)
	if err != nil {
		return dst, fmt.Errorf("encode sampler stats: %w", err)
	}
	w.SetTimeUnixNano(st.TimeUnixNano)
	ml, err := w.NewMetrics(int32(len(st.Metrics)))
	if err != nil {
		return dst, fmt.Errorf("encode sampler stats: %w", err)
	}
	for i := range st.Metrics {
		m := &st.Metrics[i]
		mw := ml.At(i)
		mw.SetValue(m.Value)
		mw.SetCounter(m.Counter)
		if err := mw.SetName(m.Name); err != nil {
			return dst, fmt.Errorf("encode sampler stats: %w", err)
		}
		ll, err := mw.NewLabels(int32(len(m.Labels)))
		if err != nil {
			return dst, fmt.Errorf("encode sampler stats: %w", err)
		}
		for j, l := range m.Labels {
			lw := ll.At(j)
			if err := lw.SetName(l.Name); err != nil {
				return dst, fmt.Errorf("encode sampler stats: %w", err)
			}
			if err := lw.SetValue(l.Value); err != nil {
				return dst, fmt.Errorf("encode sampler stats: %w", err)
			}
		}
	}
	return finish(msg, dst)
}

// DecodeSamplerStats decodes a sampler stats payload.
func DecodeSamplerStats(payload []byte) (SamplerStats, error) {
	var st SamplerStats
	msg, err := openMessage(payload)
	if err != nil {
		return st, malformed("sampler stats", err)
	}
	w, err := wire.ReadRootSamplerStats(msg)
	if err != nil {
		return st, malformed("sampler stats", err)
	}
	st.TimeUnixNano = w.TimeUnixNano()
	ml, err := w.Metrics()
	if err != nil {
		return st, malformed("sampler stats metrics", err)
	}
	n, err := listLen("sampler stats metrics", ml.Len(), len(payload), 8)
	if err != nil {
		return st, err
	}
	st.Metrics = make([]SamplerMetric, n)
	for i := range n {
		mw := ml.At(i)
		m := &st.Metrics[i]
		m.Value, m.Counter = mw.Value(), mw.Counter()
		if m.Name, err = text("sampler metric name", mw.Name); err != nil {
			return st, err
		}
		ll, err := mw.Labels()
		if err != nil {
			return st, malformed("sampler metric labels", err)
		}
		nl, err := listLen("sampler metric labels", ll.Len(), len(payload), 8)
		if err != nil {
			return st, err
		}
		if nl > 0 {
			m.Labels = make([]MetricLabel, nl)
		}
		for j := range nl {
			lw := ll.At(j)
			if m.Labels[j].Name, err = text("sampler metric label name", lw.Name); err != nil {
				return st, err
			}
			if m.Labels[j].Value, err = text("sampler metric label value", lw.Value); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}
