package main

// /readyz answers with the pipeline's Ready: the encoder is ready once it
// listens for samplers (serveHTTP starts after the socket is bound or
// inherited) and while no output is failing. An output fails when its last
// attempt failed (a refused connection, an unwritable pprof directory) or
// its gRPC connection is in TRANSIENT_FAILURE; an idle or connecting
// connection counts as ready, so a backend that is merely slow does not take
// the encoder out of service. The answer names each failing output.
