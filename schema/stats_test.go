package schema

import (
	"reflect"
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
