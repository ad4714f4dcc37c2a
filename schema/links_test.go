package schema

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/schema/internal/wire"
)

var (
	testLinkA = TraceLink{
		TraceID: [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  [8]byte{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	}
	testLinkB = TraceLink{TraceID: [16]byte{15: 1}, SpanID: [8]byte{7: 2}}
)

// linkedBatch is sampleBatch with a third sample and trace links on the
// first and third (the packed layouts carry links; the list layout of 1.0
// and 1.1 does not).
func linkedBatch(t testing.TB) *Batch {
	t.Helper()
	b := sampleBatch(t)
	third := b.Samples[1]
	third.TimestampUnixNano += 1000
	b.Links = append(b.Links, testLinkA, testLinkB)
	b.Samples[0].Link = 1
	b.Samples = append(b.Samples, third)
	b.Samples[2].Link = 2
	return b
}

func TestLinksRoundTrip(t *testing.T) {
	t.Run("packed", func(t *testing.T) {
		in := linkedBatch(t)
		var out Batch
		if err := DecodeBatch(batchEncoders[0].encode(t, in), &out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*in, out) {
			t.Fatalf("round trip mismatch:\n in: %+v\nout: %+v", *in, out)
		}
		// Reused for a batch without links: none survive.
		if err := DecodeBatch(batchEncoders[0].encode(t, sampleBatch(t)), &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Links) != 0 || out.Samples[0].Link != 0 {
			t.Fatalf("links left over from the previous decode: %v, sample 0 link %d", out.Links, out.Samples[0].Link)
		}
	})
	t.Run("layout 2", func(t *testing.T) {
		_, chunks := sampleChunks(t, 1)
		d := applyAll(t, chunks)
		in := linkedBatch(t)
		in.Generation = 1
		var out Batch
		if err := DecodeBatchWith(encodeLayout2(t, in), d, &out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in.Links, out.Links) || out.Samples[0].Link != 1 || out.Samples[1].Link != 0 || out.Samples[2].Link != 2 {
			t.Fatalf("links %v, sample links %d %d %d; want %v, 1 0 2", out.Links, out.Samples[0].Link, out.Samples[1].Link, out.Samples[2].Link, in.Links)
		}
	})
	t.Run("shared link", func(t *testing.T) {
		// Two samples may share one entry of Links; the stream carries a
		// record per linked sample, so they decode to two equal entries.
		in := linkedBatch(t)
		in.Samples[2].Link = 1
		var out Batch
		if err := DecodeBatch(batchEncoders[0].encode(t, in), &out); err != nil {
			t.Fatal(err)
		}
		if want := []TraceLink{testLinkA, testLinkA}; !reflect.DeepEqual(out.Links, want) {
			t.Fatalf("links %v, want %v", out.Links, want)
		}
	})
}

// TestLinksAbsentCostNothing checks that samples without a link add no
// bytes: a batch without links has no links field, and each linked sample
// adds one record (padded to a word).
func TestLinksAbsentCostNothing(t *testing.T) {
	plain := sampleBatch(t)
	data := batchEncoders[0].encode(t, plain)
	msg, err := openMessage(data)
	if err != nil {
		t.Fatal(err)
	}
	w, err := wire.ReadRootBatch(msg)
	if err != nil {
		t.Fatal(err)
	}
	if w.HasPackedLinks() {
		t.Fatal("a batch without links carries a links field")
	}
	one := sampleBatch(t)
	one.Links = []TraceLink{testLinkA}
	one.Samples[0].Link = 1
	if got, want := len(batchEncoders[0].encode(t, one))-len(data), (linkRecordSize+7)/8*8; got != want {
		t.Fatalf("one linked sample adds %d bytes, want %d (one record)", got, want)
	}
}

func TestEncodeBatchRejectsBadLink(t *testing.T) {
	b := sampleBatch(t)
	b.Links = []TraceLink{testLinkA}
	b.Samples[1].Link = 2
	if _, err := EncodeBatch(b, nil); err == nil || !strings.Contains(err.Error(), "sample 1 has link 2 of 1") {
		t.Fatalf("EncodeBatch = %v, want an error naming sample 1's link", err)
	}
}

func TestDecodeBatchRejectsBadLinks(t *testing.T) {
	record := func(sample uint32, l TraceLink) []byte {
		d := binary.LittleEndian.AppendUint32(nil, sample)
		d = append(d, l.TraceID[:]...)
		return append(d, l.SpanID[:]...)
	}
	cat := func(parts ...[]byte) []byte {
		var d []byte
		for _, p := range parts {
			d = append(d, p...)
		}
		return d
	}
	tests := []struct {
		name  string
		links []byte
		want  string
	}{
		{"ragged", record(0, testLinkA)[:27], "whole number of 28-byte entries"},
		{"sample out of range", record(2, testLinkA), "link 0 belongs to sample 2 (previous link to -1, 2 samples)"},
		{"same sample twice", cat(record(1, testLinkA), record(1, testLinkB)), "link 1 belongs to sample 1 (previous link to 1"},
		{"samples decreasing", cat(record(1, testLinkA), record(0, testLinkB)), "link 1 belongs to sample 0"},
		{"zero trace id", record(0, TraceLink{SpanID: testLinkA.SpanID}), "link 0 (sample 0) has an all-zero trace or span id"},
		{"zero span id", record(1, TraceLink{TraceID: testLinkA.TraceID}), "link 0 (sample 1) has an all-zero trace or span id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := encodePackedWith(t, sampleBatch(t), func(w wire.Batch) error { return w.SetPackedLinks(tt.links) })
			var out Batch
			err := DecodeBatch(data, &out)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeBatch error = %v, want ErrMalformed mentioning %q", err, tt.want)
			}
		})
	}
}
