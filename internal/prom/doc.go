// Package prom holds what Tandem's components share about their
// Prometheus metrics: Register, the one way a component registers its
// collectors (nil registry: none; the first failure is an error naming the
// component), and Shared, the same for a component a process may hold
// several of on one registry, whose instances share the collectors.
// Reading a metric in a test is test/promtest.Value.
package prom
