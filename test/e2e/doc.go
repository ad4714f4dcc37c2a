// Package e2e holds Tandem's end-to-end tests: both binaries built with the
// Makefile's memlock overlay, the encoder running as an unprivileged uid and
// exporting to an in-process OTLP receiver, the sampler profiling real
// workloads on this machine with eBPF. They need root and eBPF; they skip
// outside CI when those are missing and fail inside CI (CI=true).
package e2e
