package testcorpus

import (
	"errors"
	"fmt"
	"io"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// LoadDump reads a recorded stream (a socket dump) into a Corpus: the first
// Hello and every batch, in order. Batches of later sessions in the same
// dump are kept under the first session's Hello; other frames are skipped.
// A protocol 1.4 dump's dictionary chunks are applied to one dictionary for
// the dump, as ingest does, and its layout-2 batches keep referring to it
// (Batch.Dictionary).
func LoadDump(path string) (*Corpus, error) {
	d, err := ipc.OpenDump(path)
	if err != nil {
		return nil, fmt.Errorf("load corpus: %w", err)
	}
	defer d.Close()
	c := &Corpus{}
	haveHello := false
	dict := &schema.Dictionary{}
	var chunk schema.DictionaryChunk
	for {
		f, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("load corpus %s: %w", path, err)
		}
		switch f.Type {
		case ipc.FrameHello:
			if haveHello {
				continue
			}
			if c.Hello, err = schema.DecodeHello(f.Payload); err != nil {
				return nil, fmt.Errorf("load corpus %s: hello: %w", path, err)
			}
			haveHello = true
		case ipc.FrameDictionary:
			err := schema.DecodeDictionaryChunk(f.Payload, &chunk)
			if err == nil {
				err = dict.Apply(&chunk)
			}
			if err != nil {
				return nil, fmt.Errorf("load corpus %s: dictionary chunk at offset %d: %w", path, d.Offset(), err)
			}
		case ipc.FrameBatch:
			b := &schema.Batch{}
			if err := schema.DecodeBatchWith(f.Payload, dict, b); err != nil {
				return nil, fmt.Errorf("load corpus %s: batch at offset %d: %w", path, d.Offset(), err)
			}
			c.Batches = append(c.Batches, b)
		}
	}
	if !haveHello || len(c.Batches) == 0 {
		return nil, fmt.Errorf("load corpus %s: %d batches, hello found: %t", path, len(c.Batches), haveHello)
	}
	return c, nil
}

// WriteDump records c as a dump at path, as a sampler's stream would be.
func WriteDump(c *Corpus, path string) error {
	w, err := ipc.CreateDump(path)
	if err != nil {
		return err
	}
	payload, err := schema.EncodeHello(&c.Hello, nil)
	if err == nil {
		err = w.WriteFrame(ipc.FrameHello, payload)
	}
	for _, b := range c.Batches {
		if err != nil {
			break
		}
		if payload, err = schema.EncodeBatch(b, payload[:0]); err == nil {
			err = w.WriteFrame(ipc.FrameBatch, payload)
		}
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write corpus dump: %w", err)
	}
	return nil
}
