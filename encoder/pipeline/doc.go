// Package pipeline is the encoder's intake and delivery loop: the Pipeline
// that turns the samplers' stream into flushes and hands each flush to
// every encoder/output Output, and Serve, which runs it over the sampler
// connections with the no-loss shutdown order.
//
// # Acknowledgement
//
// A sampler sequence is acknowledged only once every output has delivered,
// or given up and counted, every flush holding data up to it: flushes form
// a line, and the acknowledgement moves past a flush when the last output is
// done with it and every earlier flush is done too. A later success never
// acknowledges an earlier failure. A failed flush is retried (export's one
// retry policy) until it is delivered, refused permanently, or pushed out of
// its output's queue by the byte and count bounds (export.QueueConfig);
// then its samples are counted in tandem_encoder_lost_samples_total by
// output and reason, and the acknowledgement moves on, so a dead backend
// never holds the sampler forever. For every output, the samples produced
// equal the samples delivered plus the samples counted lost (Summary).
// Flushes given up at shutdown (ReasonShutdown) stop acknowledgement: the
// sampler keeps them and resends them to the next encoder.
//
// # Concurrency and lifecycle
//
// A Pipeline is safe for concurrent use: the tracker serializes the Sink
// calls, and Flush may run beside them. Close drains every output, bounded by
// its context, and closes the outputs; the Pipeline must not be used after.
package pipeline
