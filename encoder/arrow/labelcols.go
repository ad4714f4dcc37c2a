package arrow

import (
	"slices"
	"sort"
	"strings"
	"unsafe"
)

// labelCol is one label column of a flush: its name and its values over
// every row of the kept samples, in row order.
type labelCol struct {
	name string
	runs strRuns
}

// labelCols builds the label columns of a flush while the Labeler labels
// its samples, so labels are never stored per sample. Consecutive samples
// usually have the same label names (the very same strings), so the
// mapping of a sample's labels to columns is computed again only when the
// names change. A split request's columns are sliced from the flush's.
type labelCols struct {
	cols   []*labelCol // in order of first use
	pool   []*labelCol // every column ever made, reused flush after flush
	byName map[string]int32
	rows   int32

	names  []string // the last sample's label names
	colOf  []int32  // its labels' columns
	absent []int32  // the columns it has no label for

	sorted   []*labelCol // cols by name, once the flush is labeled
	outNames []string
	outCols  []*strRuns
	sub      []strRuns // sliced columns of a split request
}

func (l *labelCols) reset() {
	l.cols = l.cols[:0]
	clear(l.byName)
	l.rows = 0
	l.names = l.names[:0]
	l.colOf = l.colOf[:0]
	l.absent = l.absent[:0]
}

// add appends n rows with the labels lbls (sorted by name, unique names).
func (l *labelCols) add(lbls []Label, n int32) {
	if !l.sameNames(lbls) {
		l.layout(lbls)
	}
	for j, c := range l.colOf {
		if r := &l.cols[c].runs; !r.extend(lbls[j].Value, n) {
			r.add(lbls[j].Value, true, n)
		}
	}
	for _, c := range l.absent {
		if r := &l.cols[c].runs; !r.extend("", n) {
			r.add("", true, n)
		}
	}
	l.rows += n
}

// sameNames reports whether lbls have the very same names (same
// addresses: Labelers reuse their name strings) as the last sample's;
// false negatives only cost a layout.
func (l *labelCols) sameNames(lbls []Label) bool {
	if len(lbls) != len(l.names) {
		return false
	}
	for i := range lbls {
		if len(lbls[i].Name) != len(l.names[i]) || unsafe.StringData(lbls[i].Name) != unsafe.StringData(l.names[i]) {
			return false
		}
	}
	return true
}

// layout maps the labels of lbls to their columns, making the missing ones
// (null for the rows so far).
func (l *labelCols) layout(lbls []Label) {
	l.names = l.names[:0]
	l.colOf = l.colOf[:0]
	for _, lb := range lbls {
		l.names = append(l.names, lb.Name)
		l.colOf = append(l.colOf, l.column(lb.Name))
	}
	l.absent = l.absent[:0]
	for c := range l.cols {
		if !slices.Contains(l.colOf, int32(c)) {
			l.absent = append(l.absent, int32(c))
		}
	}
}

// column returns the column of name, making it.
func (l *labelCols) column(name string) int32 {
	if len(l.cols) <= 16 {
		for c, col := range l.cols {
			if sameString(col.name, name) {
				return int32(c)
			}
		}
	} else {
		if l.byName == nil {
			l.byName = make(map[string]int32)
		}
		if len(l.byName) == 0 {
			for c, col := range l.cols {
				l.byName[col.name] = int32(c)
			}
		}
		if c, ok := l.byName[name]; ok {
			return c
		}
	}
	c := int32(len(l.cols))
	if int(c) == len(l.pool) {
		l.pool = append(l.pool, &labelCol{})
	}
	col := l.pool[c]
	col.name = name
	col.runs.reset()
	if l.rows > 0 {
		col.runs.add("", true, l.rows)
	}
	l.cols = append(l.cols, col)
	if len(l.byName) > 0 {
		l.byName[name] = c
	}
	return c
}

// finish orders the columns by name once every sample is labeled.
func (l *labelCols) finish() {
	l.sorted = append(l.sorted[:0], l.cols...)
	slices.SortFunc(l.sorted, func(x, y *labelCol) int { return strings.Compare(x.name, y.name) })
	for _, c := range l.pool[len(l.cols):] {
		c.name = "" // drop references
	}
}

// columns returns the names and columns, in name order, of rows [r0, r1)
// (of total rows): the flush's own columns for the whole flush, else
// columns sliced from them, without the columns all null there.
func (l *labelCols) columns(r0, r1 int32) ([]string, []*strRuns) {
	l.outNames = l.outNames[:0]
	l.outCols = l.outCols[:0]
	if r0 == 0 && r1 == l.rows {
		for _, c := range l.sorted {
			l.outNames = append(l.outNames, c.name)
			l.outCols = append(l.outCols, &c.runs)
		}
		return l.outNames, l.outCols
	}
	l.sub = grow(l.sub, len(l.sorted))
	k := 0
	for _, c := range l.sorted {
		dst := &l.sub[k]
		sliceRuns(&c.runs, r0, r1, dst)
		if len(dst.dict) == 0 {
			continue // all null in the range
		}
		l.outNames = append(l.outNames, c.name)
		l.outCols = append(l.outCols, dst)
		k++
	}
	return l.outNames, l.outCols
}

// sliceRuns sets dst to rows [r0, r1) of src.
func sliceRuns(src *strRuns, r0, r1 int32, dst *strRuns) {
	dst.reset()
	k := sort.Search(len(src.ends), func(i int) bool { return src.ends[i] > r0 })
	start := r0
	for ; k < len(src.ends) && start < r1; k++ {
		end := min(src.ends[k], r1)
		v := ""
		if i := src.idx[k]; i >= 0 {
			v = src.dict[i]
		}
		dst.add(v, true, end-start)
		start = end
	}
}
