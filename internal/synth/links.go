package synth

import (
	"encoding/binary"

	"github.com/tandem-profiler/tandem/schema"
)

// Linked returns a copy of b (b is not modified; the copy shares its
// tables) in which every sample carries a trace link, as if every thread
// ran instrumented spans back to back: a thread's samples in b share a
// span for spanSamples samples at a time, then move to the next (at 19 Hz
// a 50 ms span holds one sample, a request of a few hundred ms a handful).
// Each span has its own trace. The ids are derived from the process, the
// thread and the span's ordinal, so the result is deterministic.
func Linked(b *schema.Batch, spanSamples int) *schema.Batch {
	out := *b
	out.Samples = make([]schema.Sample, len(b.Samples))
	out.Links = make([]schema.TraceLink, 0, len(b.Samples))
	seen := make(map[[2]uint32]int)
	for i, s := range b.Samples {
		pid := b.Processes[s.Process].PID
		key := [2]uint32{pid, s.TID}
		span := seen[key] / max(spanSamples, 1)
		seen[key]++
		var l schema.TraceLink
		binary.BigEndian.PutUint32(l.TraceID[0:4], pid)
		binary.BigEndian.PutUint32(l.TraceID[4:8], s.TID)
		binary.BigEndian.PutUint64(l.TraceID[8:16], uint64(span)+1)
		binary.BigEndian.PutUint32(l.SpanID[0:4], s.TID)
		binary.BigEndian.PutUint32(l.SpanID[4:8], uint32(span)+1)
		out.Links = append(out.Links, l)
		s.Link = uint32(len(out.Links))
		out.Samples[i] = s
	}
	return &out
}
