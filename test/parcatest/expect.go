package parcatest

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/tandem-profiler/tandem/schema"
)

// Stream is a sampler stream: a Hello and its batches.
type Stream struct {
	Hello   schema.Hello
	Batches []*schema.Batch
}

// Expected resolves every sample of the stream into the row parca-agent's
// conventions give it (docs/parca-protocols.md §3.6, §4, §6.1) with the
// default labels plus external, for schema "v1" or "v2".
func Expected(s Stream, version string, external map[string]string) []Row {
	var rows []Row
	for _, b := range s.Batches {
		for _, smp := range b.Samples {
			p := &b.Processes[smp.Process]
			lbl := map[string]string{
				"node": s.Hello.NodeName, "comm": b.String(p.Comm),
				"cpu": strconv.Itoa(int(smp.CPU)), "thread_id": strconv.Itoa(int(smp.TID)),
				"thread_name": b.String(smp.ThreadName),
			}
			for _, kv := range smp.Labels {
				lbl[b.String(kv.Key)] = b.String(kv.Value)
			}
			for k, v := range external {
				if _, ok := lbl[k]; !ok {
					lbl[k] = v
				}
			}
			var kvs []string
			for k, v := range lbl {
				if v != "" {
					kvs = append(kvs, k+"="+v)
				}
			}
			var frames []string
			for _, fi := range b.Stack(smp.Stack) {
				frames = append(frames, expectFrame(b, &b.Frames[fi], version).String())
			}
			rows = append(rows, Row{
				Labels: labelString(kvs), Stack: strings.Join(frames, "\n"),
				Value: smp.Value, Producer: "parca_agent", Type: expectType(smp.Origin, s.Hello.SamplingFrequencyHz, version),
				Temporality: "delta", Duration: 1e9, Timestamp: smp.TimestampUnixNano,
			})
		}
	}
	return rows
}

func expectType(o schema.Origin, hz uint32, version string) string {
	switch o {
	case schema.OriginCPUSampling:
		return fmt.Sprintf("samples/count cpu/nanoseconds %d", 1e9/int64(hz))
	case schema.OriginOffCPU:
		if version == "v1" {
			return fmt.Sprintf("wallclock/nanoseconds samples/count %d", 1e9/int64(hz))
		}
		return "wallclock/nanoseconds samples/count 0"
	case schema.OriginProbe:
		return "events/count samples/count 0"
	}
	return fmt.Sprintf("unknown_origin_%d/count samples/count 0", o)
}

func fileIDHex(id schema.FileID) string { return fmt.Sprintf("%016x%016x", id.Hi, id.Lo) }

func expectFrame(b *schema.Batch, f *schema.Frame, version string) Location {
	var m *schema.Mapping
	if f.Mapping != 0 {
		m = &b.Mappings[f.Mapping-1]
	}
	fn, file := b.String(f.FunctionName), b.String(f.SourceFile)
	l := Location{Address: f.AddressOrLine, FrameType: f.Kind.String()}
	switch {
	case f.Error && f.Kind == schema.FrameUnknown:
		l.FrameType, l.MappingFile = "abort-marker", "agent-internal-error-frame"
		l.HasLines, l.Function = true, "aborted"
	case f.Kind == schema.FrameNative:
		switch {
		case m == nil:
			l.MappingFile = "UNKNOWN"
		default:
			l.MappingFile = b.String(m.FileName)
			if l.MappingFile == "" && b.String(m.Path) != "" {
				l.MappingFile = path.Base(b.String(m.Path))
			}
			l.BuildID = b.String(m.GNUBuildID)
			if l.BuildID == "" && !m.FileID.IsZero() {
				l.BuildID = fileIDHex(m.FileID)
			}
		}
	case f.Kind == schema.FrameKernel:
		l.MappingFile, l.HasLines = "[kernel.kallsyms]", true
		l.Line = int64(f.SourceLine)
		if version == "v1" {
			l.Column = uint64(f.SourceColumn)
		}
		l.Function = cmpOr(fn, "UNKNOWN")
		l.Filename = file
		if l.Filename == "" && m != nil {
			l.Filename = b.String(m.FileName)
		}
		l.Filename = cmpOr(l.Filename, "vmlinux")
	default:
		if m != nil {
			l.BuildID = b.String(m.GNUBuildID)
		}
		l.HasLines = true
		l.Line, l.Column = int64(f.SourceLine), uint64(f.SourceColumn)
		if fn == "" && file == "" {
			l.Function, l.Filename = "UNREPORTED", "UNREPORTED"
		} else {
			l.Function, l.Filename = cmpOr(fn, "UNREPORTED"), cmpOr(file, "UNKNOWN")
		}
	}
	return l
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Diff compares two row multisets (ignoring stack ids) and describes up to
// max differences; nil when equal.
func Diff(want, got []Row, max int) []string {
	w := make([]string, len(want))
	for i := range want {
		w[i] = want[i].Key()
	}
	g := make([]string, len(got))
	for i := range got {
		g[i] = got[i].Key()
	}
	slices.Sort(w)
	slices.Sort(g)
	var out []string
	if len(w) != len(g) {
		out = append(out, fmt.Sprintf("got %d rows, want %d", len(g), len(w)))
	}
	i, j := 0, 0
	for (i < len(w) || j < len(g)) && len(out) < max {
		switch {
		case j >= len(g) || (i < len(w) && w[i] < g[j]):
			out = append(out, "missing: "+w[i])
			i++
		case i >= len(w) || w[i] > g[j]:
			out = append(out, "unexpected: "+g[j])
			j++
		default:
			i++
			j++
		}
	}
	return out
}

// CheckStackIDs verifies that equal ids mean equal stacks. (Different
// ids may show the same decoded stack: the id hashes the full frames,
// which the record does not carry in full.)
func CheckStackIDs(rows []Row) error {
	byID := map[[16]byte]string{}
	for _, r := range rows {
		if s, ok := byID[r.StackID]; ok && s != r.Stack {
			return fmt.Errorf("stack id %x names two stacks", r.StackID)
		}
		byID[r.StackID] = r.Stack
	}
	return nil
}
