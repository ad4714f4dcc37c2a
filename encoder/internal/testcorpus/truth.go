package testcorpus

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/tandem-profiler/tandem/schema"
)

// Frame is a stack frame resolved to content: what any encoding has to
// preserve.
type Frame struct {
	Kind           schema.FrameKind
	Error          bool
	Address        uint64
	MappingFile    string
	MappingBuildID string // GNU build id
	Function       string
	File           string
	Line           uint32
}

// String renders the frame canonically.
func (f Frame) String() string {
	return fmt.Sprintf("%s|%t|%#x|%s|%s|%s|%s|%d",
		f.Kind, f.Error, f.Address, f.MappingFile, f.MappingBuildID, f.Function, f.File, f.Line)
}

// Event is one observation resolved to content.
type Event struct {
	PID, TID, CPU uint32
	ThreadName    string
	Origin        schema.Origin
	Value         int64
	TimestampNS   int64
	Stack         string // frames, leaf first, joined by "\n"
	Labels        string // sorted "k=v" joined by ","
}

// StackString joins frames canonically, leaf first.
func StackString(frames []Frame) string {
	parts := make([]string, len(frames))
	for i, f := range frames {
		parts[i] = f.String()
	}
	return strings.Join(parts, "\n")
}

// LabelString renders labels canonically.
func LabelString(kvs [][2]string) string {
	parts := make([]string, len(kvs))
	for i, kv := range kvs {
		parts[i] = kv[0] + "=" + kv[1]
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// BatchFrame resolves frame i of b.
func BatchFrame(b *schema.Batch, i uint32) Frame {
	f := &b.Frames[i]
	out := Frame{
		Kind: f.Kind, Error: f.Error, Address: f.AddressOrLine,
		Function: b.String(f.FunctionName), File: b.String(f.SourceFile), Line: f.SourceLine,
	}
	if f.Mapping != 0 {
		m := &b.Mappings[f.Mapping-1]
		out.MappingFile = b.String(m.FileName)
		out.MappingBuildID = b.String(m.GNUBuildID)
	}
	return out
}

// Events resolves every sample of the corpus to content.
func Events(c *Corpus) []Event {
	var out []Event
	for _, b := range c.Batches {
		stacks := make([]string, b.NumStacks())
		for i := range stacks {
			var frames []Frame
			for _, fi := range b.Stack(uint32(i)) {
				frames = append(frames, BatchFrame(b, fi))
			}
			stacks[i] = StackString(frames)
		}
		for _, s := range b.Samples {
			var kvs [][2]string
			for _, kv := range s.Labels {
				kvs = append(kvs, [2]string{b.String(kv.Key), b.String(kv.Value)})
			}
			out = append(out, Event{
				PID:         b.Processes[s.Process].PID,
				TID:         s.TID,
				CPU:         s.CPU,
				ThreadName:  b.String(s.ThreadName),
				Origin:      s.Origin,
				Value:       s.Value,
				TimestampNS: s.TimestampUnixNano,
				Stack:       stacks[s.Stack],
				Labels:      LabelString(kvs),
			})
		}
	}
	return out
}

func compareEvents(a, b Event) int {
	return cmp.Or(
		cmp.Compare(a.TimestampNS, b.TimestampNS),
		cmp.Compare(a.PID, b.PID),
		cmp.Compare(a.TID, b.TID),
		cmp.Compare(a.CPU, b.CPU),
		cmp.Compare(a.Origin, b.Origin),
		cmp.Compare(a.Value, b.Value),
		strings.Compare(a.ThreadName, b.ThreadName),
		strings.Compare(a.Labels, b.Labels),
		strings.Compare(a.Stack, b.Stack),
	)
}

// Diff compares two event multisets (in any order) and describes up to max
// differences; it returns nil when they are equal.
func Diff(want, got []Event, max int) []string {
	want, got = slices.Clone(want), slices.Clone(got)
	slices.SortFunc(want, compareEvents)
	slices.SortFunc(got, compareEvents)
	var out []string
	if len(want) != len(got) {
		out = append(out, fmt.Sprintf("got %d events, want %d", len(got), len(want)))
	}
	i, j := 0, 0
	for (i < len(want) || j < len(got)) && len(out) < max {
		switch {
		case j >= len(got) || (i < len(want) && compareEvents(want[i], got[j]) < 0):
			out = append(out, fmt.Sprintf("missing: %s", describe(want[i])))
			i++
		case i >= len(want) || compareEvents(want[i], got[j]) > 0:
			out = append(out, fmt.Sprintf("unexpected: %s", describe(got[j])))
			j++
		default:
			i++
			j++
		}
	}
	return out
}

func describe(e Event) string {
	stack := e.Stack
	if len(stack) > 300 {
		stack = stack[:300] + "..."
	}
	return fmt.Sprintf("ts=%d pid=%d tid=%d cpu=%d origin=%d value=%d thread=%q labels=%q stack=\n%s",
		e.TimestampNS, e.PID, e.TID, e.CPU, e.Origin, e.Value, e.ThreadName, e.Labels, stack)
}
