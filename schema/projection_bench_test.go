package schema_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// BenchmarkSessionDictionaryProjection measures what the session
// dictionaries planned in docs/session-dictionaries.md would put on the
// socket, before they exist: each corpus batch is re-encoded (with today's
// EncodeBatch and packed records) keeping only the strings, mappings,
// frames and stacks no earlier batch introduced, its processes and its
// samples, all referring to session-wide ids. It reports the first batch
// and the steady state (every later batch) apart, and measures encoding
// the steady-state batches. The batches it encodes are not valid 1.3
// batches (their references leave the batch), so nothing decodes them.
func BenchmarkSessionDictionaryProjection(b *testing.B) {
	for _, size := range benchBatchSizes {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			c := benchCorpus(b, size)
			deltas := sessionDeltas(c.batches)
			wire := func(d *schema.Batch) int {
				p, err := schema.EncodeBatch(d, nil)
				if err != nil {
					b.Fatal(err)
				}
				return len(p) + ipc.FrameOverhead
			}
			first := wire(deltas[0])
			steady, samples := 0, 0
			for _, d := range deltas[1:] {
				steady += wire(d)
				samples += len(d.Samples)
			}
			if samples == 0 {
				b.Fatal("corpus has one batch: no steady state")
			}
			var buf []byte
			for b.Loop() {
				for _, d := range deltas[1:] {
					buf, _ = schema.EncodeBatch(d, buf[:0])
				}
			}
			b.ReportMetric(float64(first)/float64(len(deltas[0].Samples)), "first-B/sample")
			b.ReportMetric(float64(steady)/float64(samples), "steady-B/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(samples), "steady-encode-ns/sample")
		})
	}
}

// sessionDeltas rewrites batches against one session-wide dictionary:
// each keeps only the entries it introduces (processes stay batch-local).
func sessionDeltas(batches []*schema.Batch) []*schema.Batch {
	strs := map[string]uint32{"": 0}
	maps := map[schema.Mapping]uint32{}
	frames := map[schema.Frame]uint32{}
	stacks := map[string]uint32{}
	var out []*schema.Batch
	var key []byte
	for _, b := range batches {
		d := &schema.Batch{Sequence: b.Sequence, Strings: []string{""}}
		str := func(i uint32) uint32 {
			s := b.Strings[i]
			id, ok := strs[s]
			if !ok {
				id = uint32(len(strs))
				strs[s] = id
				d.Strings = append(d.Strings, s)
			}
			return id
		}
		kvs := func(in []schema.KeyValue) []schema.KeyValue {
			var o []schema.KeyValue
			for _, kv := range in {
				o = append(o, schema.KeyValue{Key: str(kv.Key), Value: str(kv.Value)})
			}
			return o
		}
		mapIDs := make([]uint32, len(b.Mappings)+1)
		for i, m := range b.Mappings {
			m.FileName, m.Path, m.GNUBuildID, m.GoBuildID = str(m.FileName), str(m.Path), str(m.GNUBuildID), str(m.GoBuildID)
			id, ok := maps[m]
			if !ok {
				id = uint32(len(maps)) + 1
				maps[m] = id
				d.Mappings = append(d.Mappings, m)
			}
			mapIDs[i+1] = id
		}
		frameIDs := make([]uint32, len(b.Frames))
		for i, f := range b.Frames {
			f.Mapping, f.FunctionName, f.SourceFile = mapIDs[f.Mapping], str(f.FunctionName), str(f.SourceFile)
			id, ok := frames[f]
			if !ok {
				id = uint32(len(frames))
				frames[f] = id
				d.Frames = append(d.Frames, f)
			}
			frameIDs[i] = id
		}
		stackIDs := make([]uint32, b.NumStacks())
		for i := range stackIDs {
			key = key[:0]
			for _, fi := range b.Stack(uint32(i)) {
				key = binary.LittleEndian.AppendUint32(key, frameIDs[fi])
			}
			id, ok := stacks[string(key)]
			if !ok {
				id = uint32(len(stacks))
				stacks[string(key)] = id
				for _, fi := range b.Stack(uint32(i)) {
					d.StackFrames = append(d.StackFrames, frameIDs[fi])
				}
				d.StackEnds = append(d.StackEnds, uint32(len(d.StackFrames)))
			}
			stackIDs[i] = id
		}
		for _, p := range b.Processes {
			p.Comm, p.ExecutablePath, p.ContainerID = str(p.Comm), str(p.ExecutablePath), str(p.ContainerID)
			p.SystemdUnit, p.ServiceName, p.EnvVars = str(p.SystemdUnit), str(p.ServiceName), kvs(p.EnvVars)
			d.Processes = append(d.Processes, p)
		}
		for _, s := range b.Samples {
			s.ThreadName, s.Stack, s.Labels = str(s.ThreadName), stackIDs[s.Stack], kvs(s.Labels)
			d.Samples = append(d.Samples, s)
		}
		out = append(out, d)
	}
	return out
}
