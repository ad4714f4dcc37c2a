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
	ReadDump(t, path, func(b *schema.Batch) { samples += int64(len(b.Samples)) }, func(r *schema.LossReport) {
		for _, l := range r.Losses {
			if l.Stage == schema.LossResendBuffer {
				resendLost += int64(l.Samples)
			}
		}
	})
	return samples, resendLost
}

// DumpSamplesOf counts the samples of process pid in a sampler's
// recording.
func DumpSamplesOf(t testing.TB, path string, pid uint32) int64 {
	t.Helper()
	var n int64
	ReadDump(t, path, func(b *schema.Batch) {
		for _, s := range b.Samples {
			if b.Processes[s.Process].PID == pid {
				n++
			}
		}
	}, nil)
	return n
}

// ReadDump calls batch for every batch of a sampler's recording (valid
// during the call only) and loss, if not nil, for every loss report. It
// fails t when the dump cannot be read to its end.
func ReadDump(t testing.TB, path string, batch func(*schema.Batch), loss func(*schema.LossReport)) {
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
			return
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
			batch(&b)
		case ipc.FrameLoss:
			if loss == nil {
				continue
			}
			r, err := schema.DecodeLossReport(f.Payload)
			if err != nil {
				t.Fatalf("read %s: %v", path, err)
			}
			loss(&r)
		}
	}
}
