package testcorpus

import (
	"errors"
	"fmt"
)

// LoadDump reads a recorded stream (a socket dump) into a Corpus.
//
// Not wired yet: the dump reader (ipc) and the schema decoder are being
// written in parallel. Once they land this becomes ipc.OpenDump +
// schema.DecodeHello/DecodeBatch over every frame.
func LoadDump(path string) (*Corpus, error) {
	return nil, fmt.Errorf("load corpus %s: %w", path, errors.ErrUnsupported)
}
