package debuginfo

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
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

// Reasons the Parca server gives (docs/parca-protocols.md §2.4); only
// ReasonUploadInProgress is compared by clients.
const (
	reasonFirstTime     = "First time we see this Build ID, and it does not exist in debuginfod, therefore please upload!"
	reasonStale         = "A previous upload was started but not finished and is now stale, so it can be retried."
	reasonExists        = "Debuginfo already exists and is not marked as invalid, therefore no new upload is needed."
	reasonInvalidNoHash = "Debuginfo already exists but is marked as invalid, therefore a new upload is needed. Hash the debuginfo and initiate the upload."
	reasonEqual         = "Debuginfo already exists and is marked as invalid, but the proposed hash is the same as the one already available, therefore the upload is not accepted as it would result in the same invalid debuginfo."
	reasonInvalidNew    = "Debuginfo already exists but is marked as invalid, therefore a new upload will be accepted."
	reasonForced        = "Debuginfo already exists, but accepting it because it's requested to be forced."
)

// parcaServer is an in-process DebuginfoService that follows the Parca
// server's decision table (§2.4): ShouldInitiateUpload, InitiateUpload
// (re-checking, hash and size required, size limit), the gRPC Upload
// stream (info first, then chunks) or a signed URL served by an httptest
// server, and MarkUploadFinished, which validates the ELF as the server's
// quality check does.
type parcaServer struct {
	pb.UnimplementedDebuginfoServiceServer

	mu          sync.Mutex
	entries     map[string]*storedDebuginfo
	signedURL   bool
	maxSize     int64
	maxDuration time.Duration
	now         func() time.Time
	calls       map[string]int
	// hooks for tests: called at the start of ShouldInitiateUpload.
	beforeShould func() error

	addr string
	http *httptest.Server
}

type storedDebuginfo struct {
	uploading bool // else uploaded
	hash      string
	uploadID  string
	started   time.Time
	invalid   bool
	data      []byte
}

func startParcaServer(t testing.TB, signedURL bool) *parcaServer {
	t.Helper()
	s := &parcaServer{
		entries: make(map[string]*storedDebuginfo), signedURL: signedURL,
		maxSize: 1_000_000_000, maxDuration: 15 * time.Minute, now: time.Now,
		calls: make(map[string]int),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	pb.RegisterDebuginfoServiceServer(gs, s)
	go gs.Serve(ln)
	s.addr = ln.Addr().String()
	s.http = httptest.NewServer(http.HandlerFunc(s.put))
	t.Cleanup(func() { gs.Stop(); s.http.Close() })
	return s
}

func (s *parcaServer) dial(t testing.TB) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func (s *parcaServer) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

func (s *parcaServer) entry(buildID string) (storedDebuginfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[buildID]
	if !ok {
		return storedDebuginfo{}, false
	}
	return *e, true
}

func (s *parcaServer) set(buildID string, e storedDebuginfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries[buildID] = &e
}

// shouldLocked is the server's decision table. s.mu is held.
func (s *parcaServer) shouldLocked(buildID, hash string, force bool) (bool, string, error) {
	if len(buildID) <= 2 {
		return false, "", status.Error(codes.InvalidArgument, "invalid build id")
	}
	e, ok := s.entries[buildID]
	switch {
	case !ok:
		return true, reasonFirstTime, nil
	case e.uploading && force:
		return true, "A previous upload is still in-progress, but accepting restart because it's requested to be forced.", nil
	case e.uploading && e.started.Add(s.maxDuration+2*time.Minute).Before(s.now()):
		return true, reasonStale, nil
	case e.uploading:
		return false, ReasonUploadInProgress, nil
	case !e.invalid && force:
		return true, reasonForced, nil
	case !e.invalid:
		return false, reasonExists, nil
	case hash == "":
		return true, reasonInvalidNoHash, nil
	case hash == e.hash:
		return false, reasonEqual, nil
	default:
		return true, reasonInvalidNew, nil
	}
}

func (s *parcaServer) ShouldInitiateUpload(_ context.Context, req *pb.ShouldInitiateUploadRequest) (*pb.ShouldInitiateUploadResponse, error) {
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

func (s *parcaServer) InitiateUpload(_ context.Context, req *pb.InitiateUploadRequest) (*pb.InitiateUploadResponse, error) {
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
		if reason == reasonEqual {
			return nil, status.Error(codes.AlreadyExists, reason)
		}
		return nil, status.Error(codes.FailedPrecondition, reason)
	}
	if req.GetSize() > s.maxSize {
		return nil, status.Errorf(codes.InvalidArgument, "upload size %d exceeds maximum %d", req.GetSize(), s.maxSize)
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	uploadID := hex.EncodeToString(id)
	s.entries[req.GetBuildId()] = &storedDebuginfo{uploading: true, hash: req.GetHash(), uploadID: uploadID, started: s.now()}
	ins := &pb.UploadInstructions{BuildId: req.GetBuildId(), UploadId: uploadID, Type: req.GetType(),
		UploadStrategy: pb.UploadInstructions_UPLOAD_STRATEGY_GRPC}
	if s.signedURL {
		ins.UploadStrategy = pb.UploadInstructions_UPLOAD_STRATEGY_SIGNED_URL
		ins.SignedUrl = fmt.Sprintf("%s/%s/debuginfo?upload_id=%s", s.http.URL, req.GetBuildId(), uploadID)
	}
	return &pb.InitiateUploadResponse{UploadInstructions: ins}, nil
}

func (s *parcaServer) Upload(stream grpc.ClientStreamingServer[pb.UploadRequest, pb.UploadResponse]) error {
	s.mu.Lock()
	s.calls["Upload"]++
	signed := s.signedURL
	s.mu.Unlock()
	if signed {
		return status.Error(codes.Unimplemented, "signed URLs are enabled: use them")
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	info := first.GetInfo()
	if info == nil {
		return status.Error(codes.InvalidArgument, "first message must be info")
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
			return status.Error(codes.InvalidArgument, "info after the first message")
		}
		buf.Write(m.GetChunkData())
	}
	s.mu.Lock()
	s.entries[info.GetBuildId()].data = buf.Bytes()
	s.mu.Unlock()
	return stream.SendAndClose(&pb.UploadResponse{BuildId: info.GetBuildId(), Size: uint64(buf.Len())})
}

func (s *parcaServer) checkUpload(buildID, uploadID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[buildID]
	if !ok || !e.uploading {
		return status.Error(codes.FailedPrecondition, "no upload initiated")
	}
	if e.uploadID != uploadID {
		return status.Error(codes.InvalidArgument, "upload id mismatch")
	}
	return nil
}

// put is the signed-URL target: PUT /<build id>/debuginfo?upload_id=...
func (s *parcaServer) put(w http.ResponseWriter, r *http.Request) {
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
	s.entries[buildID].data = b
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *parcaServer) MarkUploadFinished(_ context.Context, req *pb.MarkUploadFinishedRequest) (*pb.MarkUploadFinishedResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["MarkUploadFinished"]++
	e, ok := s.entries[req.GetBuildId()]
	if !ok {
		return nil, status.Error(codes.NotFound, "no metadata")
	}
	if e.uploadID != req.GetUploadId() {
		return nil, status.Error(codes.InvalidArgument, "upload id mismatch")
	}
	e.uploading = false
	_, err := elf.NewFile(bytes.NewReader(e.data))
	e.invalid = err != nil
	return &pb.MarkUploadFinishedResponse{}, nil
}
