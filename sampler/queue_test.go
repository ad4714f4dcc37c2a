package sampler

import (
	"slices"
	"sync"
	"testing"
)

func TestDropQueueDropsOldest(t *testing.T) {
	q := newDropQueue[int](100, 1000)
	for i := range 10 {
		if d := q.Push(i, 10); d != 0 {
			t.Fatalf("push %d dropped %d, want 0", i, d)
		}
	}
	// Full (100 bytes): a 25-byte item drops the three oldest.
	if d := q.Push(10, 25); d != 3 {
		t.Fatalf("push into a full queue dropped %d, want 3", d)
	}
	st := q.Stats()
	want := queueStats{Items: 8, Bytes: 95, Pushed: 11, DroppedItems: 3, DroppedBytes: 30}
	if st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	select {
	case <-q.wake:
	default:
		t.Error("a drop did not wake the consumer")
	}
	got := q.Drain(nil)
	if !slices.Equal(got, []int{3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Errorf("drained %v, want 3..10 in order", got)
	}
	if st := q.Stats(); st.Items != 0 || st.Bytes != 0 {
		t.Errorf("after drain: %+v", st)
	}
	// An item larger than the bound is dropped itself.
	if d := q.Push(11, 101); d != 1 {
		t.Errorf("oversized push dropped %d, want 1", d)
	}
	if st := q.Stats(); st.DroppedItems != 4 || st.DroppedBytes != 131 || st.Items != 0 {
		t.Errorf("after oversized push: %+v", st)
	}
}

func TestDropQueueWrapsAndGrows(t *testing.T) {
	q := newDropQueue[int](1<<20, 1<<20)
	next, want := 0, 0
	for round := range 50 {
		for range round * 7 {
			q.Push(next, 1)
			next++
		}
		for _, v := range q.Drain(nil) {
			if v != want {
				t.Fatalf("round %d: got %d, want %d", round, v, want)
			}
			want++
		}
	}
	if want != next {
		t.Fatalf("drained %d of %d", want, next)
	}
}

func TestDropQueueWakesAtThreshold(t *testing.T) {
	q := newDropQueue[int](1000, 3)
	q.Push(1, 1)
	q.Push(2, 1)
	select {
	case <-q.wake:
		t.Fatal("woke before the threshold")
	default:
	}
	q.Push(3, 1)
	select {
	case <-q.wake:
	default:
		t.Fatal("did not wake at the threshold")
	}
}

// Accounting stays exact under concurrent producers (go test -race).
func TestDropQueueConcurrent(t *testing.T) {
	q := newDropQueue[int](1000, 100)
	var wg sync.WaitGroup
	const producers, each = 4, 5000
	for range producers {
		wg.Go(func() {
			for i := range each {
				q.Push(i, 7)
			}
		})
	}
	drained := 0
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			drained += len(q.Drain(nil))
			st := q.Stats()
			if st.Pushed != producers*each || uint64(drained)+st.DroppedItems != st.Pushed {
				t.Fatalf("pushed %d, drained %d + dropped %d", st.Pushed, drained, st.DroppedItems)
			}
			return
		default:
			drained += len(q.Drain(nil))
		}
	}
}

func TestDropQueueDrainN(t *testing.T) {
	q := newDropQueue[int](100, 1000)
	for i := range 5 {
		q.Push(i, 10)
	}
	if got := q.DrainN(nil, 2); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("DrainN(2) = %v", got)
	}
	if st := q.Stats(); st.Items != 3 || st.Bytes != 30 {
		t.Fatalf("after DrainN(2): %+v", st)
	}
	q.Push(5, 10)
	if got := q.DrainN(nil, 10); !slices.Equal(got, []int{2, 3, 4, 5}) {
		t.Fatalf("DrainN(10) = %v", got)
	}
}
