package sampler

import "os"

// Message says what a reliable payload holds.
type Message uint8

const (
	// MessageBatch is an encoded schema.Batch.
	MessageBatch Message = iota + 1
	// MessageLoss is an encoded schema.LossReport.
	MessageLoss
)

// DictionaryNeed says which dictionary chunks a batch needs (protocol
// 1.4): the first Chunks chunks of generation Generation, in the order
// SendDictionary received them. The zero value needs none (loss reports).
type DictionaryNeed struct {
	Generation uint64
	Chunks     int
}

// SinkStats is what the sampler needs to know about its sink.
type SinkStats struct {
	// Connected reports whether a reader is attached (executables wait
	// for it).
	Connected bool
	// Cumulative batches the sink dropped from its resend buffer that
	// will never reach the reader (not those evicted but delivered): what
	// the loss reports carry (stage resend_buffer).
	LostFrames, LostSamples, LostBytes uint64
	// PendingLossReports counts the loss reports handed to SendReliable
	// that the reader has not acknowledged yet. A sink must never drop a
	// loss report; the batcher bounds how many are pending
	// (maxPendingLossReports) and folds new losses into the next one.
	PendingLossReports int
}

// Sink receives the sampler's stream: the IPC client, a dump, or both
// (cmd/sampler adapts ipc.Client and ipc.DumpWriter to it). Every method
// must return without blocking on I/O, and be safe for concurrent use
// (SendExecutable is called from the tracer's process-sync goroutine, the
// rest from the batching goroutine).
type Sink interface {
	// SetHello records the encoded schema.Hello, sent first on every
	// connection. It is called once, before anything else.
	SetHello(payload []byte)
	// SendDictionary appends payload, an encoded schema.DictionaryChunk,
	// to generation's definition log: chunks of a generation are numbered
	// from 0 in call order, and a higher generation starts a new log
	// (generations only increase). The sink writes on every connection,
	// and in every dump, the chunks a batch needs before the batch. It
	// returns an error when it cannot keep the chunk (the batcher then
	// starts a new generation). The sink owns payload from then on.
	SendDictionary(generation uint64, payload []byte) error
	// SendReliable queues a sequenced payload until the reader has it. The
	// sink owns payload from then on. samples is the number of samples it
	// carries (for eviction accounting); need names the dictionary chunks
	// it needs (zero for a loss report).
	SendReliable(seq uint64, m Message, payload []byte, samples int, need DictionaryNeed)
	// SendExecutable queues an encoded schema.ExecutableNotice with its
	// descriptor. The sink owns f: it closes it after sending it, or at once
	// when it drops the notice, in which case it returns false.
	SendExecutable(payload []byte, f *os.File) bool
	// Stats returns the sink's state.
	Stats() SinkStats
	// IsEncoder reports whether pid, in the sampler's pid namespace, is
	// the reader (the encoder), connected now or a few seconds ago: the
	// sampler leaves that process's traces out
	// (Config.KeepEncoderSamples). It is called for every trace, from the
	// tracer's goroutines: it must be cheap and never block.
	IsEncoder(pid uint32) bool
	// EncoderStarting reports whether the reader may be starting now and
	// cannot be told yet (a service manager starts it on connection): the
	// batcher holds traces back meanwhile, so that the encoder's first
	// ones are still left out. It is true for a bounded time only.
	EncoderStarting() bool
}
