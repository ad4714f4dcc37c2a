// Package e2e holds Tandem's end-to-end tests: both binaries built with the
// Makefile's memlock overlay, the encoder running as an unprivileged uid and
// exporting to an in-process OTLP receiver, the sampler profiling real
// workloads on this machine with eBPF. They need root and eBPF; they skip
// outside CI when those are missing and fail inside CI (CI=true).
//
// Most tests run beside each other (t.Parallel, as many at once as
// -parallel, GOMAXPROCS by default): each has its own pair, socket,
// receivers and directories, and checks only what it can tell apart on a
// shared machine (its own workloads' samples, by pid or name; its own
// processes' descriptors and counters), never a CPU share or the
// machine's total. Every sampler profiles the whole machine, so a test
// that measures what the load changes runs alone, before the others:
// TestEncoderStopped (the sampler's RSS, and a sample rate high enough
// to overflow its buffer).
package e2e
