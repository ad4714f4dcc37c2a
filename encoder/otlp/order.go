package otlp

import (
	"cmp"
	"slices"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/schema"
)

// sampleOrder is the Encoder's state for ordering a request's samples and
// profiles.
type sampleOrder struct {
	threads             rankTable // thread id -> first-appearance rank
	rowThread, byThread []int32   // per sample
	radixCount          []int32
	cpuList             []uint32
	types               []typeKey
	rowType             []int32
	bucketStart         []int32
	order               []int32
	sampleTypes         []aggregate.SampleType
}

type typeKey struct {
	origin schema.Origin
	hz     uint32
}

// sortSamples finds the sample types present and orders the samples by
// (resource, type), keeping flush order within each: the order
// writeResources writes them in.
func (e *Encoder) sortSamples(f *aggregate.Flush) {
	// Sample types present, and each sample's; threads and CPUs get dense
	// ranks in order of first appearance.
	n := len(f.Samples)
	e.types = e.types[:0]
	e.sampleTypes = e.sampleTypes[:0]
	e.rowType = slices.Grow(e.rowType[:0], n)[:n]
	e.rowThread = slices.Grow(e.rowThread[:0], n)[:n]
	e.cpuList = e.cpuList[:0]
	e.threads.reset(n)
	for i := range f.Samples {
		s := &f.Samples[i]
		k := typeKey{origin: s.Origin, hz: s.FrequencyHz}
		t := -1
		for j := range e.types {
			if e.types[j] == k {
				t = j
				break
			}
		}
		if t < 0 {
			t = len(e.types)
			e.types = append(e.types, k)
			e.sampleTypes = append(e.sampleTypes, SampleTypeOf(k.origin, k.hz))
		}
		e.rowType[i] = int32(t)
		e.rowThread[i] = e.threads.rank(s.TID)
		if int(s.CPU) >= len(e.cpuAttr) {
			e.cpuAttr.grow(int(s.CPU) + 1)
		}
		if c := &e.cpuAttr[s.CPU]; c.epoch != e.epoch {
			c.epoch = e.epoch
			e.cpuList = append(e.cpuList, s.CPU)
		}
	}
	nt := len(e.types)
	e.rankResources(f)
	rank := e.resRank
	e.tidAttr = slices.Grow(e.tidAttr[:0], int(e.threads.n))[:int(e.threads.n)]
	clear(e.tidAttr)
	// Samples by (resource rank, type, thread), keeping flush order
	// otherwise: two stable counting sorts, least significant key first. A
	// thread's samples then sit together, and their attribute lists repeat.
	// (Ordering by CPU within a thread saves another 0.3%, for 2.5% more
	// instructions.)
	e.order = slices.Grow(e.order[:0], n)[:n]
	e.byThread = slices.Grow(e.byThread[:0], n)[:n]
	countingSort(nil, e.byThread, e.rowThread, int(e.threads.n), &e.radixCount)
	for i := range f.Samples { // rowType becomes the bucket
		e.rowType[i] += rank[f.Samples[i].Resource] * int32(nt)
	}
	bs := countingSort(e.byThread, e.order, e.rowType, len(f.Resources)*nt, &e.radixCount)
	// bs[b] is now the end of bucket b; bucket b starts where b-1 ends.
	e.bucketStart = append(e.bucketStart[:0], bs...)
}

// rankTable ranks uint32 keys in order of first appearance: an
// open-addressing table cleared by generation, several times cheaper per
// lookup than a map on the per-sample path.
type rankTable struct {
	slots []rankSlot
	gen   uint32
	n     int32
}

type rankSlot struct {
	gen  uint32
	key  uint32
	rank int32
}

// reset forgets every key and sizes the table for up to n keys.
func (t *rankTable) reset(n int) {
	t.gen++
	t.n = 0
	size := 64
	for size < 2*n {
		size <<= 1
	}
	if t.gen == 0 || len(t.slots) < size {
		t.slots = make([]rankSlot, size)
		t.gen = 1
	}
}

func (t *rankTable) rank(key uint32) int32 {
	mask := uint32(len(t.slots) - 1)
	for i := (key * 0x9e3779b1) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.gen != t.gen {
			s.gen, s.key, s.rank = t.gen, key, t.n
			t.n++
			return s.rank
		}
		if s.key == key {
			return s.rank
		}
	}
}

// countingSort writes the rows of in (0..len(out)-1 when in is nil) to out,
// stably ordered by key[row] in [0, keys), and returns each key's end in
// out (in *count, reused).
func countingSort(in, out, key []int32, keys int, count *[]int32) []int32 {
	*count = slices.Grow((*count)[:0], keys+1)[:keys+1]
	cnt := *count
	clear(cnt)
	for _, k := range key {
		cnt[k+1]++
	}
	for k := 1; k <= keys; k++ {
		cnt[k] += cnt[k-1]
	}
	if in == nil {
		for r, k := range key {
			out[cnt[k]] = int32(r)
			cnt[k]++
		}
	} else {
		for _, r := range in {
			k := key[r]
			out[cnt[k]] = r
			cnt[k]++
		}
	}
	return cnt[:keys]
}

// rankResources orders the resources by executable, container and pid, so
// that processes of one program are written next to each other: their
// resource attributes repeat and their stacks share locations, which gzip
// finds when they are close.
func (e *Encoder) rankResources(f *aggregate.Flush) {
	n := len(f.Resources)
	e.resOrder = slices.Grow(e.resOrder[:0], n)[:n]
	e.resRank = slices.Grow(e.resRank[:0], n)[:n]
	for i := range e.resOrder {
		e.resOrder[i] = int32(i)
	}
	// Equal strings have equal ids, and grouping needs nothing more.
	slices.SortFunc(e.resOrder, func(a, b int32) int {
		ra, rb := &f.Resources[a], &f.Resources[b]
		return cmp.Or(
			cmp.Compare(ra.ExecutablePath, rb.ExecutablePath),
			cmp.Compare(ra.ContainerID, rb.ContainerID),
			cmp.Compare(ra.PID, rb.PID),
			cmp.Compare(a, b))
	})
	for rank, r := range e.resOrder {
		e.resRank[r] = int32(rank)
	}
}
