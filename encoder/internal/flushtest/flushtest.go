package flushtest

import (
	"testing"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
)

// NewAggregator returns an Aggregator of cfg without metrics, failing t if
// cfg is refused.
func NewAggregator(t testing.TB, cfg aggregate.Config) *aggregate.Aggregator {
	t.Helper()
	a, err := aggregate.NewAggregator(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Flush adds every batch of c to a and returns a's flush at c.End().
func Flush(t testing.TB, a *aggregate.Aggregator, c *testcorpus.Corpus) *aggregate.Flush {
	t.Helper()
	for _, b := range c.Batches {
		if err := a.Add(&c.Hello, b); err != nil {
			t.Fatal(err)
		}
	}
	return a.Flush(c.End())
}

// Default runs c through a new Aggregator of encoder.DefaultConfig() and
// returns its flush.
func Default(t testing.TB, c *testcorpus.Corpus) *aggregate.Flush {
	t.Helper()
	return Flush(t, NewAggregator(t, aggregate.DefaultConfig()), c)
}
