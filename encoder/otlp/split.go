package otlp

import (
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/schema"
)

// ErrTooLarge is returned by EncodeLimited when a single aggregated sample
// does not fit the limit.
var ErrTooLarge = errors.New("OTLP request larger than the message size limit")

// EncodeLimited encodes f as one request, or as several when one would
// exceed maxBytes serialized (0 = no limit): the flush's samples are halved
// until every request fits, each request carrying the dictionary entries
// its samples use. Every request must be handed back with Release. On error
// nothing needs releasing.
func (e *Encoder) EncodeLimited(f *aggregate.Flush, maxBytes int) ([]pprofileotlp.ExportRequest, error) {
	req := e.Encode(f)
	if maxBytes <= 0 {
		return []pprofileotlp.ExportRequest{req}, nil
	}
	var sizer pprofile.ProtoMarshaler
	var out []pprofileotlp.ExportRequest
	var rec func(sub *aggregate.Flush, req pprofileotlp.ExportRequest) error
	rec = func(sub *aggregate.Flush, req pprofileotlp.ExportRequest) error {
		size := sizer.ProfilesSize(req.Profiles())
		if size <= maxBytes {
			out = append(out, req)
			return nil
		}
		e.Release(req)
		if len(sub.Samples) <= 1 {
			return fmt.Errorf("%w: one sample takes %d bytes, limit %d", ErrTooLarge, size, maxBytes)
		}
		h := len(sub.Samples) / 2
		for _, part := range [][]aggregate.Sample{sub.Samples[:h], sub.Samples[h:]} {
			half := *sub
			half.Samples = part
			ownLinks(&half)
			if err := rec(&half, e.Encode(&half)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := rec(f, req); err != nil {
		for _, r := range out {
			e.Release(r)
		}
		return nil, err
	}
	return out, nil
}

// ownLinks gives part of a split flush the link table its samples use
// (the zero entry, then their links in first-use order) instead of the
// whole flush's, which every part would otherwise repeat: up to
// --max-links-per-flush links, about 260 KB, however small the part. The
// samples are copied with their links renumbered: the flush's own are
// shared with the other outputs.
func ownLinks(part *aggregate.Flush) {
	if len(part.Links) <= 1 {
		return
	}
	ids := make(map[uint32]uint32)
	links := []schema.TraceLink{{}}
	samples := slices.Clone(part.Samples)
	for i := range samples {
		l := samples[i].Link
		if l == 0 {
			continue
		}
		id, ok := ids[l]
		if !ok {
			id = uint32(len(links))
			links = append(links, part.Links[l])
			ids[l] = id
		}
		samples[i].Link = id
	}
	part.Links, part.Samples = links, samples
}

// OffCPUType is the OTLP sample type of off-CPU samples: the OpenTelemetry
// eBPF profiler's name, the one Pyroscope accepts per-timestamp values for.
const OffCPUType = "off_cpu"

// SampleTypeOf is encoder.SampleTypeOf with OTLP's rules, so that every
// profile has a name in receivers that name profiles by their type
// (Pyroscope reads the period type only when the period is not 0 and,
// except for CPU samples and off-CPU time, names the profile after it):
//
//	CPU sampling  samples/count         period cpu/nanoseconds 1e9/Hz
//	off-CPU       off_cpu/nanoseconds   period samples/count 0 (named by its type)
//	any other     T/U                   period T/U 1
//
// "Any other" is a probe (events/count), an origin this encoder does not
// know (unknown_origin_<n>/count) and CPU samples of a session that did not
// say its frequency (samples/count): one sample is one event, so the period
// is one of the sample type itself. A period of 0 there left Pyroscope
// without a name and it refused the profile ("invalid metric name").
func SampleTypeOf(origin schema.Origin, hz uint32) aggregate.SampleType {
	st := aggregate.SampleTypeOf(origin, hz)
	switch {
	case origin == schema.OriginOffCPU:
		st.Type = OffCPUType
	case st.Period == 0:
		st.PeriodType, st.PeriodUnit, st.Period = st.Type, st.Unit, 1
	}
	return st
}
