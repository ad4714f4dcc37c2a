package otlp_test

import (
	"testing"

	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/otlp"
	"github.com/tandem-profiler/tandem/schema"
	recvtest "github.com/tandem-profiler/tandem/test/otlptest"
)

// TestEveryOriginHasAType: every origin the stream can carry (CPU,
// off-CPU, probe, unknown), with the session's frequency known or not, gets
// a complete sample and period type and a name in receivers that name
// profiles by their type (Pyroscope refused probe profiles whose period was
// 0: "invalid metric name").
func TestEveryOriginHasAType(t *testing.T) {
	tests := []struct {
		name   string
		origin schema.Origin
		hz     uint32
		want   string // "type/unit period_type/period_unit period"
		named  string
	}{
		{"cpu", schema.OriginCPUSampling, 97, "samples/count cpu/nanoseconds 10309278", "process_cpu"},
		{"cpu without a frequency", schema.OriginCPUSampling, 0, "samples/count samples/count 1", "samples"},
		{"off-cpu", schema.OriginOffCPU, 97, "off_cpu/nanoseconds samples/count 0", "off_cpu"},
		{"probe", schema.OriginProbe, 97, "events/count events/count 1", "events"},
		{"unknown", 9, 97, "unknown_origin_9/count unknown_origin_9/count 1", "unknown_origin_9"},
		{"unknown, highest", 255, 0, "unknown_origin_255/count unknown_origin_255/count 1", "unknown_origin_255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := otlp.SampleTypeOf(tt.origin, tt.hz)
			p := recvtest.Profile{SampleType: st.Type, SampleUnit: st.Unit, PeriodType: st.PeriodType, PeriodUnit: st.PeriodUnit, Period: st.Period}
			if got := p.TypeString(); got != tt.want {
				t.Errorf("type %q, want %q", got, tt.want)
			}
			name, err := recvtest.ProfileName(p)
			if err != nil || name != tt.named {
				t.Errorf("named %q (%v), want %q", name, err, tt.named)
			}
		})
	}
}

// TestEncodedProfilesHaveNames encodes a corpus carrying every origin,
// with and without the session's frequency, and checks every profile as a
// receiver naming profiles by their type would.
func TestEncodedProfilesHaveNames(t *testing.T) {
	for _, hz := range []uint32{97, 0} {
		c := testcorpus.Generate(testcorpus.Small())
		c.Hello.SamplingFrequencyHz = hz
		req, err := otlp.Encode(flushtest.Default(t, c), otlp.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := recvtest.Decode(req.Profiles())
		if err != nil {
			t.Fatal(err)
		}
		origins := map[string]bool{}
		for _, r := range decoded.Resources {
			for _, p := range r.Profiles {
				origins[p.SampleType] = true
				if _, err := recvtest.ProfileName(p); err != nil {
					t.Errorf("hz %d: %v", hz, err)
				}
			}
		}
		for _, typ := range []string{"samples", otlp.OffCPUType, "events", "unknown_origin_9"} {
			if !origins[typ] {
				t.Errorf("hz %d: the corpus gave no %s profile (types %v)", hz, typ, origins)
			}
		}
	}
}
