package export

import (
	stdgzip "compress/gzip"
	"sync"

	"google.golang.org/grpc/encoding/gzip"
)

var gzipLevel1 sync.Once

// RegisterGzipLevel1 makes grpc-go's gzip compressor, which every gRPC
// client and server in the process shares, compress at level 1
// (BestSpeed). Call it from main before any RPC starts: grpc-go requires
// the level to be set at initialization time. Later calls do nothing.
// Without it, gzip still works at grpc-go's default level.
func RegisterGzipLevel1() {
	gzipLevel1.Do(func() {
		if err := gzip.SetLevel(stdgzip.BestSpeed); err != nil {
			panic("set gzip level: " + err.Error()) // BestSpeed is always valid
		}
	})
}
