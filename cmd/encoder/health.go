package main

import (
	"fmt"

	"google.golang.org/grpc/connectivity"
)

// ready is /readyz's answer. The encoder is ready once it listens for
// samplers (serveHTTP starts after the socket is bound or inherited) and,
// with a remote store, while the gRPC connection is not in
// TRANSIENT_FAILURE: IDLE (no export yet, or idle since the last one),
// CONNECTING and READY count as ready, so a backend that is merely slow
// does not take the encoder out of service, but one that refuses
// connections does. Writing pprof files, it is always ready.
func (p *pipeline) ready() error {
	if p.conn == nil {
		return nil
	}
	if s := p.conn.GetState(); s == connectivity.TransientFailure || s == connectivity.Shutdown {
		return fmt.Errorf("remote store connection is %s", s)
	}
	return nil
}
