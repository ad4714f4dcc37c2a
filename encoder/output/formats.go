package output

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/encoder/otlp"
	"github.com/tandem-profiler/tandem/encoder/pprofout"
	"github.com/tandem-profiler/tandem/internal/grpcretry"
	"github.com/tandem-profiler/tandem/internal/retry"
)

// otlpFormat encodes OTLP/profiles requests, split to fit the message size
// limit.
type otlpFormat struct {
	mu     sync.Mutex // Encode is not safe for concurrent use
	enc    *otlp.Encoder
	client *export.Client
	maxMsg int
}

func newOTLPFormat(cfg Config, client *export.Client) (*otlpFormat, error) {
	enc, err := otlp.NewEncoder(cfg.OTLP)
	if err != nil {
		return nil, fmt.Errorf("create OTLP encoder: %w", err)
	}
	return &otlpFormat{enc: enc, client: client, maxMsg: cfg.Remote.MaxCallSendMsgSize - 64}, nil // room for gRPC's framing
}

func (o *otlpFormat) Close() error { return nil }

func (o *otlpFormat) Encode(f *aggregate.Flush) (export.Request, error) {
	o.mu.Lock()
	reqs, err := o.enc.EncodeLimited(f, o.maxMsg)
	o.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("encode OTLP: %w", err)
	}
	r := &otlpRequest{format: o, reqs: reqs, samples: make([]int, len(reqs)), profiles: make([][]int, len(reqs))}
	var sizer pprofile.ProtoMarshaler
	for i, req := range reqs {
		r.profiles[i] = profileObservations(req)
		for _, n := range r.profiles[i] {
			r.samples[i] += n
		}
		r.bytes += sizer.ProfilesSize(req.Profiles())
	}
	return r, nil
}

// profileObservations returns the samples (timestamps) of each profile of
// an OTLP request.
func profileObservations(req pprofileotlp.ExportRequest) []int {
	var out []int
	for _, rp := range req.Profiles().ResourceProfiles().All() {
		for _, sp := range rp.ScopeProfiles().All() {
			for _, p := range sp.Profiles().All() {
				n := 0
				for _, s := range p.Samples().All() {
					n += s.TimestampsUnixNano().Len()
				}
				out = append(out, n)
			}
		}
	}
	return out
}

// otlpRequest is one flush as OTLP requests (several when one would exceed
// the message size limit). A request is never sent again once a receiver
// has answered it, whatever it refused: see Send.
type otlpRequest struct {
	format   *otlpFormat
	reqs     []pprofileotlp.ExportRequest
	samples  []int   // per request
	profiles [][]int // per request, per profile
	bytes    int
}

func (r *otlpRequest) Parts() int            { return len(r.reqs) }
func (r *otlpRequest) PartSamples(i int) int { return r.samples[i] }
func (r *otlpRequest) Bytes() int            { return r.bytes }

func (r *otlpRequest) Release() {
	for _, req := range r.reqs {
		r.format.enc.Release(req)
	}
}

// Send sends request i once. Never twice: a sample reaches the receiver at
// most once, whatever the receiver does with a request it refuses in part.
//
//   - Success: delivered, but for a partial success's rejected profiles
//     (partial).
//   - A retryable error, or a refusal of the call itself (Unauthenticated,
//     PermissionDenied, Unimplemented, NotFound: nothing was read): an
//     error, for the exporter to retry or to give up whole.
//   - Any other permanent error (InvalidArgument, Internal, Unknown, ...)
//     is about the content, and the receiver may have stored part of the
//     request before answering it (Pyroscope stores profile by profile and
//     answers an error at the first it refuses): the samples are not
//     resent and count as unconfirmed, or as rejected when the request
//     held one profile (refused, so nothing of it was stored).
func (r *otlpRequest) Send(ctx context.Context, i int) (export.Outcome, error) {
	rejected, msg, err := r.format.client.ExportOTLP(ctx, r.reqs[i])
	switch {
	case err == nil:
		return export.PartialOutcome(r.profiles[i], rejected, msg), nil
	case grpcretry.Retryable(err) || refusedUnread(err):
		return export.Outcome{}, err
	case len(r.profiles[i]) == 1:
		return export.Outcome{Rejected: r.samples[i], Err: err}, nil
	default:
		return export.Outcome{Unconfirmed: r.samples[i], Err: fmt.Errorf("refused after it may have stored part of the request (not resent): %w", err)}, nil
	}
}

// refusedUnread reports whether err refuses the call itself (who made it,
// or what it is), which a receiver answers before reading the content.
func refusedUnread(err error) bool {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.Unimplemented, codes.NotFound:
		return true
	}
	return false
}

// arrowFormat encodes Parca's Arrow records (v2: WriteArrow payloads, v1:
// Write exchanges).
type arrowFormat struct {
	v2     *arrow.V2Encoder
	v1     *arrow.V1Encoder
	client *export.Client
}

func newArrowFormat(cfg Config, client *export.Client, lbls *labels.Labeler, v2 bool) (*arrowFormat, error) {
	acfg := cfg.Arrow
	acfg.MaxMessageBytes = cfg.Remote.MaxCallSendMsgSize
	a := &arrowFormat{client: client}
	var labeler arrow.Labeler // nil, not a nil *labels.Labeler: the encoders test for nil
	if lbls != nil {
		labeler = lbls
	}
	var err error
	if v2 {
		a.v2, err = arrow.NewV2Encoder(acfg, labeler, nil)
	} else {
		a.v1, err = arrow.NewV1Encoder(acfg, labeler, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("create Arrow encoder: %w", err)
	}
	return a, nil
}

func (a *arrowFormat) Close() error {
	if a.v2 != nil {
		a.v2.Close()
	} else {
		a.v1.Close()
	}
	return nil
}

func (a *arrowFormat) Encode(f *aggregate.Flush) (export.Request, error) {
	r := &arrowRequest{client: a.client}
	var sizes []int
	if a.v2 != nil {
		payloads, err := a.v2.Encode(f)
		if err != nil {
			return nil, fmt.Errorf("encode Arrow v2 records: %w", err)
		}
		r.v2 = payloads
		for _, p := range payloads {
			sizes = append(sizes, len(p))
		}
	} else {
		xs, err := a.v1.Encode(f)
		if err != nil {
			return nil, fmt.Errorf("encode Arrow v1 records: %w", err)
		}
		for _, x := range xs {
			r.v1 = append(r.v1, x)
			sizes = append(sizes, len(x.SampleRecord()))
		}
	}
	r.samples = spread(f.Events, sizes)
	for _, s := range sizes {
		r.bytes += s
	}
	return r, nil
}

// spread divides n samples over parts in proportion to their sizes (an
// Arrow record of a split flush does not say how many observations it
// holds; the parts of one flush are delivered or lost together in all but
// the rarest case), the remainder on the last part.
func spread(n int, sizes []int) []int {
	out := make([]int, len(sizes))
	total := 0
	for _, s := range sizes {
		total += s
	}
	left := n
	for i, s := range sizes {
		if i == len(sizes)-1 || total == 0 {
			out[i] = left
			left = 0
			continue
		}
		out[i] = int(int64(n) * int64(s) / int64(total))
		left -= out[i]
	}
	return out
}

type arrowRequest struct {
	client  *export.Client
	v2      [][]byte
	v1      []export.WriteExchange
	samples []int
	bytes   int
}

func (r *arrowRequest) Parts() int            { return len(r.samples) }
func (r *arrowRequest) PartSamples(i int) int { return r.samples[i] }
func (r *arrowRequest) Bytes() int            { return r.bytes }
func (r *arrowRequest) Release()              {}

func (r *arrowRequest) Send(ctx context.Context, i int) (export.Outcome, error) {
	if r.v2 != nil {
		return export.Outcome{}, r.client.WriteArrow(ctx, r.v2[i])
	}
	return export.Outcome{}, r.client.WriteV1(ctx, r.v1[i])
}

// pprofFormat writes one gzipped pprof file per flush.
type pprofFormat struct {
	sink *pprofout.Sink
}

func newPprofFormat(cfg Config, env formatEnv) (*pprofFormat, error) {
	pcfg := pprofout.DefaultConfig()
	pcfg.Dir = cfg.Dir
	pcfg.MaxBytes = int64(cfg.MaxBytes)
	sink, err := pprofout.NewSink(pcfg, env.logger)
	if err != nil {
		return nil, fmt.Errorf("prepare the pprof directory: %w", err)
	}
	if env.reg != nil {
		deleted := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tandem_encoder_pprof_files_deleted_total",
			Help: "pprof files a pprof output deleted from its directory, the oldest first, to keep it under its size bound (max_bytes, --output-dir-max-bytes).",
		}, func() float64 { return float64(sink.Deleted()) })
		if err := env.reg.Register(deleted); err != nil {
			return nil, fmt.Errorf("register the pprof output's metrics: %w", err)
		}
	}
	return &pprofFormat{sink: sink}, nil
}

func (p *pprofFormat) Close() error { return nil }

func (p *pprofFormat) Encode(f *aggregate.Flush) (export.Request, error) {
	data, err := pprofout.Encode(f)
	if err != nil {
		return nil, err
	}
	return &pprofRequest{sink: p.sink, data: data, end: f.EndUnixNano, samples: f.Events}, nil
}

type pprofRequest struct {
	sink    *pprofout.Sink
	data    []byte
	end     int64
	samples int
}

func (r *pprofRequest) Parts() int          { return 1 }
func (r *pprofRequest) PartSamples(int) int { return r.samples }
func (r *pprofRequest) Bytes() int          { return len(r.data) }
func (r *pprofRequest) Release()            {}

// Send writes the file. Every failure is retried: a directory that is
// unwritable or full now may not be later.
func (r *pprofRequest) Send(context.Context, int) (export.Outcome, error) {
	if _, err := r.sink.WriteEncoded(r.data, r.end); err != nil {
		return export.Outcome{}, retry.Transient(err)
	}
	return export.Outcome{}, nil
}
