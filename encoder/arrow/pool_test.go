package arrow

import (
	"testing"
	"unsafe"
)

func TestPool(t *testing.T) {
	p := newPool(1 << 20)
	a := p.Allocate(100)
	if len(a) != 100 || cap(a) != 128 || uintptr(unsafe.Pointer(unsafe.SliceData(a)))%64 != 0 {
		t.Fatalf("len %d cap %d addr %p", len(a), cap(a), unsafe.SliceData(a))
	}
	for i := range a {
		a[i] = 0xff
	}
	p.Free(a)
	b := p.Allocate(120)
	if unsafe.SliceData(b) != unsafe.SliceData(a) {
		t.Fatal("a freed buffer of the same class was not reused")
	}
	for i, v := range b {
		if v != 0 {
			t.Fatalf("reused buffer not zeroed at %d", i)
		}
	}
	c := p.Reallocate(1000, b)
	if len(c) != 1000 || cap(c) != 1024 {
		t.Fatalf("reallocate: len %d cap %d", len(c), cap(c))
	}
	p.Free(c)
	p.Free(make([]byte, 10)) // not ours: ignored
	big := p.Allocate(2 << 20)
	p.Free(big) // over the limit: dropped
	if p.held > 1<<20 {
		t.Fatalf("pool holds %d bytes, limit %d", p.held, 1<<20)
	}
}
