package debuginfov1alpha1

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestWireNumbers pins every field and enum number against the reference
// tables (docs/parca-protocols.md §2.2, §2.3): a typo in debuginfo.proto
// would otherwise only show up against a real Parca server.
func TestWireNumbers(t *testing.T) {
	fields := map[string]map[string]protoreflect.FieldNumber{
		"ShouldInitiateUploadRequest":  {"build_id": 1, "hash": 2, "force": 3, "type": 4, "build_id_type": 5},
		"ShouldInitiateUploadResponse": {"should_initiate_upload": 1, "reason": 2},
		"InitiateUploadRequest":        {"build_id": 1, "size": 2, "hash": 3, "force": 4, "type": 5, "build_id_type": 6},
		"InitiateUploadResponse":       {"upload_instructions": 1},
		"UploadInstructions":           {"build_id": 1, "upload_id": 2, "upload_strategy": 3, "signed_url": 4, "type": 5},
		"MarkUploadFinishedRequest":    {"build_id": 1, "upload_id": 2, "type": 3},
		"MarkUploadFinishedResponse":   {},
		"UploadRequest":                {"info": 1, "chunk_data": 2},
		"UploadInfo":                   {"build_id": 1, "upload_id": 2, "type": 3},
		"UploadResponse":               {"build_id": 1, "size": 2},
		"Debuginfo":                    {"build_id": 1, "source": 2, "upload": 3, "quality": 4, "debuginfod_servers": 5, "type": 6},
		"DebuginfoUpload":              {"id": 1, "hash": 2, "state": 3, "started_at": 4, "finished_at": 5},
		"DebuginfoQuality":             {"not_valid_elf": 1, "has_dwarf": 2, "has_go_pclntab": 3, "has_symtab": 4, "has_dynsym": 5},
	}
	fd := File_parca_debuginfo_v1alpha1_debuginfo_proto
	if got := fd.Package(); got != "parca.debuginfo.v1alpha1" {
		t.Fatalf("package %s", got)
	}
	if n := fd.Messages().Len(); n != len(fields) {
		t.Errorf("%d messages, want %d", n, len(fields))
	}
	for name, want := range fields {
		md := fd.Messages().ByName(protoreflect.Name(name))
		if md == nil {
			t.Errorf("message %s missing", name)
			continue
		}
		if md.Fields().Len() != len(want) {
			t.Errorf("%s: %d fields, want %d", name, md.Fields().Len(), len(want))
		}
		for fname, num := range want {
			f := md.Fields().ByName(protoreflect.Name(fname))
			if f == nil || f.Number() != num {
				t.Errorf("%s.%s: want number %d, got %v", name, fname, num, f)
			}
		}
	}
	if o := fd.Messages().ByName("UploadRequest").Oneofs().ByName("data"); o == nil || o.Fields().Len() != 2 {
		t.Errorf("UploadRequest: oneof data with info and chunk_data expected")
	}

	enums := map[string]map[string]protoreflect.EnumNumber{
		"DebuginfoType": {"DEBUGINFO_TYPE_DEBUGINFO_UNSPECIFIED": 0, "DEBUGINFO_TYPE_EXECUTABLE": 1, "DEBUGINFO_TYPE_SOURCES": 2, "DEBUGINFO_TYPE_SOURCE_MAP": 3},
		"BuildIDType": {"BUILD_ID_TYPE_UNKNOWN_UNSPECIFIED": 0, "BUILD_ID_TYPE_GNU": 1, "BUILD_ID_TYPE_HASH": 2, "BUILD_ID_TYPE_GO": 3,
			"BUILD_ID_TYPE_SOURCE_MAP_DEBUG_ID": 4},
	}
	nested := map[[2]string]map[string]protoreflect.EnumNumber{
		{"UploadInstructions", "UploadStrategy"}: {"UPLOAD_STRATEGY_UNSPECIFIED": 0, "UPLOAD_STRATEGY_GRPC": 1, "UPLOAD_STRATEGY_SIGNED_URL": 2},
		{"Debuginfo", "Source"}:                  {"SOURCE_UNKNOWN_UNSPECIFIED": 0, "SOURCE_UPLOAD": 1, "SOURCE_DEBUGINFOD": 2},
		{"DebuginfoUpload", "State"}:             {"STATE_UNKNOWN_UNSPECIFIED": 0, "STATE_UPLOADING": 1, "STATE_UPLOADED": 2, "STATE_PURGED": 3},
	}
	check := func(ed protoreflect.EnumDescriptor, name string, want map[string]protoreflect.EnumNumber) {
		if ed == nil {
			t.Errorf("enum %s missing", name)
			return
		}
		if ed.Values().Len() != len(want) {
			t.Errorf("enum %s: %d values, want %d", name, ed.Values().Len(), len(want))
		}
		for v, num := range want {
			if ev := ed.Values().ByName(protoreflect.Name(v)); ev == nil || ev.Number() != num {
				t.Errorf("%s.%s: want %d", name, v, num)
			}
		}
	}
	for name, want := range enums {
		check(fd.Enums().ByName(protoreflect.Name(name)), name, want)
	}
	for k, want := range nested {
		check(fd.Messages().ByName(protoreflect.Name(k[0])).Enums().ByName(protoreflect.Name(k[1])), k[0]+"."+k[1], want)
	}
	sd := fd.Services().ByName("DebuginfoService")
	if sd == nil {
		t.Fatal("DebuginfoService missing")
	}
	for _, m := range []struct {
		name               string
		in, out            string
		clientStream, srvS bool
	}{
		{"Upload", "UploadRequest", "UploadResponse", true, false},
		{"ShouldInitiateUpload", "ShouldInitiateUploadRequest", "ShouldInitiateUploadResponse", false, false},
		{"InitiateUpload", "InitiateUploadRequest", "InitiateUploadResponse", false, false},
		{"MarkUploadFinished", "MarkUploadFinishedRequest", "MarkUploadFinishedResponse", false, false},
	} {
		md := sd.Methods().ByName(protoreflect.Name(m.name))
		if md == nil || string(md.Input().Name()) != m.in || string(md.Output().Name()) != m.out ||
			md.IsStreamingClient() != m.clientStream || md.IsStreamingServer() != m.srvS {
			t.Errorf("method %s: want %s -> %s (client stream %v)", m.name, m.in, m.out, m.clientStream)
		}
	}
	if sd.Methods().Len() != 4 {
		t.Errorf("%d methods, want 4", sd.Methods().Len())
	}
}
