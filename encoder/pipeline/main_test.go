package pipeline_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/tandem-profiler/tandem/encoder/export"
)

func TestMain(m *testing.M) {
	export.RegisterGzip() // as cmd/encoder's main does
	goleak.VerifyTestMain(m)
}
