package sampler

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateReportsEveryProblemWithItsField(t *testing.T) {
	c := DefaultConfig()
	c.SamplesPerSecond = 0
	c.Tracers = "python,go,cobol"
	c.OffCPUThreshold = 1.5
	c.ProbabilisticThreshold = 101
	c.IncludeEnvVars = []string{"OK", "A=B"}
	c.MapScaleFactor = 9
	c.FlushInterval = 0
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("error %q is not a *FieldError", e)
		}
		fields = append(fields, fe.Field)
	}
	want := []string{"SamplesPerSecond", "Tracers", "Tracers", "OffCPUThreshold", "ProbabilisticThreshold",
		"IncludeEnvVars", "MapScaleFactor", "FlushInterval"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields %v, want %v", fields, want)
	}
}

func TestTracerNames(t *testing.T) {
	tests := []struct {
		tracers     string
		symbolizeGo bool
		want        []string
	}{
		{"all", false, []string{"beam", "dotnet", "hotspot", "labels", "luajit", "perl", "php", "python", "ruby", "v8"}},
		{"all", true, []string{"beam", "dotnet", "go", "hotspot", "labels", "luajit", "perl", "php", "python", "ruby", "v8"}},
		{"python, Labels", false, []string{"labels", "python"}},
		{"python,go", true, []string{"go", "python"}},
		{"native", true, []string{"go"}},
		{"", false, nil},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		c.Tracers, c.SymbolizeGo = tt.tracers, tt.symbolizeGo
		if err := c.Validate(); err != nil {
			t.Errorf("%q: %v", tt.tracers, err)
		}
		if got := c.TracerNames(); !slices.Equal(got, tt.want) {
			t.Errorf("TracerNames(%q, go=%v) = %v, want %v", tt.tracers, tt.symbolizeGo, got, tt.want)
		}
	}
}

func TestHelloFromConfig(t *testing.T) {
	c := DefaultConfig()
	c.NodeName, c.OffCPUThreshold = "node-1", 0.5
	h1, h2 := baseHello(&c), baseHello(&c)
	if h1.NodeName != "node-1" || h1.SamplingFrequencyHz != 19 || h1.SamplerVersion == "" ||
		h1.OffCPUThreshold != 1<<31-1 || time.Since(time.Unix(0, h1.StartTimeUnixNano)) > time.Minute {
		t.Errorf("hello %+v", h1)
	}
	if h1.SessionID == h2.SessionID || h1.SessionID == [16]byte{} {
		t.Error("session ids are not fresh random values")
	}
}
