package export_test

import (
	"bytes"
	stdgzip "compress/gzip"
	"io"
	"testing"

	"google.golang.org/grpc/encoding"

	"github.com/tandem-profiler/tandem/encoder/export"
)

func TestRegisterGzipLevel1(t *testing.T) {
	export.RegisterGzipLevel1() // idempotent; TestMain called it already
	c := encoding.GetCompressor("gzip")
	if c == nil || c.Name() != "gzip" {
		t.Fatalf("gzip compressor = %v", c)
	}
	payload := bytes.Repeat([]byte("tandem profile payload 0123456789 "), 20000)
	for range 3 { // pooled writers must reset cleanly
		var out bytes.Buffer
		w, err := c.Compress(&out)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(payload); i += 1000 {
			if _, err := w.Write(payload[i:min(i+1000, len(payload))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		// Level 1 leaves a recognizable mark in the gzip header (XFL=4,
		// fastest algorithm).
		if xfl := out.Bytes()[8]; xfl != 4 {
			t.Errorf("gzip XFL = %d, want 4 (level 1)", xfl)
		}
		zr, err := stdgzip.NewReader(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("round trip: %d bytes, %v", len(got), err)
		}
		r, err := c.Decompress(bytes.NewReader(out.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, payload) {
			t.Fatalf("Decompress: %d bytes, %v", len(got), err)
		}
	}
}
