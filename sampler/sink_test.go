package sampler

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tandem-profiler/tandem/schema"
)

// recordingSink keeps everything it is sent, decoded as an encoder would:
// its dictionary applies every chunk, batches decode against it, and each
// batch must need exactly the chunks of its generation sent so far. Its
// Stats are settable.
type recordingSink struct {
	mu          sync.Mutex
	hello       []byte
	seqs        []uint64
	dict        schema.Dictionary
	chunks      int // of dict's generation
	chunkBytes  int
	needs       []DictionaryNeed
	dictErr     error // returned by SendDictionary when set
	batches     []schema.Batch
	losses      []schema.LossReport
	notices     []schema.ExecutableNotice
	files       []*os.File
	acceptExecs bool
	stats       SinkStats
	decodeErr   error
	encoder     atomic.Uint32 // IsEncoder's pid, 0: none
	starting    atomic.Bool   // EncoderStarting's answer
	onBatch     func(b *schema.Batch)
}

func (s *recordingSink) SetHello(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hello = p
}

func (s *recordingSink) SendDictionary(gen uint64, payload []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dictErr != nil {
		return s.dictErr
	}
	var c schema.DictionaryChunk
	if err := schema.DecodeDictionaryChunk(payload, &c); err != nil {
		s.decodeErr = err
		return nil
	}
	if c.Generation != gen {
		s.decodeErr = sinkError("chunk of another generation than SendDictionary's")
	}
	if gen != s.dict.Generation {
		s.chunks = 0
	}
	if err := s.dict.Apply(&c); err != nil {
		s.decodeErr = err
		return nil
	}
	s.chunks++
	s.chunkBytes += len(payload)
	return nil
}

func (s *recordingSink) SendReliable(seq uint64, m Message, payload []byte, samples int, need DictionaryNeed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seqs = append(s.seqs, seq)
	s.needs = append(s.needs, need)
	switch m {
	case MessageBatch:
		if need.Generation != s.dict.Generation || need.Chunks != s.chunks {
			s.decodeErr = sinkError("a batch needs other chunks than those sent in its generation")
		}
		var b schema.Batch
		if err := schema.DecodeBatchWith(payload, &s.dict, &b); err != nil {
			s.decodeErr = err
			return
		}
		if len(b.Samples) != samples {
			s.decodeErr = errSampleCount
		}
		s.batches = append(s.batches, b)
		if s.onBatch != nil {
			s.onBatch(&b)
		}
	case MessageLoss:
		if need != (DictionaryNeed{}) {
			s.decodeErr = sinkError("a loss report needs dictionary chunks")
		}
		r, err := schema.DecodeLossReport(payload)
		if err != nil {
			s.decodeErr = err
			return
		}
		s.losses = append(s.losses, r)
	}
}

type sinkError string

func (e sinkError) Error() string { return string(e) }

const errSampleCount = sinkError("sample count differs from the batch")

func (s *recordingSink) SendExecutable(payload []byte, f *os.File) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.acceptExecs {
		_ = f.Close()
		return false
	}
	n, err := schema.DecodeExecutableNotice(payload)
	if err != nil {
		s.decodeErr = err
		_ = f.Close()
		return false
	}
	s.notices = append(s.notices, n)
	s.files = append(s.files, f)
	return true
}

// IsEncoder tells the pid set in encoder (0: none).
func (s *recordingSink) IsEncoder(pid uint32) bool {
	e := s.encoder.Load()
	return e != 0 && pid == e
}

func (s *recordingSink) EncoderStarting() bool { return s.starting.Load() }

func (s *recordingSink) Stats() SinkStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *recordingSink) closeFiles(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.files {
		if err := f.Close(); err != nil {
			t.Errorf("close %s: %v", f.Name(), err)
		}
	}
	s.files = nil
}

func (s *recordingSink) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.decodeErr
}
