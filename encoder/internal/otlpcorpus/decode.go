// Package otlpcorpus turns OTLP/profiles requests back into the test corpus's
// events, for the encoder's tests: the strict checks and the resolution
// through the dictionary are test/otlptest's; this package adds what
// the corpus knows (origins from sample types, the attributes the encoder
// may emit, frame kinds). It is imported only by _test.go files.
package otlpcorpus

import (
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/otlptest"
)

// Resource is a decoded resource's attributes.
type Resource struct {
	Attrs map[string]string
}

// Result is a decoded request.
type Result struct {
	Events    []testcorpus.Event
	Resources []Resource
	// ProfileTypes lists "type/unit period_type/period_unit period" of every
	// Profile, in order.
	ProfileTypes []string
}

var frameKinds = func() map[string]schema.FrameKind {
	m := map[string]schema.FrameKind{}
	for k := schema.FrameKind(0); k <= schema.FrameLuaJIT; k++ {
		if _, ok := m[k.String()]; !ok {
			m[k.String()] = k
		}
	}
	return m
}()

// Decode checks p with test/otlptest.Decode, then maps every sample
// back to corpus events, also failing on profiles without a name
// (otlptest.ProfileName), on sample types, sample attributes
// and frame types the encoder never emits and on locations with more than
// one line. It returns an error listing the first problems found.
func Decode(p pprofile.Profiles) (*Result, error) {
	req, err := otlptest.Decode(p)
	if err != nil {
		return nil, err
	}
	var errs []string
	errorf := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	res := &Result{}
	for _, r := range req.Resources {
		res.Resources = append(res.Resources, Resource{Attrs: r.Attributes})
		pid, _ := strconv.ParseUint(r.Attributes["process.pid"], 10, 32)
		for _, prof := range r.Profiles {
			res.ProfileTypes = append(res.ProfileTypes, prof.TypeString())
			origin, err := originOf(prof.SampleType)
			if err != nil {
				errorf("%v", err)
			}
			if _, err := otlptest.ProfileName(prof); err != nil {
				errorf("%v", err)
			}
			for _, s := range prof.Samples {
				ev := testcorpus.Event{PID: uint32(pid), Origin: origin, Stack: stackString(s.Frames, errorf)}
				var labels [][2]string
				for k, v := range s.Attributes {
					switch {
					case k == "thread.id":
						ev.TID = parseUint32(v, k, errorf)
					case k == "thread.name":
						ev.ThreadName = v
					case k == "cpu.logical_number":
						ev.CPU = parseUint32(v, k, errorf)
					case strings.HasPrefix(k, "process.context.label."):
						labels = append(labels, [2]string{strings.TrimPrefix(k, "process.context.label."), v})
					default:
						errorf("unexpected sample attribute %q", k)
					}
				}
				ev.Labels = testcorpus.LabelString(labels)
				for i, t := range s.Timestamps {
					e := ev
					e.TimestampNS = int64(t)
					e.Value = 1
					if len(s.Values) > 0 {
						e.Value = s.Values[i]
					}
					res.Events = append(res.Events, e)
				}
			}
		}
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("invalid request: %s", strings.Join(errs, "; "))
	}
	return res, nil
}

func originOf(sampleType string) (schema.Origin, error) {
	switch {
	case sampleType == "samples":
		return schema.OriginCPUSampling, nil
	case sampleType == "off_cpu":
		return schema.OriginOffCPU, nil
	case sampleType == "events":
		return schema.OriginProbe, nil
	case strings.HasPrefix(sampleType, "unknown_origin_"):
		n, err := strconv.Atoi(strings.TrimPrefix(sampleType, "unknown_origin_"))
		if err != nil {
			return 0, fmt.Errorf("bad sample type %q", sampleType)
		}
		return schema.Origin(n), nil
	}
	return 0, fmt.Errorf("unexpected sample type %q", sampleType)
}

func stackString(frames []otlptest.Frame, errorf func(string, ...any)) string {
	out := make([]testcorpus.Frame, len(frames))
	for i, f := range frames {
		fr := testcorpus.Frame{Address: f.Address, MappingFile: f.MappingFile, MappingBuildID: f.GNUBuildID}
		switch kind, ok := frameKinds[f.Type]; {
		case f.Type == "abort-marker":
			fr.Kind, fr.Error = schema.FrameUnknown, true
		case ok:
			fr.Kind = kind
		default:
			errorf("unknown frame type %q", f.Type)
		}
		if f.Lines > 1 {
			errorf("a location has %d lines", f.Lines)
		}
		if f.Lines == 1 {
			fr.Line, fr.Function, fr.File = uint32(f.Line), f.Function, f.File
		}
		out[i] = fr
	}
	return testcorpus.StackString(out)
}

func parseUint32(v, key string, errorf func(string, ...any)) uint32 {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		errorf("sample attribute %s=%q is not a uint32", key, v)
	}
	return uint32(n)
}
