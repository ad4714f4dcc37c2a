package synth

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tandem-profiler/tandem/schema"
)

// Shape summarises a stream: what a corpus sanity check or a benchmark
// report wants to know about it.
type Shape struct {
	Samples        int
	Batches        int
	OffCPUSamples  int
	ProbeSamples   int
	Frames         int                         // stack frames over all samples
	FramesByKind   [schema.FrameLuaJIT + 1]int // the same, by frame kind
	PIDs           int
	TIDs           int
	Containers     int
	UserMappings   int // distinct user-space mappings referenced by frames
	GoMappings     int // of which carry a Go build id
	KernelMappings int // distinct mappings referenced by kernel frames
	DistinctStacks int // by content, across batches
	TopStackShare  float64
	Top10Share     float64
}

// FramesPerSample returns the mean stack depth.
func (s Shape) FramesPerSample() float64 { return s.per(s.Frames) }

// KindPerSample returns the mean number of frames of kind k per sample.
func (s Shape) KindPerSample(k schema.FrameKind) float64 { return s.per(s.FramesByKind[k]) }

func (s Shape) per(n int) float64 {
	if s.Samples == 0 {
		return 0
	}
	return float64(n) / float64(s.Samples)
}

func (s Shape) String() string {
	return fmt.Sprintf("%d samples in %d batches; %.1f frames/sample (%.1f kernel, %.1f native, %.1f python, %.1f go); "+
		"%d pids, %d tids, %d containers; %d user mappings (%d go) + %d kernel; %d distinct stacks, top %.1f%%, top ten %.1f%%; "+
		"%d off-CPU, %d probe samples",
		s.Samples, s.Batches, s.FramesPerSample(),
		s.KindPerSample(schema.FrameKernel), s.KindPerSample(schema.FrameNative), s.KindPerSample(schema.FrameCPython), s.KindPerSample(schema.FrameGo),
		s.PIDs, s.TIDs, s.Containers, s.UserMappings, s.GoMappings, s.KernelMappings,
		s.DistinctStacks, 100*s.TopStackShare, 100*s.Top10Share, s.OffCPUSamples, s.ProbeSamples)
}

// ShapeMeter accumulates a Shape over batches. The zero value is ready.
type ShapeMeter struct {
	s          Shape
	pids       map[uint32]bool
	tids       map[uint32]bool
	containers map[string]bool
	mappings   map[string]int // key -> 0 user, 1 user go, 2 kernel
	stacks     map[string]int
	key        strings.Builder
	stackKeys  []string
}

// Add accounts for one batch, which must be valid (as after DecodeBatch).
func (m *ShapeMeter) Add(b *schema.Batch) {
	if m.pids == nil {
		m.pids = map[uint32]bool{}
		m.tids = map[uint32]bool{}
		m.containers = map[string]bool{}
		m.mappings = map[string]int{}
		m.stacks = map[string]int{}
	}
	m.s.Batches++
	// Per stack of this batch: a content key, computed once.
	m.stackKeys = m.stackKeys[:0]
	for i := 0; i < b.NumStacks(); i++ {
		m.key.Reset()
		for _, fi := range b.Stack(uint32(i)) {
			f := &b.Frames[fi]
			fmt.Fprintf(&m.key, "%d/%x/%s/%s/%d/%d/", f.Kind, f.AddressOrLine, b.String(f.FunctionName), b.String(f.SourceFile), f.SourceLine, f.FunctionOffset)
			if f.Mapping > 0 {
				mp := &b.Mappings[f.Mapping-1]
				mk := fmt.Sprintf("%s/%x/%x", b.String(mp.FileName), mp.FileID.Hi, mp.FileID.Lo)
				m.key.WriteString(mk)
				class := 0
				switch {
				case f.Kind == schema.FrameKernel:
					class = 2
				case b.String(mp.GoBuildID) != "":
					class = 1
				}
				m.mappings[mk] = class
			}
			m.key.WriteByte(';')
		}
		m.stackKeys = append(m.stackKeys, m.key.String())
	}
	for i := range b.Samples {
		s := &b.Samples[i]
		m.s.Samples++
		switch s.Origin {
		case schema.OriginOffCPU:
			m.s.OffCPUSamples++
		case schema.OriginProbe:
			m.s.ProbeSamples++
		}
		p := &b.Processes[s.Process]
		m.pids[p.PID] = true
		m.tids[s.TID] = true
		if c := b.String(p.ContainerID); c != "" {
			m.containers[c] = true
		}
		stack := b.Stack(s.Stack)
		m.s.Frames += len(stack)
		for _, fi := range stack {
			if k := b.Frames[fi].Kind; int(k) < len(m.s.FramesByKind) {
				m.s.FramesByKind[k]++
			}
		}
		m.stacks[m.stackKeys[s.Stack]]++
	}
}

// Shape returns the summary so far.
func (m *ShapeMeter) Shape() Shape {
	s := m.s
	s.PIDs, s.TIDs, s.Containers = len(m.pids), len(m.tids), len(m.containers)
	s.UserMappings, s.GoMappings, s.KernelMappings = 0, 0, 0
	for _, class := range m.mappings {
		switch class {
		case 0:
			s.UserMappings++
		case 1:
			s.UserMappings++
			s.GoMappings++
		case 2:
			s.KernelMappings++
		}
	}
	counts := make([]int, 0, len(m.stacks))
	for _, c := range m.stacks {
		counts = append(counts, c)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(counts)))
	s.DistinctStacks = len(counts)
	if s.Samples > 0 && len(counts) > 0 {
		s.TopStackShare = float64(counts[0]) / float64(s.Samples)
		top := 0
		for i := 0; i < len(counts) && i < 10; i++ {
			top += counts[i]
		}
		s.Top10Share = float64(top) / float64(s.Samples)
	}
	return s
}
