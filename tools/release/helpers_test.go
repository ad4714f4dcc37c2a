package release

import (
	"os"
	"runtime"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

type chartT = chart.Chart

// src0 is a fixed source for tests that need no build.
var src0 = Source{Version: "0.1.0", Revision: "0123456789abcdef0123456789abcdef01234567", Created: time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)}

func loadPackagedChart(t *testing.T, path string) *chart.Chart {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ch, err := loader.LoadArchive(f)
	if err != nil {
		t.Fatalf("load packaged chart %s: %v", path, err)
	}
	return ch
}

func runtimeArch() string { return runtime.GOARCH }
