// Package retry is Tandem's one backoff: the waits between the attempts of
// every loop that retries (an output's export, a debuginfo upload RPC, the
// sampler's connection to the encoder) grow exponentially from an initial
// to a maximum wait, jittered so that a fleet does not retry in step, and
// are measured on a clock that tests replace with a fake one instead of
// sleeping. What is worth retrying is internal/grpcretry's.
package retry
