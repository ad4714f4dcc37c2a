package output

import (
	"strings"
	"testing"
	"time"
)

// TestFormatsTable checks the table itself: unique names, a known
// transport, a validator and a constructor for every format.
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
	}
	if _, ok := Lookup("arrow-v3"); ok {
		t.Error("Lookup found a format that is not in the table")
	}
}

// TestSettings checks the settings table Config's tags make: unique keys
// and flags, help for each, a field of the setting's type, and the keys
// each format takes.
func TestSettings(t *testing.T) {
	keys, flags := map[string]bool{}, map[string]bool{}
	var cfg Config
	for _, s := range Settings() {
		if s.Key != "" && keys[s.Key] || s.Flag != "" && flags[s.Flag] {
			t.Errorf("setting %q/--%s: key or flag listed twice", s.Key, s.Flag)
		}
		keys[s.Key], flags[s.Flag] = true, true
		if s.Help == "" {
			t.Errorf("setting %q/--%s: no help", s.Key, s.Flag)
		}
		if s.EveryOutput && s.Flag == "" {
			t.Errorf("setting %q: every output's default, but no flag", s.Key)
		}
		var ok bool
		switch s.Field(&cfg).(type) {
		case *string:
			ok = s.Type == "string"
		case *bool:
			ok = s.Type == "bool"
		case *int:
			ok = s.Type == "int"
		case *time.Duration:
			ok = s.Type == "duration"
		case *map[string]string:
			ok = s.Type == "map"
		}
		if !ok {
			t.Errorf("setting %q/--%s: field %T is not of type %s", s.Key, s.Flag, s.Field(&cfg), s.Type)
		}
	}
	otlpSpec, _ := Lookup(FormatOTLP)
	pprofSpec, _ := Lookup(FormatPprof)
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{otlpSpec, "name format address insecure insecure_skip_verify ca_file client_cert client_key bearer_token_file headers compression queue_size queue_bytes rpc_timeout"},
		{pprofSpec, "name format dir max_bytes queue_size queue_bytes"},
	} {
		if got := strings.Join(tc.spec.Keys(), " "); got != tc.want {
			t.Errorf("%s keys:\n got %s\nwant %s", tc.spec.Name, got, tc.want)
		}
	}
	c := Config{}
	*Settings()[0].Field(&c).(*string) = "x"
	if c.Name != "x" {
		t.Errorf("the first setting's Field is not Config.Name")
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
