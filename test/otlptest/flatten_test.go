package otlptest

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
)

// validRequest builds the smallest request the decoder accepts: one
// resource, one profile, one sample of one native frame in a mapping.
func validRequest() pprofile.Profiles {
	p := pprofile.NewProfiles()
	d := p.Dictionary()
	for _, s := range []string{"", "samples", "count", "cpu", "nanoseconds", "profile.frame.type", "native",
		"libc.so.6", "process.executable.build_id.gnu", "abc123", "thread.id"} {
		d.StringTable().Append(s)
	}
	d.MappingTable().AppendEmpty()
	d.FunctionTable().AppendEmpty()
	d.LocationTable().AppendEmpty()
	d.LinkTable().AppendEmpty()
	d.AttributeTable().AppendEmpty()
	d.StackTable().AppendEmpty()

	frameType := d.AttributeTable().AppendEmpty() // 1
	frameType.SetKeyStrindex(5)
	frameType.Value().SetStr("native")
	buildID := d.AttributeTable().AppendEmpty() // 2
	buildID.SetKeyStrindex(8)
	buildID.Value().SetStr("abc123")
	tid := d.AttributeTable().AppendEmpty() // 3
	tid.SetKeyStrindex(10)
	tid.Value().SetInt(42)

	m := d.MappingTable().AppendEmpty() // 1
	m.SetFilenameStrindex(7)
	m.AttributeIndices().Append(2)
	loc := d.LocationTable().AppendEmpty() // 1
	loc.SetMappingIndex(1)
	loc.SetAddress(0x1234)
	loc.AttributeIndices().Append(1)
	d.StackTable().AppendEmpty().LocationIndices().Append(1) // 1

	rp := p.ResourceProfiles().AppendEmpty()
	rp.Resource().Attributes().PutStr("service.name", "svc")
	rp.Resource().Attributes().PutInt("process.pid", 7)
	prof := rp.ScopeProfiles().AppendEmpty().Profiles().AppendEmpty()
	prof.SampleType().SetTypeStrindex(1)
	prof.SampleType().SetUnitStrindex(2)
	prof.PeriodType().SetTypeStrindex(3)
	prof.PeriodType().SetUnitStrindex(4)
	prof.SetPeriod(52631578)
	prof.SetTime(1000)
	prof.SetDurationNano(1000)
	s := prof.Samples().AppendEmpty()
	s.SetStackIndex(1)
	s.AttributeIndices().Append(3)
	s.TimestampsUnixNano().Append(1500)
	return p
}

func firstSample(p pprofile.Profiles) pprofile.Sample {
	return p.ResourceProfiles().At(0).ScopeProfiles().At(0).Profiles().At(0).Samples().At(0)
}

func TestDecodeValid(t *testing.T) {
	samples, err := Flatten(validRequest())
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 1 {
		t.Fatalf("%d samples, want 1", len(samples))
	}
	s := samples[0]
	want := Frame{Type: "native", Address: 0x1234, MappingFile: "libc.so.6", BuildID: "abc123", GNUBuildID: "abc123"}
	if len(s.Frames) != 1 || s.Frames[0] != want {
		t.Errorf("frames = %+v, want [%+v]", s.Frames, want)
	}
	if s.Attributes["thread.id"] != "42" || s.Resource["process.pid"] != "7" || s.Total() != 1 {
		t.Errorf("sample = %+v", s)
	}
}

func TestDecodeLink(t *testing.T) {
	p := validRequest()
	l := p.Dictionary().LinkTable().AppendEmpty()
	l.SetTraceID(pcommon.TraceID{0x4b, 0xf9, 15: 0x36})
	l.SetSpanID(pcommon.SpanID{0xaa, 7: 0xb7})
	firstSample(p).SetLinkIndex(1)
	samples, err := Flatten(p)
	if err != nil {
		t.Fatal(err)
	}
	if s := samples[0]; s.TraceID != "4bf90000000000000000000000000036" || s.SpanID != "aa000000000000b7" {
		t.Errorf("link = %q %q", s.TraceID, s.SpanID)
	}
}

// TestDecodeRejects: every invariant the decoder claims to check, broken
// one at a time, is reported by name.
func TestDecodeRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(p pprofile.Profiles)
		want   string
	}{
		{"string 0", func(p pprofile.Profiles) { p.Dictionary().StringTable().SetAt(0, "x") }, "string table entry 0"},
		{"mapping 0", func(p pprofile.Profiles) { p.Dictionary().MappingTable().At(0).SetMemoryLimit(1) }, "mapping 0"},
		{"attribute without key", func(p pprofile.Profiles) { p.Dictionary().AttributeTable().At(1).SetKeyStrindex(0) }, "attribute 1 has no key"},
		{"attribute without value", func(p pprofile.Profiles) {
			pcommon.NewValueEmpty().CopyTo(p.Dictionary().AttributeTable().At(1).Value())
		}, "attribute 1 has no value"},
		{"stack index", func(p pprofile.Profiles) { firstSample(p).SetStackIndex(9) }, "stack index 9 out of range"},
		{"location index", func(p pprofile.Profiles) { p.Dictionary().StackTable().At(1).LocationIndices().SetAt(0, 5) }, "location index 5"},
		{"untyped location", func(p pprofile.Profiles) { p.Dictionary().LocationTable().At(1).AttributeIndices().FromRaw(nil) }, "no profile.frame.type"},
		{"no service.name", func(p pprofile.Profiles) { p.ResourceProfiles().At(0).Resource().Attributes().Remove("service.name") }, "without service.name"},
		{"pid as string", func(p pprofile.Profiles) {
			p.ResourceProfiles().At(0).Resource().Attributes().PutStr("process.pid", "7")
		}, `"process.pid" is a Str, want an int`},
		{"timestamp outside", func(p pprofile.Profiles) { firstSample(p).TimestampsUnixNano().SetAt(0, 5000) }, "outside the profile's"},
		{"values without timestamps", func(p pprofile.Profiles) { firstSample(p).Values().Append(1, 2) }, "2 values and 1 timestamps"},
		{"empty sample", func(p pprofile.Profiles) { firstSample(p).TimestampsUnixNano().FromRaw(nil) }, "neither values nor timestamps"},
		{"link index", func(p pprofile.Profiles) { firstSample(p).SetLinkIndex(1) }, "link index 1 out of range"},
		{"link without span id", func(p pprofile.Profiles) {
			p.Dictionary().LinkTable().AppendEmpty().SetTraceID(pcommon.TraceID{1})
		}, "link 1 has an empty trace or span id"},
		{"link twice", func(p pprofile.Profiles) {
			for range 2 {
				l := p.Dictionary().LinkTable().AppendEmpty()
				l.SetTraceID(pcommon.TraceID{1})
				l.SetSpanID(pcommon.SpanID{2})
			}
		}, "link 2 repeats link 1"},
		{"incomplete type", func(p pprofile.Profiles) {
			p.ResourceProfiles().At(0).ScopeProfiles().At(0).Profiles().At(0).PeriodType().SetUnitStrindex(0)
		}, "incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := validRequest()
			tc.mutate(p)
			_, err := Decode(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Decode error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestDecodeRejectsIndexedResourceAttributes: pdata's own ProtoMarshaler
// sends resource attributes as string-table references (key_strindex,
// string_value_strindex). A gRPC receiver built on pdata gets them
// unresolved, Parca rejects the request (empty key) and Pyroscope finds no
// service.name; the decoder rejects them as Parca does.
func TestDecodeRejectsIndexedResourceAttributes(t *testing.T) {
	var m pprofile.ProtoMarshaler
	buf, err := m.MarshalProfiles(validRequest())
	if err != nil {
		t.Fatal(err)
	}
	req := pprofileotlp.NewExportRequest()
	if err := req.UnmarshalProto(buf); err != nil {
		t.Fatal(err)
	}
	_, err = Decode(req.Profiles())
	if err == nil || !strings.Contains(err.Error(), "attribute with an empty key") {
		t.Errorf("Decode error = %v, want the resource's empty keys reported", err)
	}
	// The same request marshaled as the encoder does (inline) decodes.
	buf, err = pprofileotlp.NewExportRequestFromProfiles(validRequest()).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	req = pprofileotlp.NewExportRequest()
	if err := req.UnmarshalProto(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(req.Profiles()); err != nil {
		t.Errorf("inline request: %v", err)
	}
}
