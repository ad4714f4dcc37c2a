// Package harness is what Tandem's whole-system suites (test/e2e, test/vm,
// test/cluster) share: the module's root; the Makefile's build
// flags, read from `make build-env`, their one source; builds of the
// commands and test programs with those flags, for this machine or
// another GOARCH; child processes whose exit fails a waiting test at once;
// and the pair starter (the encoder unprivileged, then the sampler, each
// waited for on its readiness signal, never on log text or a fixed sleep).
//
// Waits poll through test/waittest. Builds made into the shared directory
// are removed by Main, which a suite's TestMain calls; Build refuses to
// leave them behind without it. Everything here fails the calling test
// rather than returning errors, except Launch, which may be called off
// the test's goroutine. It is imported only by tests.
package harness
