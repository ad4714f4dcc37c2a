//go:build !linux

package symbolize

import "io"

// mapSection maps nothing off Linux: the caller reads the bytes.
func mapSection(io.ReaderAt, int64, int64) (data, mapping []byte, ok bool) { return nil, nil, false }

func unmap([]byte) {}
