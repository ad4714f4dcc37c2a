package output

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tandem-profiler/tandem/encoder"
	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/encoder/otlp"
	"github.com/tandem-profiler/tandem/encoder/pprofout"
	"github.com/tandem-profiler/tandem/internal/grpcretry"
	"github.com/tandem-profiler/tandem/schema"
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

func (o *otlpFormat) Encode(f *encoder.Flush) (export.Request, error) {
	o.mu.Lock()
	reqs, err := o.enc.EncodeLimited(f, o.maxMsg)
	o.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("encode OTLP: %w", err)
	}
	r := &otlpRequest{format: o, flush: f, reqs: reqs, samples: make([]int, len(reqs))}
	var sizer pprofile.ProtoMarshaler
	for i, req := range reqs {
		r.samples[i] = observations(req)
		r.bytes += sizer.ProfilesSize(req.Profiles())
	}
	return r, nil
}

// observations counts the samples (timestamps) an OTLP request carries.
func observations(req pprofileotlp.ExportRequest) int {
	n := 0
	rps := req.Profiles().ResourceProfiles()
	for i := 0; i < rps.Len(); i++ {
		sps := rps.At(i).ScopeProfiles()
		for j := 0; j < sps.Len(); j++ {
			ps := sps.At(j).Profiles()
			for k := 0; k < ps.Len(); k++ {
				ss := ps.At(k).Samples()
				for s := 0; s < ss.Len(); s++ {
					n += ss.At(s).TimestampsUnixNano().Len()
				}
			}
		}
	}
	return n
}

func profileCount(req pprofileotlp.ExportRequest) int {
	n := 0
	rps := req.Profiles().ResourceProfiles()
	for i := 0; i < rps.Len(); i++ {
		sps := rps.At(i).ScopeProfiles()
		for j := 0; j < sps.Len(); j++ {
			n += sps.At(j).Profiles().Len()
		}
	}
	return n
}

// otlpRequest is one flush as OTLP requests. When a receiver refuses a
// single-request flush that carries several profile types with a permanent
// error (a Pyroscope answers InvalidArgument for the types it does not
// take, having stored the others), the request is resent one profile type
// at a time, and only the types refused again are counted lost.
type otlpRequest struct {
	format  *otlpFormat
	flush   *encoder.Flush
	reqs    []pprofileotlp.ExportRequest
	samples []int
	bytes   int
	byType  []*typeRequest // set once split
}

type typeRequest struct {
	req     pprofileotlp.ExportRequest
	samples int
	done    bool
}

func (r *otlpRequest) Parts() int            { return len(r.reqs) }
func (r *otlpRequest) PartSamples(i int) int { return r.samples[i] }
func (r *otlpRequest) Bytes() int            { return r.bytes }

func (r *otlpRequest) Release() {
	for _, req := range r.reqs {
		r.format.enc.Release(req)
	}
	for _, t := range r.byType {
		r.format.enc.Release(t.req)
	}
}

func (r *otlpRequest) Send(ctx context.Context, i int) (int, error) {
	if r.byType != nil {
		return r.sendByType(ctx)
	}
	rejected, _, err := r.format.client.ExportOTLP(ctx, r.reqs[i])
	if err != nil {
		// InvalidArgument is about the content: find out which profile
		// types it is about. Other refusals (authentication, ...) are not.
		if len(r.reqs) == 1 && status.Code(err) == codes.InvalidArgument && r.split() {
			return r.sendByType(ctx)
		}
		return 0, err
	}
	return r.partial(i, rejected), nil
}

// partial converts a partial success's rejected profiles into samples:
// exact when every profile was rejected, else proportional (OTLP does not
// say which profiles it rejected).
func (r *otlpRequest) partial(i int, rejectedProfiles int64) int {
	if rejectedProfiles <= 0 {
		return 0
	}
	profiles := profileCount(r.reqs[i])
	if int(rejectedProfiles) >= profiles || profiles == 0 {
		return r.samples[i]
	}
	return int(int64(r.samples[i]) * rejectedProfiles / int64(profiles))
}

// split encodes the flush once per origin; false when it has only one.
func (r *otlpRequest) split() bool {
	var origins []schema.Origin
	seen := map[schema.Origin]bool{}
	for i := range r.flush.Samples {
		if o := r.flush.Samples[i].Origin; !seen[o] {
			seen[o] = true
			origins = append(origins, o)
		}
	}
	if len(origins) < 2 {
		return false
	}
	r.format.mu.Lock()
	defer r.format.mu.Unlock()
	for _, o := range origins {
		sub := *r.flush
		sub.Samples = nil
		n := 0
		for i := range r.flush.Samples {
			if s := &r.flush.Samples[i]; s.Origin == o {
				sub.Samples = append(sub.Samples, *s)
				n += len(s.Timestamps)
			}
		}
		sub.Events = n
		r.byType = append(r.byType, &typeRequest{req: r.format.enc.Encode(&sub), samples: n})
	}
	return true
}

// sendByType sends the profile types not yet delivered; a permanent error
// loses only that type.
func (r *otlpRequest) sendByType(ctx context.Context) (int, error) {
	lost := 0
	for _, t := range r.byType {
		if t.done {
			continue
		}
		_, _, err := r.format.client.ExportOTLP(ctx, t.req)
		if err != nil && grpcretry.Retryable(err) {
			return 0, err // the next attempt resends only what is left
		}
		t.done = true
		if err != nil {
			lost += t.samples
		}
	}
	return lost, nil
}

// arrowFormat encodes Parca's Arrow records (v2: WriteArrow payloads, v1:
// Write exchanges).
type arrowFormat struct {
	v2     *arrow.V2Encoder
	v1     *arrow.V1Encoder
	client *export.Client
}

func newArrowFormat(cfg Config, client *export.Client, lbls *labels.Labeler) (*arrowFormat, error) {
	acfg := cfg.Arrow
	acfg.MaxMessageBytes = cfg.Remote.MaxCallSendMsgSize
	a := &arrowFormat{client: client}
	var labeler arrow.Labeler // nil, not a nil *labels.Labeler: the encoders test for nil
	if lbls != nil {
		labeler = lbls
	}
	var err error
	if cfg.Format == FormatArrowV2 {
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

func (a *arrowFormat) Encode(f *encoder.Flush) (export.Request, error) {
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

func (r *arrowRequest) Send(ctx context.Context, i int) (int, error) {
	if r.v2 != nil {
		return 0, r.client.WriteArrow(ctx, r.v2[i])
	}
	return 0, r.client.WriteV1(ctx, r.v1[i])
}

// pprofFormat writes one gzipped pprof file per flush.
type pprofFormat struct {
	sink *pprofout.Sink
}

func newPprofFormat(cfg Config, logger *slog.Logger) (*pprofFormat, error) {
	pcfg := pprofout.DefaultConfig()
	pcfg.Dir = cfg.Dir
	sink, err := pprofout.NewSink(pcfg, logger)
	if err != nil {
		return nil, fmt.Errorf("prepare the pprof directory: %w", err)
	}
	return &pprofFormat{sink: sink}, nil
}

func (p *pprofFormat) Close() error { return nil }

func (p *pprofFormat) Encode(f *encoder.Flush) (export.Request, error) {
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
func (r *pprofRequest) Send(context.Context, int) (int, error) {
	if _, err := r.sink.WriteEncoded(r.data, r.end); err != nil {
		return 0, grpcretry.Transient(err)
	}
	return 0, nil
}
