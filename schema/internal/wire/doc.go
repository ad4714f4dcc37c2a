// Package wire is the Go code capnpc-go generates from stream.capnp, the
// documented Cap'n Proto schema of Tandem's sampler -> encoder stream. Only
// package schema uses it; regenerate it with `make generate`.
package wire
