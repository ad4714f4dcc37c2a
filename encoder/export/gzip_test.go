package export_test

import (
	"bytes"
	stdgzip "compress/gzip"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/encoding"

	"github.com/tandem-profiler/tandem/encoder/export"
)

// gzipXFL is the gzip header's XFL byte compress/gzip writes for a level:
// 4 for the fastest, 2 for the best, 0 between.
func gzipXFL(level int) byte {
	switch level {
	case stdgzip.BestSpeed:
		return 4
	case stdgzip.BestCompression:
		return 2
	}
	return 0
}

// compressible is payload shaped a little like a profile: repeated records
// with varying numbers, so the levels differ in size.
func compressible() []byte {
	var b bytes.Buffer
	for i := range 12000 {
		fmt.Fprintf(&b, "frame %d libc.so.6 0x%x tid=%d;", i%577, (i*2654435761)%1048576, i%61)
	}
	return b.Bytes()
}

func TestRegisterGzip(t *testing.T) {
	export.RegisterGzip() // idempotent; TestMain called it already
	t.Cleanup(func() {
		if err := export.SetGzipLevel(export.DefaultGzipLevel); err != nil {
			t.Error(err)
		}
	})
	c := encoding.GetCompressor("gzip")
	if c == nil || c.Name() != "gzip" {
		t.Fatalf("gzip compressor = %v", c)
	}
	payload := compressible()
	sizes := map[int]int{}
	for _, level := range []int{1, 5, 9, 1} { // back to 1: pooled writers keep their own level
		if err := export.SetGzipLevel(level); err != nil {
			t.Fatal(err)
		}
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
			if xfl := out.Bytes()[8]; xfl != gzipXFL(level) {
				t.Errorf("level %d: gzip XFL = %d, want %d", level, xfl, gzipXFL(level))
			}
			zr, err := stdgzip.NewReader(bytes.NewReader(out.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(zr)
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("level %d round trip: %d bytes, %v", level, len(got), err)
			}
			r, err := c.Decompress(bytes.NewReader(out.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("level %d Decompress: %d bytes, %v", level, len(got), err)
			}
			sizes[level] = out.Len()
		}
	}
	if !(sizes[9] <= sizes[5] && sizes[5] < sizes[1]) {
		t.Errorf("compressed sizes by level %v: want level 5 smaller than level 1, 9 no larger than 5", sizes)
	}
}

func TestSetGzipLevelRejects(t *testing.T) {
	for _, level := range []int{0, -1, 10} {
		err := export.SetGzipLevel(level)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("gzip level %d: want 1 (fastest) to 9 (smallest)", level)) {
			t.Errorf("SetGzipLevel(%d) = %v", level, err)
		}
	}
	if got := encoding.GetCompressor("gzip"); got == nil {
		t.Fatal("gzip compressor gone")
	}
}
