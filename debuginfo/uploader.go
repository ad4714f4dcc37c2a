package debuginfo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tandem-profiler/tandem/internal/grpcretry"
	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/internal/retry"
	"github.com/tandem-profiler/tandem/schema"
	pb "github.com/tandem-profiler/tandem/schema/parca/parca/debuginfo/v1alpha1"
)

// ReasonUploadInProgress is the server's exact ShouldInitiateUpload reason
// when another upload of the same build id is under way and not stale:
// the only "no" that is retried (after Config.RetryLater).
const ReasonUploadInProgress = "A previous upload is still in-progress and not stale yet (only stale uploads can be retried)."

// Results of one upload attempt (the "result" label of
// tandem_encoder_debuginfo_uploads_total).
const (
	resultSuccess      = "success"     // uploaded and marked finished
	resultNotNeeded    = "not_needed"  // the server has it (or will not take it): never again
	resultRetryLater   = "retry_later" // in progress elsewhere, or a precondition failed: not for RetryLater
	resultRejected     = "rejected"    // invalid, unsupported strategy, not an ELF, empty: never again
	resultFailed       = "failed"      // RPC, transport or I/O error: retried at the next notice
	resultShutdownDrop = "shutdown"    // still queued at Close
	resultTimeout      = "timeout"     // Config.Timeout elapsed
)

// Uploader uploads executables' symbols. See the package documentation.
type Uploader struct {
	client  pb.DebuginfoServiceClient
	http    *http.Client
	logger  *slog.Logger
	cfg     Config
	scratch string
	dnr     *doNotRetry
	m       metrics

	ctx      context.Context // cancelled when Close gives up waiting
	cancel   context.CancelFunc
	stopping atomic.Bool // set by Close: queued jobs are dropped, not started

	mu       sync.Mutex
	closed   bool
	inFlight map[schema.FileID]struct{} // queued or running
	queue    chan job
	lastWarn time.Time // rate limit of drop and failure warnings
	warned   int       // warnings suppressed since lastWarn
	workers  sync.WaitGroup
}

type job struct {
	notice schema.ExecutableNotice
	file   *os.File
}

type metrics struct {
	dropped     *prometheus.CounterVec
	skipped     *prometheus.CounterVec
	uploads     *prometheus.CounterVec
	bytes       prometheus.Counter
	stripBytes  *prometheus.CounterVec
	duration    prometheus.Histogram
	queued      prometheus.Gauge
	descriptors prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (metrics, error) {
	m := metrics{
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_debuginfo_dropped_total",
			Help: "Executables not uploaded because the upload queue was full (--debuginfo-upload-queue-size) or the uploader was closing.",
		}, []string{"reason"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_debuginfo_skipped_total",
			Help: "Executables not uploaded by design: no descriptor (dumps), in the do-not-retry cache, already queued.",
		}, []string{"reason"}),
		uploads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_debuginfo_uploads_total",
			Help: "Upload attempts by result.",
		}, []string{"result"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_debuginfo_uploaded_bytes_total",
			Help: "Payload bytes of finished uploads.",
		}),
		stripBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_debuginfo_strip_bytes_total",
			Help: "Bytes read from executables (input) and written as stripped copies (output).",
		}, []string{"direction"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tandem_encoder_debuginfo_upload_duration_seconds",
			Help:    "Time of successful uploads, ShouldInitiateUpload to MarkUploadFinished.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 9),
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_encoder_debuginfo_queue_length",
			Help: "Executables waiting for an upload worker.",
		}),
		descriptors: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_encoder_debuginfo_open_descriptors",
			Help: "Executable descriptors the uploader holds (queued or uploading).",
		}),
	}
	if err := prom.Register(reg, "debuginfo", m.dropped, m.skipped, m.uploads, m.bytes, m.stripBytes, m.duration, m.queued, m.descriptors); err != nil {
		return m, err
	}
	return m, nil
}

// New starts an uploader talking to the DebuginfoService on conn. With
// cfg.Strip it removes and recreates its scratch directory under
// cfg.TempDir. Metrics go to reg (nil: not registered).
func New(cfg Config, conn grpc.ClientConnInterface, logger *slog.Logger, reg prometheus.Registerer) (*Uploader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	u := &Uploader{
		client:   pb.NewDebuginfoServiceClient(conn),
		http:     &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		logger:   logger,
		cfg:      cfg,
		dnr:      newDoNotRetry(cfg.CacheSize, time.Now),
		m:        m,
		inFlight: make(map[schema.FileID]struct{}),
		queue:    make(chan job, cfg.QueueSize),
	}
	if cfg.Strip {
		u.scratch = cfg.ScratchDir()
		if err := os.RemoveAll(u.scratch); err != nil {
			return nil, fmt.Errorf("clean --debuginfo-temp-dir: %w", err)
		}
		// Mkdir, not MkdirAll: in a shared /tmp, whatever another user put
		// at this name since RemoveAll (a symlink) makes it fail.
		if err := os.Mkdir(u.scratch, 0o700); err != nil {
			return nil, fmt.Errorf("create scratch directory in --debuginfo-temp-dir: %w", err)
		}
	}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	u.workers.Add(cfg.MaxParallel)
	for range cfg.MaxParallel {
		go u.work()
	}
	return u, nil
}

// BuildID returns the key an executable is uploaded under
// (schema.KeyOf) and its type.
func BuildID(n *schema.ExecutableNotice) (string, pb.BuildIDType) {
	key := schema.KeyOf(n.GNUBuildID, n.FileID)
	if key.Kind == schema.KeyGNUBuildID {
		return key.String(), pb.BuildIDType_BUILD_ID_TYPE_GNU
	}
	return n.FileID.Hex(), pb.BuildIDType_BUILD_ID_TYPE_HASH
}

// Submit queues an upload of f, described by n. It never blocks and always
// takes ownership of f (nil is counted as a notice without descriptor):
// f is closed once the upload is done, or at once when it is skipped or
// dropped. It reports whether the upload was queued.
func (u *Uploader) Submit(n *schema.ExecutableNotice, f *os.File) bool {
	if f == nil {
		u.m.skipped.WithLabelValues("no_descriptor").Inc()
		return false
	}
	reject := func(counter *prometheus.CounterVec, reason string) bool {
		f.Close()
		counter.WithLabelValues(reason).Inc()
		return false
	}
	if u.dnr.contains(n.FileID) {
		return reject(u.m.skipped, "do_not_retry")
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return reject(u.m.dropped, "closed")
	}
	if _, ok := u.inFlight[n.FileID]; ok {
		return reject(u.m.skipped, "in_progress")
	}
	select {
	case u.queue <- job{notice: *n, file: f}:
		u.inFlight[n.FileID] = struct{}{}
		u.m.queued.Inc()
		u.m.descriptors.Inc()
		return true
	default:
		u.warnLocked("debuginfo upload queue full: executable dropped (raise --debuginfo-upload-queue-size or --debuginfo-upload-max-parallel)",
			"path", n.Path, "queue_size", u.cfg.QueueSize)
		return reject(u.m.dropped, "queue_full")
	}
}

// warnLocked logs at most one warning every 10 s, saying how many it
// suppressed. u.mu must be held.
func (u *Uploader) warnLocked(msg string, args ...any) {
	now := time.Now()
	if now.Sub(u.lastWarn) < 10*time.Second {
		u.warned++
		return
	}
	if u.warned > 0 {
		args = append(args, "suppressed_warnings", u.warned)
	}
	u.lastWarn, u.warned = now, 0
	u.logger.Warn(msg, args...)
}

func (u *Uploader) warn(msg string, args ...any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.warnLocked(msg, args...)
}

func (u *Uploader) work() {
	defer u.workers.Done()
	for j := range u.queue {
		u.m.queued.Dec()
		u.process(j)
	}
}

func (u *Uploader) process(j job) {
	defer func() {
		j.file.Close()
		u.m.descriptors.Dec()
		u.mu.Lock()
		delete(u.inFlight, j.notice.FileID)
		u.mu.Unlock()
	}()
	if u.stopping.Load() {
		u.m.dropped.WithLabelValues(resultShutdownDrop).Inc()
		return
	}
	ctx, cancel := context.WithTimeout(u.ctx, u.cfg.Timeout)
	defer cancel()
	start := time.Now()
	result, size, err := u.upload(ctx, &j.notice, j.file)
	if err != nil && ctx.Err() != nil && u.ctx.Err() == nil {
		result = resultTimeout
	}
	u.m.uploads.WithLabelValues(result).Inc()
	buildID, _ := BuildID(&j.notice)
	log := []any{"path", j.notice.Path, "build_id", buildID}
	switch {
	case err != nil:
		if u.ctx.Err() == nil {
			u.warn("debuginfo upload failed", append(log, "result", result, "err", err)...)
		}
	case result == resultSuccess:
		d := time.Since(start)
		u.m.duration.Observe(d.Seconds())
		u.m.bytes.Add(float64(size))
		u.logger.Debug("uploaded debuginfo", append(log, "bytes", size, "duration", d)...)
	default:
		u.logger.Debug("debuginfo not uploaded", append(log, "result", result)...)
	}
}

// upload runs the client flow for one executable and returns the result
// label, the payload size, and the error that ended it (if any).
func (u *Uploader) upload(ctx context.Context, n *schema.ExecutableNotice, f *os.File) (string, int64, error) {
	buildID, idType := BuildID(n)
	id := n.FileID

	var should *pb.ShouldInitiateUploadResponse
	err := u.call(ctx, func(ctx context.Context) (err error) {
		should, err = u.client.ShouldInitiateUpload(ctx, &pb.ShouldInitiateUploadRequest{
			BuildId: buildID, BuildIdType: idType, Type: pb.DebuginfoType_DEBUGINFO_TYPE_DEBUGINFO_UNSPECIFIED,
		})
		return err
	})
	if err != nil {
		return resultFailed, 0, fmt.Errorf("should initiate upload: %w", err)
	}
	if !should.GetShouldInitiateUpload() {
		if should.GetReason() == ReasonUploadInProgress {
			u.dnr.add(id, u.cfg.RetryLater)
			return resultRetryLater, 0, nil
		}
		u.dnr.add(id, 0)
		return resultNotNeeded, 0, nil
	}

	payload, size, cleanup, err := u.payload(f)
	if err != nil {
		if errors.Is(err, ErrNotELF) || errors.Is(err, ErrNothingToKeep) || errors.Is(err, errEmpty) {
			u.dnr.add(id, 0)
			return resultRejected, 0, nil
		}
		return resultFailed, 0, err
	}
	defer cleanup()

	var initResp *pb.InitiateUploadResponse
	err = u.call(ctx, func(ctx context.Context) (err error) {
		initResp, err = u.client.InitiateUpload(ctx, &pb.InitiateUploadRequest{
			BuildId: buildID, BuildIdType: idType, Type: pb.DebuginfoType_DEBUGINFO_TYPE_DEBUGINFO_UNSPECIFIED,
			Hash: id.Hex(), Size: size,
		})
		return err
	})
	switch status.Code(err) {
	case codes.OK:
	case codes.FailedPrecondition:
		u.dnr.add(id, u.cfg.RetryLater)
		return resultRetryLater, 0, nil
	case codes.AlreadyExists:
		u.dnr.add(id, 0)
		return resultNotNeeded, 0, nil
	case codes.InvalidArgument:
		u.dnr.add(id, 0)
		return resultRejected, 0, fmt.Errorf("initiate upload: %w", err)
	default:
		return resultFailed, 0, fmt.Errorf("initiate upload: %w", err)
	}
	ins := initResp.GetUploadInstructions()
	if ins == nil {
		u.dnr.add(id, 0)
		return resultRejected, 0, errors.New("initiate upload: no upload instructions")
	}

	switch ins.GetUploadStrategy() {
	case pb.UploadInstructions_UPLOAD_STRATEGY_GRPC:
		err = u.uploadGRPC(ctx, ins, payload, size)
		if status.Code(err) == codes.AlreadyExists {
			u.dnr.add(id, 0)
			return resultNotNeeded, 0, nil
		}
	case pb.UploadInstructions_UPLOAD_STRATEGY_SIGNED_URL:
		err = u.uploadSignedURL(ctx, ins.GetSignedUrl(), payload, size)
	default:
		u.dnr.add(id, 0)
		return resultRejected, 0, fmt.Errorf("upload strategy %v is not supported", ins.GetUploadStrategy())
	}
	if err != nil {
		return resultFailed, 0, err
	}

	err = u.call(ctx, func(ctx context.Context) error {
		_, err := u.client.MarkUploadFinished(ctx, &pb.MarkUploadFinishedRequest{BuildId: buildID, UploadId: ins.GetUploadId()})
		return err
	})
	if err != nil {
		return resultFailed, 0, fmt.Errorf("mark upload finished: %w", err)
	}
	u.dnr.add(id, 0)
	return resultSuccess, size, nil
}

var errEmpty = errors.New("empty file")

// payload returns what to upload: a stripped copy in the scratch
// directory, or f itself. cleanup removes the copy.
func (u *Uploader) payload(f *os.File) (io.ReaderAt, int64, func(), error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, nil, fmt.Errorf("stat executable: %w", err)
	}
	if fi.Size() == 0 || !fi.Mode().IsRegular() {
		return nil, 0, nil, errEmpty
	}
	if !u.cfg.Strip {
		return f, fi.Size(), func() {}, nil
	}
	tmp, err := os.CreateTemp(u.scratch, "strip-*")
	if err != nil {
		return nil, 0, nil, fmt.Errorf("create stripped copy: %w", err)
	}
	cleanup := func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}
	st, err := Strip(tmp, f, fi.Size())
	if err != nil {
		cleanup()
		return nil, 0, nil, fmt.Errorf("strip: %w", err)
	}
	u.m.stripBytes.WithLabelValues("input").Add(float64(st.InputSize))
	u.m.stripBytes.WithLabelValues("output").Add(float64(st.OutputSize))
	return tmp, st.OutputSize, cleanup, nil
}

func (u *Uploader) uploadGRPC(ctx context.Context, ins *pb.UploadInstructions, payload io.ReaderAt, size int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream on early return
	stream, err := u.client.Upload(ctx, grpc.MaxCallSendMsgSize(maxUploadMsgSize))
	if err != nil {
		return fmt.Errorf("open upload stream: %w", err)
	}
	err = stream.Send(&pb.UploadRequest{Data: &pb.UploadRequest_Info{Info: &pb.UploadInfo{
		BuildId: ins.GetBuildId(), UploadId: ins.GetUploadId(), Type: ins.GetType(),
	}}})
	if err == nil {
		buf := make([]byte, min(int64(u.cfg.ChunkSize), size))
		r := io.NewSectionReader(payload, 0, size)
		for sent := int64(0); sent < size && err == nil; {
			var k int
			k, err = io.ReadFull(r, buf[:min(int64(len(buf)), size-sent)])
			if err != nil {
				return fmt.Errorf("read payload at %d of %d bytes: %w", sent, size, err)
			}
			err = stream.Send(&pb.UploadRequest{Data: &pb.UploadRequest_ChunkData{ChunkData: buf[:k]}})
			sent += int64(k)
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil // the server ended the stream: its status comes from CloseAndRecv
	}
	if err != nil {
		return fmt.Errorf("send upload: %w", err)
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if resp.GetSize() != uint64(size) {
		return fmt.Errorf("upload: server received %d of %d bytes", resp.GetSize(), size)
	}
	return nil
}

func (u *Uploader) uploadSignedURL(ctx context.Context, url string, payload io.ReaderAt, size int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, io.NewSectionReader(payload, 0, size))
	if err != nil {
		return fmt.Errorf("signed URL: %w", err)
	}
	req.ContentLength = size
	resp, err := u.http.Do(req)
	if err != nil {
		return fmt.Errorf("put to signed URL: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("put to signed URL: %s", resp.Status)
	}
	return nil
}

// call runs a unary RPC, retrying what grpcretry.Retryable calls
// retryable with the one retry loop, at most RPCRetries times, waiting at
// least what the server asks for (parca-agent retries Unavailable and
// ResourceExhausted the same way).
func (u *Uploader) call(ctx context.Context, rpc func(context.Context) error) error {
	return retry.Do(ctx, u.cfg.RPCRetry.Retrier(grpcretry.ServerDelay), u.cfg.RPCRetries+1, grpcretry.Retryable, rpc)
}

// Close stops taking executables, drops (and closes) the queued ones, and
// waits for the running uploads until ctx ends, then cancels them. Every
// descriptor is closed when it returns. It returns ctx's error when
// uploads had to be cancelled.
func (u *Uploader) Close(ctx context.Context) error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.closed = true
	u.stopping.Store(true)
	close(u.queue)
	u.mu.Unlock()

	done := make(chan struct{})
	go func() { u.workers.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("debuginfo uploads cancelled: %w", ctx.Err())
		u.cancel()
		<-done
	}
	u.cancel()
	if u.scratch != "" {
		os.RemoveAll(u.scratch)
	}
	return err
}
