// Package otlptest is a test aid: an in-process OTLP/profiles gRPC receiver
// built from the real pprofileotlp service definition, and a flattener that
// resolves every sample of a request through its dictionary back to plain
// frames and attributes, checking the dictionary invariants on the way
// (string 0 empty, mapping 0 the "no mapping" sentinel, every index in
// range). It is imported only by tests.
package otlptest
