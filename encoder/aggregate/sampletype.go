package aggregate

import (
	"strconv"

	"github.com/tandem-profiler/tandem/schema"
)

// SampleType says what a sample's values mean, in the vocabulary every
// output format shares (pprof's ValueType pairs).
type SampleType struct {
	Type, Unit             string
	PeriodType, PeriodUnit string
	// Period is the sampling period in PeriodUnit; 0 = not periodic or
	// unknown.
	Period int64
}

// SampleTypeOf returns the sample type of an origin sampled at hz (the
// session's Hello.SamplingFrequencyHz). Every origin gets one, so nothing is
// dropped for lack of a name:
//
//	cpu sampling:  samples/count, period cpu/nanoseconds = 1e9/hz
//	off-CPU:       wallclock/nanoseconds, period samples/count 0
//	probe:         events/count, period samples/count 0
//	other origin:  unknown_origin_<n>/count, period samples/count 0
//
// Off-CPU time is named wallclock/nanoseconds here, in the Arrow formats
// and in pprof files: it is the name parca-agent writes in its Arrow records
// and the one the Parca UI lists (as "Off-CPU"). OTLP renames it off_cpu
// (otlp.SampleTypeOf), the OpenTelemetry eBPF profiler's name, which
// Pyroscope requires. See docs/formats.md.
func SampleTypeOf(origin schema.Origin, hz uint32) SampleType {
	switch origin {
	case schema.OriginCPUSampling:
		st := SampleType{Type: "samples", Unit: "count", PeriodType: "cpu", PeriodUnit: "nanoseconds"}
		if hz > 0 {
			st.Period = 1e9 / int64(hz)
		}
		return st
	case schema.OriginOffCPU:
		return SampleType{Type: "wallclock", Unit: "nanoseconds", PeriodType: "samples", PeriodUnit: "count"}
	case schema.OriginProbe:
		return SampleType{Type: "events", Unit: "count", PeriodType: "samples", PeriodUnit: "count"}
	default:
		return SampleType{
			Type: "unknown_origin_" + strconv.FormatUint(uint64(origin), 10), Unit: "count",
			PeriodType: "samples", PeriodUnit: "count",
		}
	}
}
