package debuginfo

import (
	"testing"

	"github.com/tandem-profiler/tandem/test/parcatest"
)

// startParcaServer serves parcatest's DebuginfoService, which follows the
// Parca server's decision table (docs/parca-protocols.md §2.4) and
// symbolizes what it receives as the server does; signed hands out signed
// URLs instead of the gRPC stream.
func startParcaServer(t testing.TB, signed bool) *parcatest.SymbolStore {
	t.Helper()
	s, _ := parcatest.StartSymbolStoreConfig(t, parcatest.SymbolStoreConfig{SignedURL: signed})
	return s
}

// The client compares the server's in-progress reason.
func TestReasonUploadInProgress(t *testing.T) {
	if ReasonUploadInProgress != parcatest.ReasonUploadInProgress {
		t.Errorf("ReasonUploadInProgress %q, the server says %q", ReasonUploadInProgress, parcatest.ReasonUploadInProgress)
	}
}
