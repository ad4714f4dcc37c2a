package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/sampler"
)

// streamSink adapts the IPC client and the dump writer to sampler.Sink:
// every frame goes to the dump (when recording) and to the client (when an
// encoder is expected). The client's Run starts when the sampler sets the
// Hello, i.e. once the host checks passed.
type streamSink struct {
	client *ipc.Client     // nil: --no-encoder
	dump   *ipc.DumpWriter // nil: not recording
	logger *slog.Logger

	// dict is the current generation's definition log, shared by the
	// client and the dump (each keeps its own cursor into it). Set and
	// read on the batching goroutine only.
	dict *ipc.DictionaryLog

	startClient func(hello []byte) // starts client.Run; set by run

	dumpFailed sync.Once
	helloSet   atomic.Bool
}

var _ sampler.Sink = (*streamSink)(nil)

func frameType(m sampler.Message) ipc.FrameType {
	if m == sampler.MessageLoss {
		return ipc.FrameLoss
	}
	return ipc.FrameBatch
}

func (s *streamSink) writeDump(t ipc.FrameType, payload []byte, dict ipc.DictionaryRef) {
	if s.dump == nil {
		return
	}
	if err := s.dump.WriteFrameWith(t, payload, dict); err != nil {
		s.dumpFailed.Do(func() {
			s.logger.Error("recording stopped: write dump", "err", err)
		})
	}
}

func (s *streamSink) SetHello(payload []byte) {
	s.helloSet.Store(true)
	s.writeDump(ipc.FrameHello, payload, ipc.DictionaryRef{})
	if s.client != nil {
		s.client.SetHello(payload)
		s.startClient(payload)
	}
}

func (s *streamSink) SendDictionary(gen uint64, payload []byte) error {
	if s.dict == nil || s.dict.Generation() != gen {
		if s.dict != nil && gen < s.dict.Generation() {
			return fmt.Errorf("dictionary generation %d after %d: generations only increase", gen, s.dict.Generation())
		}
		s.dict = ipc.NewDictionaryLog(gen)
	}
	_, err := s.dict.Append(payload)
	return err
}

func (s *streamSink) SendReliable(seq uint64, m sampler.Message, payload []byte, samples int, need sampler.DictionaryNeed) {
	t := frameType(m)
	var ref ipc.DictionaryRef
	if need.Chunks > 0 {
		ref = ipc.DictionaryRef{Log: s.dict, Chunks: need.Chunks}
		if s.dict == nil || s.dict.Generation() != need.Generation {
			// A bug. An empty log of that generation makes the client
			// and the dump refuse the batch (counted in
			// tandem_ipc_client_rejected_frames_total), rather than send
			// one the encoder cannot read.
			s.logger.Error("batch needs a dictionary generation the sink does not hold", "seq", seq, "generation", need.Generation)
			ref.Log = ipc.NewDictionaryLog(need.Generation)
		}
	}
	s.writeDump(t, payload, ref)
	if s.client != nil {
		s.client.SendReliableWith(seq, t, payload, samples, ref)
	}
}

// SendExecutable passes the notice and its descriptor to the client. A
// dump records the notice without the descriptor; when only recording, the
// descriptor is closed at once.
func (s *streamSink) SendExecutable(payload []byte, f *os.File) bool {
	s.writeDump(ipc.FrameExecutable, payload, ipc.DictionaryRef{})
	if s.client == nil {
		_ = f.Close()
		return s.dump != nil
	}
	return s.client.SendExecutable(payload, f)
}

func (s *streamSink) IsEncoder(pid uint32) bool {
	return s.client != nil && s.client.IsServer(pid)
}

func (s *streamSink) EncoderStarting() bool {
	return s.client != nil && s.client.ServerStarting()
}

func (s *streamSink) Stats() sampler.SinkStats {
	if s.client == nil {
		return sampler.SinkStats{Connected: true}
	}
	st := s.client.Stats()
	return sampler.SinkStats{
		Connected:          st.Connected,
		LostFrames:         st.LostFrames,
		LostSamples:        st.LostSamples,
		LostBytes:          st.LostBytes,
		PendingLossReports: st.UnackedLossFrames,
	}
}

// close sends the goodbye (to the dump and the client) and closes both,
// the client within ctx. Without a hello (the sampler never started) there
// is no session to end.
func (s *streamSink) close(ctx context.Context, goodbye []byte) error {
	var errs []error
	if !s.helloSet.Load() {
		if s.dump != nil {
			errs = append(errs, s.dump.Close())
		}
		if s.client != nil {
			_ = s.client.Close(ctx, nil) // not running: nothing to deliver
		}
		return errors.Join(errs...)
	}
	if s.dump != nil {
		s.writeDump(ipc.FrameGoodbye, goodbye, ipc.DictionaryRef{})
		if err := s.dump.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.client != nil {
		if err := s.client.Close(ctx, goodbye); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
