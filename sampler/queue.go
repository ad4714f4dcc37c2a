package sampler

import "sync"

// dropQueue is a FIFO bounded in (estimated) bytes. Push never blocks: when
// an item does not fit, the oldest items are dropped until it does, and
// counted. It is safe for one or more producers and one consumer.
type dropQueue[T any] struct {
	mu       sync.Mutex
	items    []T   // ring buffer
	sizes    []int // size of items[i]
	head     int
	n        int
	bytes    int
	maxBytes int

	// cumulative counters, under mu
	pushed       uint64
	droppedItems uint64
	droppedBytes uint64

	// wake is signalled (without blocking) when the consumer should run
	// before its next tick: the queue reached wakeItems, or it dropped.
	wake      chan struct{}
	wakeItems int
}

func newDropQueue[T any](maxBytes, wakeItems int) *dropQueue[T] {
	const initial = 64
	return &dropQueue[T]{
		items:     make([]T, initial),
		sizes:     make([]int, initial),
		maxBytes:  maxBytes,
		wake:      make(chan struct{}, 1),
		wakeItems: wakeItems,
	}
}

// Push appends v, accounted as size bytes, dropping the oldest items when
// the queue would exceed its bound. An item larger than the bound is
// dropped itself. It returns how many items were dropped.
func (q *dropQueue[T]) Push(v T, size int) int {
	q.mu.Lock()
	q.pushed++
	if size > q.maxBytes {
		q.droppedItems++
		q.droppedBytes += uint64(size)
		q.mu.Unlock()
		q.signal()
		return 1
	}
	dropped := 0
	var zero T
	for q.bytes+size > q.maxBytes && q.n > 0 {
		q.bytes -= q.sizes[q.head]
		q.droppedBytes += uint64(q.sizes[q.head])
		q.items[q.head] = zero // release references
		q.head = (q.head + 1) % len(q.items)
		q.n--
		dropped++
	}
	q.droppedItems += uint64(dropped)
	if q.n == len(q.items) {
		q.grow()
	}
	i := (q.head + q.n) % len(q.items)
	q.items[i] = v
	q.sizes[i] = size
	q.n++
	q.bytes += size
	wake := dropped > 0 || q.n == q.wakeItems
	q.mu.Unlock()
	if wake {
		q.signal()
	}
	return dropped
}

func (q *dropQueue[T]) grow() {
	items := make([]T, 2*len(q.items))
	sizes := make([]int, 2*len(q.sizes))
	for i := range q.n {
		j := (q.head + i) % len(q.items)
		items[i] = q.items[j]
		sizes[i] = q.sizes[j]
	}
	q.items, q.sizes, q.head = items, sizes, 0
}

func (q *dropQueue[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Drain appends every queued item to dst, oldest first, and empties the
// queue.
func (q *dropQueue[T]) Drain(dst []T) []T {
	return q.DrainN(dst, -1)
}

// DrainN appends up to n queued items (all when n < 0) to dst, oldest
// first, and removes them. Bounding n bounds how long producers wait for
// the lock.
func (q *dropQueue[T]) DrainN(dst []T, n int) []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero T
	for q.n > 0 && n != 0 {
		dst = append(dst, q.items[q.head])
		q.bytes -= q.sizes[q.head]
		q.items[q.head] = zero
		q.head = (q.head + 1) % len(q.items)
		q.n--
		n--
	}
	if q.n == 0 {
		q.head, q.bytes = 0, 0
	}
	return dst
}

// queueStats is a snapshot of the queue's state and cumulative counters.
type queueStats struct {
	Items, Bytes               int
	Pushed                     uint64
	DroppedItems, DroppedBytes uint64
}

func (q *dropQueue[T]) Stats() queueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return queueStats{
		Items: q.n, Bytes: q.bytes, Pushed: q.pushed,
		DroppedItems: q.droppedItems, DroppedBytes: q.droppedBytes,
	}
}
