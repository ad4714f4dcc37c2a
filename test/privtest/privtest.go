// Package privtest holds the one policy for tests that need root and eBPF:
// outside CI they skip, saying why; under CI=true (CI runs as root on a
// machine where eBPF works) a missing privilege is a failure, never a skip.
// Imported only by tests.
package privtest

import (
	"fmt"
	"os"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true).
func InCI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail skips the test outside CI and fails it in CI.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("CI=true and %s", msg)
	}
	t.Skip(msg)
}

// RequireRoot skips (or, in CI, fails) unless the test runs as root; in
// -short mode it skips outside CI.
func RequireRoot(t testing.TB) {
	t.Helper()
	if testing.Short() && !InCI() {
		t.Skip("privileged test skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		SkipOrFail(t, "not root (euid %d): the tracer needs root with eBPF capabilities", os.Geteuid())
	}
}
