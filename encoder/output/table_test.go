package output

import (
	"errors"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestFormatsTable checks the table itself: unique names, a known
// transport, a validator and a constructor for every format, and a setter
// for every key a format lists.
func TestFormatsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Formats {
		if s.Name == "" || seen[s.Name] {
			t.Errorf("format %q: empty or listed twice", s.Name)
		}
		seen[s.Name] = true
		if s.Transport != TransportGRPC && s.Transport != TransportFile {
			t.Errorf("format %s: unknown transport %q", s.Name, s.Transport)
		}
		if s.validate == nil || s.open == nil {
			t.Errorf("format %s: no validator or no constructor", s.Name)
		}
		if got, ok := Lookup(s.Name); !ok || got.Name != s.Name {
			t.Errorf("Lookup(%q) = %q, %v", s.Name, got.Name, ok)
		}
		for _, key := range slices.Concat(CommonKeys, s.Keys) {
			cfg := DefaultConfig("x", s.Name)
			if err := setKey(&cfg, key, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "1"}); errors.Is(err, errUnknownKey) {
				t.Errorf("format %s: key %q has no setter", s.Name, key)
			}
		}
	}
	if _, ok := Lookup("arrow-v3"); ok {
		t.Error("Lookup found a format that is not in the table")
	}
}

func TestFormatNames(t *testing.T) {
	if got, want := FormatNames(nil), "otlp, arrow-v2, arrow-v1 or pprof"; got != want {
		t.Errorf("FormatNames(nil) = %q, want %q", got, want)
	}
	if got, want := FormatNames(func(s Spec) bool { return !s.Remote }), "pprof"; got != want {
		t.Errorf("local formats = %q, want %q", got, want)
	}
}

func TestSymbolOutput(t *testing.T) {
	cfg := func(name, format string) Config { return DefaultConfig(name, format) }
	for _, tc := range []struct {
		outs []Config
		want string // "" = none
	}{
		{[]Config{cfg("files", FormatPprof)}, ""},
		{[]Config{cfg("files", FormatPprof), cfg("collector", FormatOTLP)}, "collector"},
		{[]Config{cfg("collector", FormatOTLP), cfg("parca", FormatArrowV1), cfg("parca2", FormatArrowV2)}, "parca"},
		{nil, ""},
	} {
		got, ok := SymbolOutput(tc.outs)
		if ok != (tc.want != "") || got.Name != tc.want {
			t.Errorf("SymbolOutput(%d outputs) = %q, %v; want %q", len(tc.outs), got.Name, ok, tc.want)
		}
	}
}
