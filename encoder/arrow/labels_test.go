package arrow

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/encoder"
)

// TestDefaultLabelerMerge checks the merge of custom, fixed and external
// labels against the sort-based reference (unsortedLabels): first entry of
// a name wins, custom over fixed, empty values dropped but still hiding
// the external label of their name.
func TestDefaultLabelerMerge(t *testing.T) {
	names := []string{"a", "comm", "cpu", "handler", "node", "thread_id", "thread_name", "zz"}
	values := []string{"", "x", "y"}
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		f := &encoder.Flush{Strings: []string{""}}
		str := func(s string) uint32 {
			if i := slices.Index(f.Strings, s); i >= 0 {
				return uint32(i)
			}
			f.Strings = append(f.Strings, s)
			return uint32(len(f.Strings) - 1)
		}
		var kvs []encoder.KeyValue
		for range rng.IntN(5) {
			kvs = append(kvs, encoder.KeyValue{Key: str(names[rng.IntN(len(names))]), Value: str(values[rng.IntN(len(values))])})
		}
		sorted := iter%5 != 0
		if sorted {
			slices.SortFunc(kvs, func(x, y encoder.KeyValue) int {
				if c := strings.Compare(f.Strings[x.Key], f.Strings[y.Key]); c != 0 {
					return c
				}
				return strings.Compare(f.Strings[x.Value], f.Strings[y.Value])
			})
		}
		f.LabelKVs = kvs
		f.LabelEnds = []uint32{0, uint32(len(kvs))}
		f.Resources = []encoder.Resource{{Comm: str(values[rng.IntN(3)]), NodeName: str(values[rng.IntN(3)])}}
		s := &encoder.Sample{CPU: uint32(rng.IntN(3)), TID: uint32(rng.IntN(3)), ThreadName: str(values[rng.IntN(3)]), Labels: 1}
		ext := map[string]string{}
		for range rng.IntN(3) {
			ext[names[rng.IntN(len(names))]] = "e"
		}
		cfg := DefaultLabelerConfig{External: ext, DisableCPU: rng.IntN(4) == 0, DisableThreadName: rng.IntN(4) == 0}
		l := NewDefaultLabeler(cfg)
		got, keep := l.Labels([]Label{{Name: "prefix"}}, f, s)
		if !keep {
			t.Fatal("DefaultLabeler dropped a sample")
		}
		// The reference: the fixed labels (empty values included) after
		// the custom ones, sorted and merged by appendSorted.
		ref := NewDefaultLabeler(cfg)
		all := []Label{
			{Name: LabelComm, Value: f.Strings[f.Resources[0].Comm]},
			{Name: LabelCPU, Value: ref.cpu(s.CPU)},
			{Name: LabelNode, Value: f.Strings[f.Resources[0].NodeName]},
			{Name: LabelThreadID, Value: ref.tid(s.TID)},
			{Name: LabelThreadName, Value: f.Strings[s.ThreadName]},
		}
		all = slices.DeleteFunc(all, func(lb Label) bool {
			return (cfg.DisableCPU && lb.Name == LabelCPU) || (cfg.DisableThreadName && lb.Name == LabelThreadName)
		})
		want := ref.unsortedLabels([]Label{{Name: "prefix"}}, f, kvs, all)
		if !slices.Equal(got, want) {
			t.Fatalf("case %d (custom %v sorted %v, external %v):\n got %v\nwant %v", iter, kvs, sorted, ext, got, want)
		}
	}
}
