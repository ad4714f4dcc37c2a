package schema

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	capnp "capnproto.org/go/capnp/v3"

	"github.com/tandem-profiler/tandem/schema/internal/wire"
)

// Batch layouts (Batch.layout in stream.capnp).
const (
	// layoutLists carries the string table, frames and stacks as Cap'n
	// Proto lists (protocols 1.0 and 1.1). Decoded for old streams and
	// dumps; never encoded.
	layoutLists uint16 = 0
	// layoutPacked carries them as little-endian arrays in Data fields
	// (protocol 1.2), so that decoding is a few tight loops over bytes
	// instead of an accessor call per element.
	layoutPacked uint16 = 1
	// layoutDictionary carries only processes and samples, packed as in
	// layoutPacked, whose string and stack references are ids of the
	// connection's dictionary (protocol 1.4; dictionary.go).
	layoutDictionary uint16 = 2
)

// frameRecordSize is the size of one frame in Batch.packedFrames:
//
//	offset  size  field
//	     0     8  addressOrLine
//	     8     4  mapping
//	    12     4  functionName
//	    16     4  sourceFile
//	    20     4  sourceLine
//	    24     4  sourceColumn
//	    28     4  functionOffset
//	    32     1  kind
//	    33     1  flags: bit 0 error, bits 1-7 reserved (0)
const frameRecordSize = 34

const frameFlagError = 1

// Pointer indices of the packed Data fields of wire.Batch, as the generated
// Set* methods of those fields use them. The encoder writes the bytes in
// place in the message instead of through those setters, which would copy
// them from a scratch buffer.
const (
	ptrStringBytes       = 7
	ptrStringEnds        = 8
	ptrPackedFrames      = 9
	ptrPackedStackFrames = 10
	ptrPackedStackEnds   = 11
	ptrPackedProcesses   = 12
	ptrPackedEnvVars     = 13
	ptrPackedSamples     = 14
	ptrPackedLabels      = 15
	ptrPackedLinks       = 16
)

// processRecordSize is the size of one process in Batch.packedProcesses:
// pid, comm, executablePath, containerId, systemdUnit, serviceName, each a
// uint32.
const processRecordSize = 24

// sampleRecordSize is the size of one sample in Batch.packedSamples:
//
//	offset  size  field
//	     0     8  timestampUnixNano
//	     8     8  value
//	    16     4  process
//	    20     4  tid
//	    24     4  cpu
//	    28     4  threadName
//	    32     4  stack
//	    36     2  origin
const sampleRecordSize = 38

// linkRecordSize is the size of one linked sample in Batch.packedLinks:
//
//	offset  size  field
//	     0     4  sample index
//	     4    16  trace id
//	    20     8  span id
const linkRecordSize = 28

// kvRecordSize is the size of one pair in Batch.packedEnvVars and
// Batch.packedLabels: owner index (process or sample), key, value, each a
// uint32.
const kvRecordSize = 12

// encodePacked writes the string table, frames and stacks of b in the
// packed layout. The list fields of the list layout stay null.
func encodePacked(w wire.Batch, b *Batch) error {
	w.SetLayout(layoutPacked)
	st := capnp.Struct(w)
	if err := encodeTables(st, tablePtrs{ptrStringBytes, ptrStringEnds, ptrPackedFrames, ptrPackedStackFrames, ptrPackedStackEnds},
		b.Strings, b.Frames, b.StackFrames, b.StackEnds); err != nil {
		return err
	}
	return encodeProcessesSamples(st, b)
}

// tablePtrs are the pointer indices of the packed string, frame and stack
// fields of a struct (Batch or DictionaryChunk).
type tablePtrs struct{ stringBytes, stringEnds, frames, stackFrames, stackEnds uint16 }

// encodeTables writes strings, frames and stacks as packed Data fields of
// st. ends are written as given (absolute in a batch, chunk-relative in a
// dictionary chunk).
func encodeTables(st capnp.Struct, p tablePtrs, strs []string, frames []Frame, stackFrames, stackEnds []uint32) error {
	total := 0
	for _, s := range strs {
		total += len(s)
	}
	if err := setData(st, p.stringBytes, total, func(d []byte) {
		off := 0
		for _, s := range strs {
			off += copy(d[off:], s)
		}
	}); err != nil {
		return fmt.Errorf("string bytes: %w", err)
	}
	if err := setData(st, p.stringEnds, 4*len(strs), func(d []byte) {
		end := uint32(0)
		for i, s := range strs {
			end += uint32(len(s))
			binary.LittleEndian.PutUint32(d[4*i:], end)
		}
	}); err != nil {
		return fmt.Errorf("string ends: %w", err)
	}

	if err := setData(st, p.frames, frameRecordSize*len(frames), func(d []byte) {
		for i := range frames {
			f := &frames[i]
			r := d[i*frameRecordSize : (i+1)*frameRecordSize]
			binary.LittleEndian.PutUint64(r[0:8], f.AddressOrLine)
			binary.LittleEndian.PutUint32(r[8:12], f.Mapping)
			binary.LittleEndian.PutUint32(r[12:16], f.FunctionName)
			binary.LittleEndian.PutUint32(r[16:20], f.SourceFile)
			binary.LittleEndian.PutUint32(r[20:24], f.SourceLine)
			binary.LittleEndian.PutUint32(r[24:28], f.SourceColumn)
			binary.LittleEndian.PutUint32(r[28:32], f.FunctionOffset)
			r[32] = byte(f.Kind)
			r[33] = 0
			if f.Error {
				r[33] = frameFlagError
			}
		}
	}); err != nil {
		return fmt.Errorf("frames: %w", err)
	}

	if err := setUint32s(st, p.stackFrames, stackFrames); err != nil {
		return fmt.Errorf("stack frames: %w", err)
	}
	if err := setUint32s(st, p.stackEnds, stackEnds); err != nil {
		return fmt.Errorf("stack ends: %w", err)
	}
	return nil
}

// encodeProcessesSamples writes b's processes, their environment, samples
// and their labels as packed Data fields of st (a Batch, layout 1 or 2).
func encodeProcessesSamples(st capnp.Struct, b *Batch) error {
	nenv := 0
	if err := setData(st, ptrPackedProcesses, processRecordSize*len(b.Processes), func(d []byte) {
		for i := range b.Processes {
			p := &b.Processes[i]
			r := d[i*processRecordSize : (i+1)*processRecordSize]
			binary.LittleEndian.PutUint32(r[0:4], p.PID)
			binary.LittleEndian.PutUint32(r[4:8], p.Comm)
			binary.LittleEndian.PutUint32(r[8:12], p.ExecutablePath)
			binary.LittleEndian.PutUint32(r[12:16], p.ContainerID)
			binary.LittleEndian.PutUint32(r[16:20], p.SystemdUnit)
			binary.LittleEndian.PutUint32(r[20:24], p.ServiceName)
			nenv += len(p.EnvVars)
		}
	}); err != nil {
		return fmt.Errorf("processes: %w", err)
	}
	if err := setData(st, ptrPackedEnvVars, kvRecordSize*nenv, func(d []byte) {
		for i := range b.Processes {
			d = putKeyValues(d, uint32(i), b.Processes[i].EnvVars)
		}
	}); err != nil {
		return fmt.Errorf("process env: %w", err)
	}

	nlabels := 0
	if err := setData(st, ptrPackedSamples, sampleRecordSize*len(b.Samples), func(d []byte) {
		for i := range b.Samples {
			s := &b.Samples[i]
			r := d[i*sampleRecordSize : (i+1)*sampleRecordSize]
			binary.LittleEndian.PutUint64(r[0:8], uint64(s.TimestampUnixNano))
			binary.LittleEndian.PutUint64(r[8:16], uint64(s.Value))
			binary.LittleEndian.PutUint32(r[16:20], s.Process)
			binary.LittleEndian.PutUint32(r[20:24], s.TID)
			binary.LittleEndian.PutUint32(r[24:28], s.CPU)
			binary.LittleEndian.PutUint32(r[28:32], s.ThreadName)
			binary.LittleEndian.PutUint32(r[32:36], s.Stack)
			binary.LittleEndian.PutUint16(r[36:38], uint16(s.Origin))
			nlabels += len(s.Labels)
		}
	}); err != nil {
		return fmt.Errorf("samples: %w", err)
	}
	if err := setData(st, ptrPackedLabels, kvRecordSize*nlabels, func(d []byte) {
		for i := range b.Samples {
			d = putKeyValues(d, uint32(i), b.Samples[i].Labels)
		}
	}); err != nil {
		return fmt.Errorf("sample labels: %w", err)
	}
	return encodeLinks(st, b)
}

// encodeLinks writes one record per linked sample. A batch without links
// leaves the field null: unlinked samples cost nothing.
func encodeLinks(st capnp.Struct, b *Batch) error {
	if len(b.Links) == 0 {
		return nil
	}
	n := 0
	for i := range b.Samples {
		if l := b.Samples[i].Link; l != 0 {
			if int64(l) > int64(len(b.Links)) {
				return fmt.Errorf("sample %d has link %d of %d", i, l, len(b.Links))
			}
			n++
		}
	}
	if err := setData(st, ptrPackedLinks, linkRecordSize*n, func(d []byte) {
		for i := range b.Samples {
			if l := b.Samples[i].Link; l != 0 {
				link := &b.Links[l-1]
				binary.LittleEndian.PutUint32(d[0:4], uint32(i))
				copy(d[4:20], link.TraceID[:])
				copy(d[20:28], link.SpanID[:])
				d = d[linkRecordSize:]
			}
		}
	}); err != nil {
		return fmt.Errorf("sample links: %w", err)
	}
	return nil
}

// putKeyValues writes the pairs of one owner as kvRecordSize-byte records
// at the start of d and returns the rest of d.
func putKeyValues(d []byte, owner uint32, kvs []KeyValue) []byte {
	for _, kv := range kvs {
		binary.LittleEndian.PutUint32(d[0:4], owner)
		binary.LittleEndian.PutUint32(d[4:8], kv.Key)
		binary.LittleEndian.PutUint32(d[8:12], kv.Value)
		d = d[kvRecordSize:]
	}
	return d
}

// setData allocates an n-byte Data object in st's segment, lets fill write
// all of it, and points pointer field ptr of st at it. fill must not
// allocate in the message: a growing segment moves its bytes.
func setData(st capnp.Struct, ptr uint16, n int, fill func([]byte)) error {
	if n > math.MaxInt32 {
		return fmt.Errorf("%d bytes do not fit in a Data field", n)
	}
	l, err := capnp.NewUInt8List(st.Segment(), int32(n))
	if err != nil {
		return err
	}
	if n > 0 {
		d := l.ToPtr().Data()
		if len(d) != n {
			return fmt.Errorf("allocated %d bytes, got %d", n, len(d))
		}
		fill(d)
	}
	return st.SetPtr(ptr, l.ToPtr())
}

func setUint32s(st capnp.Struct, ptr uint16, vs []uint32) error {
	return setData(st, ptr, 4*len(vs), func(d []byte) {
		for i, v := range vs {
			binary.LittleEndian.PutUint32(d[4*i:], v)
		}
	})
}

// packedLen returns the number of size-byte entries in an nbytes-long
// packed array, or an error naming what when it is not a whole number or
// exceeds the list limit.
func packedLen(what string, nbytes, size int) (int, error) {
	if nbytes%size != 0 {
		return 0, malformed(what, fmt.Errorf("%d bytes is not a whole number of %d-byte entries", nbytes, size))
	}
	n := nbytes / size
	if n > maxListLen {
		return 0, malformed(what, fmt.Errorf("%d entries exceed the limit of %d", n, maxListLen))
	}
	return n, nil
}

// decodeStringsPacked decodes the string table. The strings are slices of
// one string copied from the payload: one allocation per batch, never an
// alias of the payload.
func decodeStringsPacked(w wire.Batch, into *Batch) error {
	ends, err := w.StringEnds()
	if err != nil {
		return malformed("batch string ends", err)
	}
	blob, err := w.StringBytes()
	if err != nil {
		return malformed("batch string bytes", err)
	}
	if len(ends) < 4 || binary.LittleEndian.Uint32(ends) != 0 {
		return malformed("batch strings", errors.New("string 0 must be the empty string"))
	}
	into.Strings, err = splitStrings("batch", 0, blob, ends, into.Strings)
	return err
}

// splitStrings decodes a packed string table (blob, and the end of each
// string in it) into dst, reused when it is large enough. The strings are
// slices of one string copied from blob. firstID is the id of the first
// string, for errors (what names the message: "batch", "dictionary chunk").
func splitStrings(what string, firstID uint32, blob, ends []byte, dst []string) ([]string, error) {
	n, err := packedLen(what+" string ends", len(ends), 4)
	if err != nil {
		return dst, err
	}
	if n == 0 {
		if len(blob) != 0 {
			return dst, malformed(what+" string ends", fmt.Errorf("no strings, string bytes hold %d", len(blob)))
		}
		return dst[:0], nil
	}
	if last := binary.LittleEndian.Uint32(ends[len(ends)-4:]); int64(last) != int64(len(blob)) {
		return dst, malformed(what+" string ends", fmt.Errorf("last string (%d) ends at %d, string bytes hold %d", int64(firstID)+int64(n)-1, last, len(blob)))
	}
	dst = grow(dst, n)
	all := string(blob)
	strs := dst[:n]
	prev := uint32(0)
	for i := range strs {
		e := binary.LittleEndian.Uint32(ends[4*i:])
		if e < prev || int64(e) > int64(len(all)) {
			return dst, malformed(what+" string ends", fmt.Errorf("string %d ends at %d (previous end %d, %d string bytes)", int64(firstID)+int64(i), e, prev, len(all)))
		}
		if e-prev > maxTextBytes {
			return dst, malformed(what+" string", fmt.Errorf("string %d has %d bytes, limit %d", int64(firstID)+int64(i), e-prev, maxTextBytes))
		}
		strs[i] = all[prev:e]
		prev = e
	}
	return dst, nil
}

func decodeFramesPacked(w wire.Batch, nstr, nmap uint32, into *Batch) error {
	data, err := w.PackedFrames()
	if err != nil {
		return malformed("batch frames", err)
	}
	into.Frames, err = decodeFrameRecords("batch", 0, data, nstr, nmap, into.Frames)
	return err
}

// decodeFrameRecords decodes packed frames into dst (reused when large
// enough), checking that their string references are below nstr and their
// mappings at most nmap. firstID is the id of the first frame, for errors.
func decodeFrameRecords(what string, firstID int, data []byte, nstr, nmap uint32, dst []Frame) ([]Frame, error) {
	n, err := packedLen(what+" frames", len(data), frameRecordSize)
	if err != nil {
		return dst, err
	}
	dst = grow(dst, n)
	frames := dst[:n]
	for i := range frames {
		r := data[i*frameRecordSize : (i+1)*frameRecordSize]
		flags := r[33]
		if flags&^frameFlagError != 0 {
			return dst, malformed(what+" frame", fmt.Errorf("frame %d has reserved flag bits %#02x set", firstID+i, flags))
		}
		f := Frame{
			Kind:           FrameKind(r[32]),
			Error:          flags&frameFlagError != 0,
			AddressOrLine:  binary.LittleEndian.Uint64(r[0:8]),
			Mapping:        binary.LittleEndian.Uint32(r[8:12]),
			FunctionName:   binary.LittleEndian.Uint32(r[12:16]),
			SourceFile:     binary.LittleEndian.Uint32(r[16:20]),
			SourceLine:     binary.LittleEndian.Uint32(r[20:24]),
			SourceColumn:   binary.LittleEndian.Uint32(r[24:28]),
			FunctionOffset: binary.LittleEndian.Uint32(r[28:32]),
		}
		if err := checkFrame(what, firstID+i, &f, nstr, nmap); err != nil {
			return dst, err
		}
		frames[i] = f
	}
	return dst, nil
}

func decodeStacksPacked(w wire.Batch, into *Batch) error {
	sf, err := w.PackedStackFrames()
	if err != nil {
		return malformed("batch stack frames", err)
	}
	se, err := w.PackedStackEnds()
	if err != nil {
		return malformed("batch stack ends", err)
	}
	into.StackFrames, into.StackEnds, err = decodeStackRecords("batch", 0, sf, se, uint32(len(into.Frames)), into.StackFrames, into.StackEnds)
	return err
}

// decodeStackRecords decodes packed stacks: frame ids (each below nframes)
// and the end of each stack in them (non-decreasing, at most their count),
// into frameDst and endDst (reused when large enough). firstID is the id of
// the first stack, for errors.
func decodeStackRecords(what string, firstID int, sf, se []byte, nframes uint32, frameDst, endDst []uint32) ([]uint32, []uint32, error) {
	n, err := packedLen(what+" stack frames", len(sf), 4)
	if err != nil {
		return frameDst, endDst, err
	}
	frameDst = grow(frameDst, n)
	dst := frameDst[:n]
	for i := range dst {
		v := binary.LittleEndian.Uint32(sf[4*i:])
		if v >= nframes {
			return frameDst, endDst, malformed(what+" stack frames", fmt.Errorf("entry %d references frame %d of %d", i, v, nframes))
		}
		dst[i] = v
	}
	if n, err = packedLen(what+" stack ends", len(se), 4); err != nil {
		return frameDst, endDst, err
	}
	endDst = grow(endDst, n)
	ends := endDst[:n]
	prev := uint32(0)
	for i := range ends {
		v := binary.LittleEndian.Uint32(se[4*i:])
		if v < prev || int64(v) > int64(len(dst)) {
			return frameDst, endDst, malformed(what+" stack ends", fmt.Errorf("stack %d ends at %d (previous %d, %d frame entries)", firstID+i, v, prev, len(dst)))
		}
		ends[i] = v
		prev = v
	}
	return frameDst, endDst, nil
}

func decodeProcessesPacked(w wire.Batch, nstr uint32, into *Batch) error {
	data, err := w.PackedProcesses()
	if err != nil {
		return malformed("batch processes", err)
	}
	n, err := packedLen("batch processes", len(data), processRecordSize)
	if err != nil {
		return err
	}
	into.Processes = grow(into.Processes, n)
	procs := into.Processes[:n]
	for i := range procs {
		r := data[i*processRecordSize : (i+1)*processRecordSize]
		p := Process{
			PID:            binary.LittleEndian.Uint32(r[0:4]),
			Comm:           binary.LittleEndian.Uint32(r[4:8]),
			ExecutablePath: binary.LittleEndian.Uint32(r[8:12]),
			ContainerID:    binary.LittleEndian.Uint32(r[12:16]),
			SystemdUnit:    binary.LittleEndian.Uint32(r[16:20]),
			ServiceName:    binary.LittleEndian.Uint32(r[20:24]),
		}
		if err := checkProcess(i, &p, nstr); err != nil {
			return err
		}
		procs[i] = p
	}
	env, err := w.PackedEnvVars()
	if err != nil {
		return malformed("batch process env", err)
	}
	return decodeKeyValuesPacked("batch process env", env, n, nstr, func(i int, kvs []KeyValue) {
		procs[i].EnvVars = kvs
	})
}

func decodeSamplesPacked(w wire.Batch, nstr, nstacks uint32, into *Batch) error {
	data, err := w.PackedSamples()
	if err != nil {
		return malformed("batch samples", err)
	}
	n, err := packedLen("batch samples", len(data), sampleRecordSize)
	if err != nil {
		return err
	}
	nproc := uint32(len(into.Processes))
	into.Samples = grow(into.Samples, n)
	samples := into.Samples[:n]
	for i := range samples {
		r := data[i*sampleRecordSize : (i+1)*sampleRecordSize]
		s := Sample{
			TimestampUnixNano: int64(binary.LittleEndian.Uint64(r[0:8])),
			Value:             int64(binary.LittleEndian.Uint64(r[8:16])),
			Process:           binary.LittleEndian.Uint32(r[16:20]),
			TID:               binary.LittleEndian.Uint32(r[20:24]),
			CPU:               binary.LittleEndian.Uint32(r[24:28]),
			ThreadName:        binary.LittleEndian.Uint32(r[28:32]),
			Stack:             binary.LittleEndian.Uint32(r[32:36]),
			Origin:            Origin(binary.LittleEndian.Uint16(r[36:38])),
		}
		if s.Process >= nproc || s.Stack >= nstacks || s.ThreadName >= nstr {
			return checkSample(i, &s, nstr, nproc, nstacks)
		}
		samples[i] = s
	}
	labels, err := w.PackedLabels()
	if err != nil {
		return malformed("batch sample labels", err)
	}
	if err := decodeKeyValuesPacked("batch sample labels", labels, n, nstr, func(i int, kvs []KeyValue) {
		samples[i].Labels = kvs
	}); err != nil {
		return err
	}
	links, err := w.PackedLinks()
	if err != nil {
		return malformed("batch sample links", err)
	}
	return decodeLinksPacked(links, into)
}

// decodeLinksPacked reads the linkRecordSize-byte records of the linked
// samples into into.Links and points each sample at its link.
func decodeLinksPacked(data []byte, into *Batch) error {
	n, err := packedLen("batch sample links", len(data), linkRecordSize)
	if err != nil || n == 0 {
		return err
	}
	samples := into.Samples
	into.Links = grow(into.Links, n)
	links := into.Links[:n]
	prev := int64(-1)
	for i := range links {
		r := data[i*linkRecordSize : (i+1)*linkRecordSize]
		s := int64(binary.LittleEndian.Uint32(r[0:4]))
		if s <= prev || s >= int64(len(samples)) {
			return malformed("batch sample links", fmt.Errorf("link %d belongs to sample %d (previous link to %d, %d samples): sample indices must increase", i, s, prev, len(samples)))
		}
		var l TraceLink
		copy(l.TraceID[:], r[4:20])
		copy(l.SpanID[:], r[20:28])
		if !l.IsValid() {
			return malformed("batch sample links", fmt.Errorf("link %d (sample %d) has an all-zero trace or span id: a sample without a span has no link record", i, s))
		}
		links[i] = l
		samples[s].Link = uint32(i + 1)
		prev = s
	}
	return nil
}

// decodeKeyValuesPacked reads kvRecordSize-byte (owner, key, value) records
// whose owners are non-decreasing indices below nowners, and hands each
// owner with pairs its pairs, in order, as a slice of one array (cap
// limited, so appending to one owner's pairs never overwrites another's).
// Owners without pairs are not called: their pairs stay nil.
func decodeKeyValuesPacked(what string, data []byte, nowners int, nstr uint32, set func(owner int, kvs []KeyValue)) error {
	n, err := packedLen(what, len(data), kvRecordSize)
	if err != nil || n == 0 {
		return err
	}
	all := make([]KeyValue, n)
	start, owner := 0, -1
	for i := range all {
		r := data[i*kvRecordSize : (i+1)*kvRecordSize]
		o := binary.LittleEndian.Uint32(r[0:4])
		kv := KeyValue{Key: binary.LittleEndian.Uint32(r[4:8]), Value: binary.LittleEndian.Uint32(r[8:12])}
		if int64(o) >= int64(nowners) || int64(o) < int64(owner) {
			return malformed(what, fmt.Errorf("pair %d belongs to %d (previous pair to %d, %d owners)", i, o, owner, nowners))
		}
		if kv.Key >= nstr || kv.Value >= nstr {
			return malformed(what, fmt.Errorf("pair %d references a string beyond the %d-entry table", i, nstr))
		}
		if int(o) != owner {
			if owner >= 0 {
				set(owner, all[start:i:i])
			}
			start, owner = i, int(o)
		}
		all[i] = kv
	}
	set(owner, all[start:n:n])
	return nil
}
