package arrow

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLabelCols checks the label columns built sample by sample, and
// their slices for split requests, against a per-row reference, with more
// names than the linear column search handles.
func TestLabelCols(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var names []string
	for i := range 24 {
		names = append(names, fmt.Sprintf("n%02d", i))
	}
	values := []string{"a", "b", "c"}
	for iter := range 200 {
		var l labelCols
		l.reset()
		type sample struct {
			lbls []Label
			n    int32
		}
		var samples []sample
		width := 1 + rng.IntN(len(names))
		for range 1 + rng.IntN(40) {
			var lbls []Label
			for _, name := range names[:width] {
				if rng.IntN(3) > 0 {
					// Fresh name strings now and then: layouts are matched by
					// address first.
					if rng.IntN(4) == 0 {
						name = string([]byte(name))
					}
					lbls = append(lbls, Label{Name: name, Value: values[rng.IntN(len(values))]})
				}
			}
			s := sample{lbls: lbls, n: int32(1 + rng.IntN(3))}
			samples = append(samples, s)
			l.add(s.lbls, s.n)
		}
		l.finish()
		// Reference: the value of every name on every row.
		var rows []map[string]string
		for _, s := range samples {
			m := map[string]string{}
			for _, lb := range s.lbls {
				m[lb.Name] = lb.Value
			}
			for range s.n {
				rows = append(rows, m)
			}
		}
		r0 := int32(rng.IntN(len(rows)))
		r1 := r0 + 1 + int32(rng.IntN(len(rows)-int(r0)))
		if iter%3 == 0 {
			r0, r1 = 0, int32(len(rows))
		}
		gotNames, cols := l.columns(r0, r1)
		var wantNames []string
		for _, m := range rows[r0:r1] {
			for name := range m {
				if !slices.Contains(wantNames, name) {
					wantNames = append(wantNames, name)
				}
			}
		}
		slices.Sort(wantNames)
		if !slices.Equal(gotNames, wantNames) {
			t.Fatalf("case %d rows [%d, %d): names %v, want %v", iter, r0, r1, gotNames, wantNames)
		}
		for c, name := range gotNames {
			col := cols[c]
			if col.rows != r1-r0 {
				t.Fatalf("case %d column %s: %d rows, want %d", iter, name, col.rows, r1-r0)
			}
			start := int32(0)
			for k, end := range col.ends {
				if end <= start {
					t.Fatalf("case %d column %s: empty run %d", iter, name, k)
				}
				want := ""
				if i := col.idx[k]; i >= 0 {
					want = col.dict[i]
				}
				for r := start; r < end; r++ {
					if v := rows[r0+r][name]; v != want {
						t.Fatalf("case %d column %s row %d: %q, want %q", iter, name, r, want, v)
					}
				}
				start = end
			}
		}
	}
}
