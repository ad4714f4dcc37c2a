package arrow

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// pool is a memory.Allocator that recycles an encoder's buffers between
// flushes instead of leaving them to the garbage collector: every buffer of
// a record is freed once the record is written, and the next flush needs
// buffers of about the same sizes. Buffers are 64-byte aligned and zeroed,
// as memory.GoAllocator's; their capacity is their power-of-two size
// class. At most limit bytes of free buffers are kept. Safe for concurrent
// use.
type pool struct {
	mu    sync.Mutex
	free  [40][][]byte // by size class
	held  int
	limit int
}

func newPool(limit int) *pool { return &pool{limit: limit} }

const poolAlign = 64

func sizeClass(n int) int {
	if n <= poolAlign {
		return 6
	}
	return bits.Len(uint(n - 1))
}

// Allocate implements memory.Allocator.
func (p *pool) Allocate(size int) []byte {
	c := sizeClass(size)
	if c >= len(p.free) {
		return memory.DefaultAllocator.Allocate(size)
	}
	p.mu.Lock()
	if n := len(p.free[c]); n > 0 {
		b := p.free[c][n-1]
		p.free[c][n-1] = nil
		p.free[c] = p.free[c][:n-1]
		p.held -= cap(b)
		p.mu.Unlock()
		clear(b[:size])
		return b[:size]
	}
	p.mu.Unlock()
	raw := make([]byte, 1<<c+poolAlign)
	shift := int((poolAlign - uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%poolAlign) % poolAlign)
	return raw[shift : shift+size : shift+1<<c]
}

// Reallocate implements memory.Allocator.
func (p *pool) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		return b[:size]
	}
	nb := p.Allocate(size)
	copy(nb, b)
	p.Free(b)
	return nb
}

// Free implements memory.Allocator.
func (p *pool) Free(b []byte) {
	c := bits.Len(uint(cap(b))) - 1
	if cap(b) < poolAlign || cap(b) != 1<<c || c >= len(p.free) {
		return // not one of ours
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held+cap(b) > p.limit {
		return
	}
	p.held += cap(b)
	p.free[c] = append(p.free[c], b[:cap(b)])
}

var _ memory.Allocator = (*pool)(nil)
