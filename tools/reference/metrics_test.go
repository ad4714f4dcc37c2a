package reference

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/internal/counters"
)

// TestDescribe: a vector nobody used, registered once per output through
// WrapRegistererWith, is one family with its type and every label name.
func TestDescribe(t *testing.T) {
	rec := NewRecorder()
	for _, output := range []string{"a", "b"} {
		reg := prometheus.WrapRegistererWith(prometheus.Labels{"output": output}, rec)
		reg.MustRegister(prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "Xs."}, []string{"reason"}))
	}
	rec.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "y", Help: "A y."}, func() float64 { return 1 }))
	ms, err := Describe(rec.Collectors())
	if err != nil {
		t.Fatal(err)
	}
	want := []Metric{
		{Name: "x_total", Type: "counter", Help: "Xs.", Labels: []string{"output", "reason"}},
		{Name: "y", Type: "gauge", Help: "A y."},
	}
	if len(ms) != len(want) {
		t.Fatalf("got %+v, want %+v", ms, want)
	}
	for i := range want {
		if ms[i].Name != want[i].Name || ms[i].Type != want[i].Type || ms[i].Help != want[i].Help ||
			strings.Join(ms[i].Labels, ",") != strings.Join(want[i].Labels, ",") {
			t.Errorf("metric %d: got %+v, want %+v", i, ms[i], want[i])
		}
	}
}

func TestCounters(t *testing.T) {
	set := new(counters.Set)
	for _, r := range []string{"sent", "dropped"} {
		if _, err := set.Counter("z_total", "Zs.", counters.Label{Name: "result", Value: r}); err != nil {
			t.Fatal(err)
		}
	}
	page := string(Metrics("p.md", "T", "intro", Counters(set.Snapshot()))["p.md"])
	if row := "| `z_total` | counter | `result: dropped, sent` | Zs. |"; !strings.Contains(page, row) {
		t.Errorf("no row %s in\n%s", row, page)
	}
}
