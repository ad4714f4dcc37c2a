// Package otlptest is a test aid: an in-process OTLP/profiles gRPC receiver
// built from the real pprofileotlp service definition, and the one strict
// decoder of OTLP/profiles requests the tests share. Decode checks a request
// the way a strict receiver would (the dictionary's zero entries, every
// index in range, typed locations, resource identity, profile types, sample
// timestamps) and resolves every sample through the dictionary back to
// plain frames and attributes. It is imported only by tests.
package otlptest
