// Package schema defines what crosses the sampler -> encoder socket and what a
// dump holds: the domain types (Hello, Batch, ExecutableNotice, LossReport,
// Goodbye), their Cap'n Proto encoding, and a BatchBuilder that de-duplicates
// batch-local tables.
//
// The Cap'n Proto schema, documented field by field, is
// internal/wire/stream.capnp; the generated Go code next to it is used only by
// this package, so the rest of Tandem sees plain Go types. `make generate`
// regenerates it and CI fails when the committed code is stale.
//
// Decoders treat their input as untrusted: every message is read with a
// traversal limit proportional to its size and the default nesting limit,
// every list length is bounded before anything is allocated, and every index
// a decoded Batch holds is checked, so a nil error means consumers can index
// the tables without further checks. Decode errors wrap ErrMalformed.
//
// EncodeBatch writes the packed batch layout of protocol 1.2: the big tables
// as fixed-size little-endian records, decoded in tight loops. DecodeBatch
// also reads the list layout of 1.0 and 1.1, so older streams and dumps stay
// readable (docs/ipc-format.md, "Batch layouts").
//
// Protocol 1.4 adds per-connection dictionaries (dictionary.go):
// DictionaryChunk frames define strings, mappings, frames and stacks once
// per connection, a receiver's Dictionary applies them (Apply checks each
// chunk's generation, bases and references), and a layout-2 batch
// (EncodeDictionaryBatch) carries only processes and samples that refer to
// it. DecodeBatchWith reads it against the connection's Dictionary; the
// decoded batch shares the dictionary's tables.
//
// Protocol 1.5 adds trace links: Batch.Links and Sample.Link, the trace id
// and span id the tracer found for a sample, one packed record per linked
// sample (layouts 1 and 2), none for the others.
//
// Encoders and decoders are safe for concurrent use; a BatchBuilder and a
// Dictionary are not.
package schema
