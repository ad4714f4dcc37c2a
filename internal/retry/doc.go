// Package retry is Tandem's one retry loop: the waits between the attempts
// of every loop that retries (an output's export, a debuginfo upload RPC,
// the sampler's connection to the encoder) grow exponentially from an
// initial to a maximum wait, jittered so that a fleet does not retry in
// step, are lengthened to what a failed attempt asks for (a server's
// requested delay), and are measured on a clock that tests replace with a
// fake one instead of sleeping. A Retrier holds one loop's waits; Do is the
// plain loop. Transient marks any error worth retrying; which gRPC failures
// are, and the delay a gRPC server asks for, are internal/grpcretry's.
package retry
