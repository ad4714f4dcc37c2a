package symbolize

import (
	"fmt"
	"io"
)

// NeedsFile reports whether the table reads from its file when it
// resolves (a Go pclntab, read on demand): it names nothing once the
// file's descriptor is closed, unless Detached first.
func (t *Table) NeedsFile() bool { return t.pcln != nil && !t.detached }

// Detached returns a table that reads nothing from the file: t itself
// when it reads nothing already, else a copy that holds the bytes of the
// pclntab (and of the section of Go's inline trees) in memory, read from
// the file now. It fails when those bytes are more than max, or cannot be
// read. The encoder detaches the table of a deleted executable before
// closing its descriptor, which is what frees the file's disk space.
func (t *Table) Detached(max int64) (*Table, error) {
	if !t.NeedsFile() {
		return t, nil
	}
	p := *t.pcln
	need := int64(p.all.n)
	var inl *sectionBytes
	if t.inl != nil {
		need += int64(t.inl.g.n)
	}
	if need > max {
		return nil, fmt.Errorf("the Go pclntab and inline trees are %d bytes, more than the %d allowed in memory", need, max)
	}
	m := new(memFile)
	if err := m.load(p.all); err != nil {
		return nil, fmt.Errorf("read the Go pclntab: %w", err)
	}
	for _, g := range []*region{&p.all, &p.funcnames, &p.cutab, &p.filetab, &p.pctab, &p.functab} {
		g.r = m
	}
	if t.inl != nil {
		c := *t.inl
		if err := m.load(c.g); err != nil {
			return nil, fmt.Errorf("read the Go inline trees: %w", err)
		}
		c.g.r = m
		inl = &c
	}
	d := *t
	d.pcln, d.inl, d.inMemory, d.detached = &p, inl, need, true
	return &d, nil
}

// memFile is ranges of a file read into memory, read like the file.
type memFile struct{ chunks []memChunk }

type memChunk struct {
	off int64
	b   []byte
}

// load reads the bytes of g from its file.
func (m *memFile) load(g region) error {
	b := make([]byte, g.n)
	if _, err := g.r.ReadAt(b, g.base); err != nil {
		return err
	}
	m.chunks = append(m.chunks, memChunk{off: g.base, b: b})
	return nil
}

// ReadAt reads from the chunk holding [off, off+len(b)); a read outside
// every chunk is an error, as a read past the file's end would be.
func (m *memFile) ReadAt(b []byte, off int64) (int, error) {
	for _, c := range m.chunks {
		if off >= c.off && off-c.off <= int64(len(c.b)) && int64(len(b)) <= int64(len(c.b))-(off-c.off) {
			return copy(b, c.b[off-c.off:]), nil
		}
	}
	return 0, io.ErrUnexpectedEOF
}
