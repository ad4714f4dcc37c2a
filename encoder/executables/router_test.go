package executables_test

import (
	"context"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder/executables"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/promtest"
)

// TestRouterWithoutDestinations: with no symbolizer and no uploader, a
// descriptor is closed at once (counted), and notices without one are
// counted.
func TestRouterWithoutDestinations(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	r, err := executables.New(executables.Deps{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	r.Submit(&schema.ExecutableNotice{Path: os.Args[0]}, f)
	if err := f.Close(); err == nil {
		t.Error("descriptor left open with nowhere to go")
	}
	r.Submit(&schema.ExecutableNotice{}, nil)
	r.Submit(&schema.ExecutableNotice{}, nil)
	if got := r.WithoutDescriptor(); got != 2 {
		t.Errorf("%d notices without descriptor, want 2", got)
	}
	for name, want := range map[string]float64{
		"tandem_encoder_executables_not_uploaded_total":              1,
		"tandem_encoder_executable_notices_without_descriptor_total": 2,
	} {
		if got := promtest.Value(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if _, err := executables.New(executables.Deps{Registerer: reg}); err == nil {
		t.Error("a second router registered the same metrics")
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
