package parcatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/tandem-profiler/tandem/schema/parca/parca/debuginfo/v1alpha1"
)

// The reasons Parca's server gives in ShouldInitiateUpload
// (docs/parca-protocols.md §2.4). Clients compare only
// ReasonUploadInProgress.
const (
	ReasonFirstTime        = "First time we see this Build ID, and it does not exist in debuginfod, therefore please upload!"
	ReasonUploadInProgress = "A previous upload is still in-progress and not stale yet (only stale uploads can be retried)."
	ReasonStale            = "A previous upload was started but not finished and is now stale, so it can be retried."
	ReasonInProgressForced = "A previous upload is still in-progress, but accepting restart because it's requested to be forced."
	ReasonExists           = "Debuginfo already exists and is not marked as invalid, therefore no new upload is needed."
	ReasonInvalidNoHash    = "Debuginfo already exists but is marked as invalid, therefore a new upload is needed. Hash the debuginfo and initiate the upload."
	ReasonEqual            = "Debuginfo already exists and is marked as invalid, but the proposed hash is the same as the one already available, therefore the upload is not accepted as it would result in the same invalid debuginfo."
	ReasonInvalidNew       = "Debuginfo already exists but is marked as invalid, therefore a new upload will be accepted."
	ReasonForced           = "Debuginfo already exists, but accepting it because it's requested to be forced."
)

// SymbolStoreConfig holds the server flags of §2.4 that change what a
// client sees.
type SymbolStoreConfig struct {
	SignedURL         bool          // hand out signed URLs (an HTTP server of the store's) instead of the gRPC stream
	MaxUploadSize     int64         // 0: Parca's default, 1,000,000,000 bytes
	MaxUploadDuration time.Duration // 0: Parca's default, 15m
}

// SymbolStore is a DebuginfoService that behaves as Parca's server does
// (docs/parca-protocols.md §2.4): the ShouldInitiateUpload decision table
// with its exact reasons, InitiateUpload (hash and size required, the
// decision re-checked, the size limit), the gRPC Upload stream (info
// first, then chunks; Unimplemented when signed URLs are on) or a signed
// URL, and MarkUploadFinished. What was uploaded is then symbolized the
// way Parca's symbolizer does (see Symbolize), so a test can prove that an
// upload names the frames that point at it.
type SymbolStore struct {
	pb.UnimplementedDebuginfoServiceServer

	cfg  SymbolStoreConfig
	addr string
	http *httptest.Server

	mu           sync.Mutex
	entries      map[string]*Debuginfo
	received     int
	calls        map[string]int
	now          func() time.Time
	beforeShould func() error
	liners       map[string]linerResult // build id -> parsed upload
}

// Debuginfo is the server's state for one build id.
type Debuginfo struct {
	Uploading bool // an upload was initiated and not marked finished
	Hash      string
	UploadID  string
	Started   time.Time
	Invalid   bool   // the upload is not an ELF file (the quality check)
	Data      []byte // what was uploaded
}

// NewSymbolStore returns an empty store with Parca's default flags that is
// not served anywhere (register it on a grpc.Server).
func NewSymbolStore() *SymbolStore { return newSymbolStore(SymbolStoreConfig{}) }

func newSymbolStore(cfg SymbolStoreConfig) *SymbolStore {
	if cfg.MaxUploadSize == 0 {
		cfg.MaxUploadSize = 1_000_000_000
	}
	if cfg.MaxUploadDuration == 0 {
		cfg.MaxUploadDuration = 15 * time.Minute
	}
	return &SymbolStore{cfg: cfg, entries: map[string]*Debuginfo{}, calls: map[string]int{},
		now: time.Now, liners: map[string]linerResult{}}
}

// StartSymbolStore serves a SymbolStore with Parca's default flags alone on
// 127.0.0.1 with the given server options until the test ends, and returns
// it and its address.
func StartSymbolStore(t testing.TB, opts ...grpc.ServerOption) (*SymbolStore, string) {
	t.Helper()
	return StartSymbolStoreConfig(t, SymbolStoreConfig{}, opts...)
}

// StartSymbolStoreConfig is StartSymbolStore with other server flags; with
// SignedURL it also serves the signed URLs over HTTP on 127.0.0.1.
func StartSymbolStoreConfig(t testing.TB, cfg SymbolStoreConfig, opts ...grpc.ServerOption) (*SymbolStore, string) {
	t.Helper()
	store := newSymbolStore(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(64 << 20)}, opts...)...)
	pb.RegisterDebuginfoServiceServer(gs, store)
	go func() { _ = gs.Serve(ln) }()
	store.addr = ln.Addr().String()
	if cfg.SignedURL {
		store.http = httptest.NewServer(http.HandlerFunc(store.put))
		t.Cleanup(store.http.Close)
	}
	t.Cleanup(gs.Stop)
	return store, store.addr
}

// Dial returns a plaintext client connection to a started store, closed
// when the test ends.
func (s *SymbolStore) Dial(t testing.TB) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Uploaded returns the bytes of a finished upload.
func (s *SymbolStore) Uploaded(buildID string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[buildID]
	if !ok || e.Uploading || e.Data == nil {
		return nil, false
	}
	return e.Data, true
}

// Finished returns the build ids whose uploads were marked finished.
func (s *SymbolStore) Finished() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for id, e := range s.entries {
		if !e.Uploading && e.Data != nil {
			out = append(out, id)
		}
	}
	return out
}

// Received returns how many uploads were received, finished or not.
func (s *SymbolStore) Received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received
}

// Entry returns the state of a build id.
func (s *SymbolStore) Entry(buildID string) (Debuginfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[buildID]
	if !ok {
		return Debuginfo{}, false
	}
	return *e, true
}

// Set replaces the state of a build id (to test what a client does with a
// server that has seen it before).
func (s *SymbolStore) Set(buildID string, e Debuginfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[buildID] = &e
	delete(s.liners, buildID)
}

// Calls returns how often a method was called: ShouldInitiateUpload,
// InitiateUpload, Upload, MarkUploadFinished, or PUT (a signed URL).
func (s *SymbolStore) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// SetClock replaces the server's clock (nil: the real one).
func (s *SymbolStore) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now == nil {
		now = time.Now
	}
	s.now = now
}

// MaxUploadDuration is the server's --debuginfo-upload-max-duration.
func (s *SymbolStore) MaxUploadDuration() time.Duration { return s.cfg.MaxUploadDuration }

// SetBeforeShould sets a hook run at the start of every
// ShouldInitiateUpload; an error it returns is the call's answer.
func (s *SymbolStore) SetBeforeShould(hook func() error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beforeShould = hook
}

// shouldLocked is the decision table. s.mu is held.
func (s *SymbolStore) shouldLocked(buildID, hash string, force bool) (bool, string, error) {
	if len(buildID) <= 2 {
		return false, "", status.Errorf(codes.InvalidArgument, "invalid build id %q", buildID)
	}
	e, ok := s.entries[buildID]
	switch {
	case !ok:
		return true, ReasonFirstTime, nil
	case e.Uploading && force:
		return true, ReasonInProgressForced, nil
	case e.Uploading && e.Started.Add(s.cfg.MaxUploadDuration+2*time.Minute).Before(s.now()):
		return true, ReasonStale, nil
	case e.Uploading:
		return false, ReasonUploadInProgress, nil
	case !e.Invalid && force:
		return true, ReasonForced, nil
	case !e.Invalid:
		return false, ReasonExists, nil
	case hash == "":
		return true, ReasonInvalidNoHash, nil
	case hash == e.Hash:
		return false, ReasonEqual, nil
	default:
		return true, ReasonInvalidNew, nil
	}
}

// ShouldInitiateUpload answers from the decision table.
func (s *SymbolStore) ShouldInitiateUpload(_ context.Context, req *pb.ShouldInitiateUploadRequest) (*pb.ShouldInitiateUploadResponse, error) {
	s.mu.Lock()
	s.calls["ShouldInitiateUpload"]++
	hook := s.beforeShould
	s.mu.Unlock()
	if hook != nil {
		if err := hook(); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ok, reason, err := s.shouldLocked(req.GetBuildId(), req.GetHash(), req.GetForce())
	if err != nil {
		return nil, err
	}
	return &pb.ShouldInitiateUploadResponse{ShouldInitiateUpload: ok, Reason: reason}, nil
}

// InitiateUpload re-checks the decision and hands out upload instructions.
func (s *SymbolStore) InitiateUpload(_ context.Context, req *pb.InitiateUploadRequest) (*pb.InitiateUploadResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["InitiateUpload"]++
	if req.GetHash() == "" || req.GetSize() == 0 {
		return nil, status.Error(codes.InvalidArgument, "hash and size are required")
	}
	ok, reason, err := s.shouldLocked(req.GetBuildId(), req.GetHash(), req.GetForce())
	if err != nil {
		return nil, err
	}
	if !ok {
		if reason == ReasonEqual {
			return nil, status.Error(codes.AlreadyExists, reason)
		}
		return nil, status.Error(codes.FailedPrecondition, reason)
	}
	if req.GetSize() > s.cfg.MaxUploadSize {
		return nil, status.Errorf(codes.InvalidArgument, "upload size %d exceeds maximum %d", req.GetSize(), s.cfg.MaxUploadSize)
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	uploadID := hex.EncodeToString(id)
	s.entries[req.GetBuildId()] = &Debuginfo{Uploading: true, Hash: req.GetHash(), UploadID: uploadID, Started: s.now()}
	delete(s.liners, req.GetBuildId())
	ins := &pb.UploadInstructions{BuildId: req.GetBuildId(), UploadId: uploadID, Type: req.GetType(),
		UploadStrategy: pb.UploadInstructions_UPLOAD_STRATEGY_GRPC}
	if s.cfg.SignedURL {
		ins.UploadStrategy = pb.UploadInstructions_UPLOAD_STRATEGY_SIGNED_URL
		ins.SignedUrl = fmt.Sprintf("%s/%s/debuginfo?upload_id=%s", s.http.URL, req.GetBuildId(), uploadID)
	}
	return &pb.InitiateUploadResponse{UploadInstructions: ins}, nil
}

// Upload takes the info message, then chunks until EOF.
func (s *SymbolStore) Upload(stream grpc.ClientStreamingServer[pb.UploadRequest, pb.UploadResponse]) error {
	s.mu.Lock()
	s.calls["Upload"]++
	s.mu.Unlock()
	if s.cfg.SignedURL {
		return status.Error(codes.Unimplemented, "signed URLs are enabled: use them")
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	info := first.GetInfo()
	if info == nil {
		return status.Error(codes.InvalidArgument, "the first upload message must carry the upload info")
	}
	if err := s.checkUpload(info.GetBuildId(), info.GetUploadId()); err != nil {
		return err
	}
	var buf bytes.Buffer
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if m.GetInfo() != nil {
			return status.Error(codes.InvalidArgument, "upload info after the first message")
		}
		buf.Write(m.GetChunkData())
	}
	s.store(info.GetBuildId(), buf.Bytes())
	return stream.SendAndClose(&pb.UploadResponse{BuildId: info.GetBuildId(), Size: uint64(buf.Len())})
}

func (s *SymbolStore) store(buildID string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[buildID]; ok {
		e.Data = data
	}
	s.received++
}

func (s *SymbolStore) checkUpload(buildID, uploadID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[buildID]
	if !ok || !e.Uploading {
		return status.Errorf(codes.FailedPrecondition, "no upload initiated for build id %q", buildID)
	}
	if e.UploadID != uploadID {
		return status.Error(codes.InvalidArgument, "upload id mismatch")
	}
	return nil
}

// put is the signed-URL target: PUT /<build id>/debuginfo?upload_id=...
func (s *SymbolStore) put(w http.ResponseWriter, r *http.Request) {
	buildID, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if r.Method != http.MethodPut {
		http.Error(w, "PUT only", http.StatusMethodNotAllowed)
		return
	}
	if err := s.checkUpload(buildID, r.URL.Query().Get("upload_id")); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	b, err := io.ReadAll(r.Body)
	if err != nil || int64(len(b)) != r.ContentLength {
		http.Error(w, "short body", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.calls["PUT"]++
	s.mu.Unlock()
	s.store(buildID, b)
	w.WriteHeader(http.StatusOK)
}

// MarkUploadFinished marks an upload finished. The server's symbolizer
// later marks a file that is not ELF invalid (so a new upload of it is
// accepted); this store does that at once.
func (s *SymbolStore) MarkUploadFinished(_ context.Context, req *pb.MarkUploadFinishedRequest) (*pb.MarkUploadFinishedResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["MarkUploadFinished"]++
	e, ok := s.entries[req.GetBuildId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no metadata for build id %q", req.GetBuildId())
	}
	if e.UploadID != req.GetUploadId() {
		return nil, status.Error(codes.InvalidArgument, "upload id mismatch")
	}
	e.Uploading = false
	e.Invalid = !isELF(e.Data)
	return &pb.MarkUploadFinishedResponse{}, nil
}
