package parcatest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/tandem-profiler/tandem/schema/parca/parca/debuginfo/v1alpha1"
)

// SymbolStore is a DebuginfoService that takes every executable once, by
// the gRPC upload strategy, and keeps what it received. The server's full
// decision table (already uploaded, in progress, invalid, signed URLs) is
// tested in package debuginfo; this is the happy path a Parca server
// offers to an agent it has not seen before.
type SymbolStore struct {
	pb.UnimplementedDebuginfoServiceServer

	mu       sync.Mutex
	uploads  map[string][]byte // build id -> bytes received
	finished map[string]bool
}

// NewSymbolStore returns an empty store.
func NewSymbolStore() *SymbolStore {
	return &SymbolStore{uploads: map[string][]byte{}, finished: map[string]bool{}}
}

// StartSymbolStore serves a SymbolStore alone on 127.0.0.1 with the given
// server options until the test ends, and returns it and its address.
func StartSymbolStore(t testing.TB, opts ...grpc.ServerOption) (*SymbolStore, string) {
	t.Helper()
	store := NewSymbolStore()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	pb.RegisterDebuginfoServiceServer(gs, store)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	return store, ln.Addr().String()
}

// Uploaded returns the bytes of a finished upload.
func (s *SymbolStore) Uploaded(buildID string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.finished[buildID] {
		return nil, false
	}
	return s.uploads[buildID], true
}

// Finished returns the build ids whose uploads were marked finished.
func (s *SymbolStore) Finished() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.finished))
	for id := range s.finished {
		out = append(out, id)
	}
	return out
}

// Received returns how many uploads were received, finished or not.
func (s *SymbolStore) Received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.uploads)
}

// ShouldInitiateUpload says yes to build ids not yet finished.
func (s *SymbolStore) ShouldInitiateUpload(_ context.Context, r *pb.ShouldInitiateUploadRequest) (*pb.ShouldInitiateUploadResponse, error) {
	if len(r.GetBuildId()) <= 2 {
		return nil, status.Errorf(codes.InvalidArgument, "build id %q too short", r.GetBuildId())
	}
	s.mu.Lock()
	done := s.finished[r.GetBuildId()]
	s.mu.Unlock()
	if done {
		return &pb.ShouldInitiateUploadResponse{Reason: "Debuginfo already exists."}, nil
	}
	return &pb.ShouldInitiateUploadResponse{ShouldInitiateUpload: true}, nil
}

// InitiateUpload asks for the gRPC upload strategy.
func (s *SymbolStore) InitiateUpload(_ context.Context, r *pb.InitiateUploadRequest) (*pb.InitiateUploadResponse, error) {
	return &pb.InitiateUploadResponse{UploadInstructions: &pb.UploadInstructions{
		BuildId: r.GetBuildId(), UploadId: "u-" + r.GetBuildId(), UploadStrategy: pb.UploadInstructions_UPLOAD_STRATEGY_GRPC,
	}}, nil
}

// Upload takes the info message, then chunks until EOF.
func (s *SymbolStore) Upload(stream grpc.ClientStreamingServer[pb.UploadRequest, pb.UploadResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	info := first.GetInfo()
	if info == nil {
		return status.Error(codes.InvalidArgument, "the first upload message must carry the upload info")
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
		buf.Write(m.GetChunkData())
	}
	s.mu.Lock()
	s.uploads[info.GetBuildId()] = buf.Bytes()
	s.mu.Unlock()
	return stream.SendAndClose(&pb.UploadResponse{BuildId: info.GetBuildId(), Size: uint64(buf.Len())})
}

// MarkUploadFinished marks a received upload finished.
func (s *SymbolStore) MarkUploadFinished(_ context.Context, r *pb.MarkUploadFinishedRequest) (*pb.MarkUploadFinishedResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.uploads[r.GetBuildId()]; !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "no upload received for build id %q", r.GetBuildId())
	}
	s.finished[r.GetBuildId()] = true
	return &pb.MarkUploadFinishedResponse{}, nil
}
