package streamtest

import (
	"errors"
	"io"
	"testing"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// DumpTotals reads a sampler's recording (--record): the samples of every
// batch it produced, and the resend_buffer samples its loss reports carry
// (what the sampler reported lost in-band).
func DumpTotals(t testing.TB, path string) (samples, resendLost int64) {
	t.Helper()
	d, err := ipc.OpenDump(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var b schema.Batch
	var dict schema.Dictionary // the dump's (protocol 1.4)
	var chunk schema.DictionaryChunk
	for {
		f, err := d.Next()
		if errors.Is(err, io.EOF) {
			return samples, resendLost
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		switch f.Type {
		case ipc.FrameDictionary:
			if err := schema.DecodeDictionaryChunk(f.Payload, &chunk); err != nil {
				t.Fatalf("read %s: %v", path, err)
			}
			if err := dict.Apply(&chunk); err != nil {
				t.Fatalf("read %s: %v", path, err)
			}
		case ipc.FrameBatch:
			if err := schema.DecodeBatchWith(f.Payload, &dict, &b); err != nil {
				t.Fatalf("read %s: %v", path, err)
			}
			samples += int64(len(b.Samples))
		case ipc.FrameLoss:
			r, err := schema.DecodeLossReport(f.Payload)
			if err != nil {
				t.Fatalf("read %s: %v", path, err)
			}
			for _, l := range r.Losses {
				if l.Stage == schema.LossResendBuffer {
					resendLost += int64(l.Samples)
				}
			}
		}
	}
}
