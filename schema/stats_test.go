package schema

import (
	"math"
	"reflect"
	"slices"
	"testing"
)

func TestSamplerStatsRoundTrip(t *testing.T) {
	in := SamplerStats{
		TimeUnixNano: 1764460800123456789,
		Metrics: []SamplerMetric{
			{Name: "tandem_ipc_client_evicted_samples_total", Value: 128, Counter: true},
			{Name: "tandem_sampler_reporter_dropped_total", Labels: []MetricLabel{{Name: "reason", Value: "queue_full"}}, Value: 3, Counter: true},
			{Name: "tandem_ipc_client_unacked_bytes", Value: 262144},
		},
	}
	payload, err := EncodeSamplerStats(&in, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := DecodeSamplerStats(payload)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}
	if _, err := DecodeSamplerStats(payload[:len(payload)/2]); err == nil {
		t.Error("a truncated payload decoded without error")
	}
	empty, err := EncodeSamplerStats(&SamplerStats{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeSamplerStats(empty); err != nil || len(got.Metrics) != 0 {
		t.Errorf("empty stats: %+v, %v", got, err)
	}
}

func FuzzDecodeSamplerStats(f *testing.F) {
	for _, st := range []SamplerStats{
		{},
		{TimeUnixNano: 1, Metrics: []SamplerMetric{
			{Name: "tandem_sampler_reporter_dropped_total", Labels: []MetricLabel{{Name: "reason", Value: "queue_full"}}, Value: 3, Counter: true},
			{Name: "tandem_ipc_client_unacked_bytes", Value: math.NaN()},
		}},
	} {
		data, err := EncodeSamplerStats(&st, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, DecodeSamplerStats, EncodeSamplerStats, sameStats)
	})
}

// sameStats is reflect.DeepEqual with values compared bit for bit, so that
// a NaN the sampler sent equals itself.
func sameStats(a, b SamplerStats) bool {
	return a.TimeUnixNano == b.TimeUnixNano && slices.EqualFunc(a.Metrics, b.Metrics, func(x, y SamplerMetric) bool {
		return x.Name == y.Name && x.Counter == y.Counter && math.Float64bits(x.Value) == math.Float64bits(y.Value) &&
			slices.Equal(x.Labels, y.Labels)
	})
}
