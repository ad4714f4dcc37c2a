// Package streamtest plays the sampler's end of a session for tests that
// drive a real encoder: it runs the real ipc.Client over a real socket,
// sends internal/synth sessions (or any batches) reliably, and waits for
// their acknowledgement; DumpTotals reads what a recording holds.
// Imported only by tests.
package streamtest
