package otlp_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/test/golden"
	"github.com/tandem-profiler/tandem/test/otlptest"
)

// decodedDigest resolves every sample of a request through the strict
// decoder and hashes them in a canonical order, so that dictionary order,
// sample order and index values do not count, and everything a receiver
// sees (sample types, resource and sample attributes, frames with their
// mappings, functions and build ids, values, timestamps) does.
func decodedDigest(t *testing.T, c *testcorpus.Corpus) string {
	t.Helper()
	req := newEncoder(t).Encode(flushtest.Flush(t, flushtest.NewAggregator(t, aggregate.DefaultConfig()), c))
	samples, err := otlptest.Flatten(req.Profiles())
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, len(samples))
	for i, s := range samples {
		lines[i] = fmt.Sprintf("%s/%s %s/%s %d res=%v attrs=%v frames=%+v values=%v ts=%v",
			s.SampleType, s.SampleUnit, s.PeriodType, s.PeriodUnit, s.Period,
			s.Resource, s.Attributes, s.Frames, s.Values, s.Timestamps)
	}
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return fmt.Sprintf("%d samples %s", len(lines), hex.EncodeToString(sum[:]))
}

// TestDecodedUnchanged pins what a receiver decodes from the small and the
// benchmark corpus. The golden file was written by the encoder before its
// dictionaries were reordered for compression (and written again, by the
// same encoder, when the corpora became internal/synth streams); the order
// of tables and samples may change, what they say may not.
func TestDecodedUnchanged(t *testing.T) {
	got := "small " + decodedDigest(t, testcorpus.Generate(testcorpus.Small())) + "\n" +
		"benchmark " + decodedDigest(t, testcorpus.Generate(testcorpus.Benchmark())) + "\n"
	golden.Check(t, filepath.Join("testdata", "decoded.golden"), got,
		"(if the encoder now emits something else on purpose, rewrite the file: "+
			"go test ./encoder/otlp -run TestDecodedUnchanged -args -update)")
}
