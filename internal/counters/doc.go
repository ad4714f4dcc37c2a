// Package counters keeps a process's own cumulative counters and gauges,
// and reads them all back as one snapshot, without any exposition format
// or network code. It exists for tandem-sampler: the privileged process
// sends its counters in-band (a FrameStats) and logs them, and the
// encoder exports them; linking a metrics client library there would
// bring HTTP and protobuf code into the root process for nothing.
//
// A Counter or Gauge is usable on its own (its zero value is ready); a
// Set names them for snapshots. Series are identified by name and label
// pairs; registering a series twice is an error, never a silent merge.
// Counters, gauges and sets are safe for concurrent use.
package counters
