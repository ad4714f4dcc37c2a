// Package ingest turns a stream of ipc frames (a live sampler connection or
// a dump) into calls on the encoder's Sink, and keeps the per-session state
// delivery needs: the protocol version check, duplicate suppression across
// reconnects, gap accounting, and acknowledgements.
//
// Delivery contract: a sampler session (Hello.SessionID) numbers its reliable
// frames (batches and loss reports). The Tracker remembers the highest
// sequence it handed to the Sink per session and drops anything at or below
// it, so batches resent after a reconnect reach the Sink once. Cut marks a
// consistent point (taken under the same lock the Sink is called with) and
// returns, per session, the highest sequence whose data is in the snapshot;
// once that snapshot and every earlier one have been delivered (or given up
// and counted) by every output, the caller (encoder/pipeline's Pipeline)
// passes it to Ack, which acknowledges it to whichever connection the
// session is on now. Ack ignores a sequence at or below one already
// acknowledged.
//
// Dictionaries (protocol 1.4, docs/session-dictionaries.md): every Serve
// call keeps one schema.Dictionary, built from the stream's FrameDictionary
// chunks and dropped when Serve returns, so its scope is one connection or
// one dump, never a session. Chunks are neither sequenced nor deduplicated:
// each is applied when it arrives, also when the batch after it is a
// duplicate, because a sampler writes on every connection exactly the
// chunks its batches need, in order. A chunk that does not continue the
// dictionary (another generation's, or not starting at its table lengths)
// and a layout-2 batch of a generation the dictionary is not at, or with a
// reference past its tables, end the stream as malformed. Batches reach the
// Sink with their Dictionary (schema.Batch): a layout-2 batch's tables are
// the whole dictionary, so a Sink must not do per-batch work proportional
// to their length.
//
// A Tracker is safe for concurrent use by any number of connections.
package ingest
