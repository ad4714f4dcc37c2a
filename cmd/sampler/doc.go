// Command tandem-sampler is Tandem's privileged half. It runs the
// OpenTelemetry eBPF profiler through package sampler and streams
// classified samples, loss reports and executables (with their file
// descriptors) to tandem-encoder over a Unix socket, and/or records the
// same stream to a dump file (--record).
//
// It opens no network connection and no port: its own metrics are logged
// (--metrics-log-interval and at exit). SIGTERM and SIGINT stop the tracer,
// flush what is queued within --shutdown-timeout, send a goodbye and exit
// 0; SIGHUP is logged and ignored. Exit status 2 means bad flags, 1 any
// other failure.
package main
