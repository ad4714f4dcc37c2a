package parcatest

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	debuginfov1alpha1 "github.com/tandem-profiler/tandem/schema/parca/parca/debuginfo/v1alpha1"
	profilestorev1alpha1 "github.com/tandem-profiler/tandem/schema/parca/parca/profilestore/v1alpha1"
)

// Server is an in-process ProfileStoreService on 127.0.0.1. See the
// package documentation.
type Server struct {
	profilestorev1alpha1.UnimplementedProfileStoreServiceServer

	addr    string
	mem     *memory.CheckedAllocator
	symbols *SymbolStore

	mu           sync.Mutex
	rows         []Row
	writeArrow   int
	writes       int
	compressions []string
	errs         []error
}

// StartServer serves on a loopback port until the test ends; at the end it
// checks that every Arrow buffer it decoded was released.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return StartServerAt(t, "127.0.0.1:0")
}

// StartServerAt is StartServer on addr (host:port, port 0 for any): an
// address pods reach, say.
func StartServerAt(t testing.TB, addr string) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{addr: lis.Addr().String(), mem: memory.NewCheckedAllocator(memory.NewGoAllocator()), symbols: NewSymbolStore()}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20))
	profilestorev1alpha1.RegisterProfileStoreServiceServer(srv, s)
	debuginfov1alpha1.RegisterDebuginfoServiceServer(srv, s.symbols) // a Parca server serves both
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		s.mem.AssertSize(t, 0)
	})
	return s
}

// Addr returns host:port.
func (s *Server) Addr() string { return s.addr }

// Symbols returns the DebuginfoService served on the same address.
func (s *Server) Symbols() *SymbolStore { return s.symbols }

// Rows returns every row accepted so far.
func (s *Server) Rows() []Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Row(nil), s.rows...)
}

// WriteArrowCalls returns the number of accepted WriteArrow requests.
func (s *Server) WriteArrowCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeArrow
}

// Compressions returns the IPC body compression of each accepted payload.
func (s *Server) Compressions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.compressions...)
}

// Errors returns the errors the server answered with.
func (s *Server) Errors() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

func (s *Server) fail(err error) error {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, ErrInvalid) {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func checkCompression(buf []byte) (string, error) {
	c, err := Compression(buf)
	if err != nil {
		return "", invalid("%v", err)
	}
	if c != "none" && c != "lz4" && c != "zstd" {
		return "", invalid("IPC body compression %s", c)
	}
	return c, nil
}

// WriteArrow implements the v2 path.
func (s *Server) WriteArrow(_ context.Context, req *profilestorev1alpha1.WriteArrowRequest) (*profilestorev1alpha1.WriteArrowResponse, error) {
	c, err := checkCompression(req.GetIpcBuffer())
	if err != nil {
		return nil, s.fail(err)
	}
	rows, err := DecodeV2(req.GetIpcBuffer(), s.mem)
	if err != nil {
		return nil, s.fail(err)
	}
	s.mu.Lock()
	s.rows = append(s.rows, rows...)
	s.writeArrow++
	s.compressions = append(s.compressions, c)
	s.mu.Unlock()
	return &profilestorev1alpha1.WriteArrowResponse{}, nil
}

// v1Deadline is the server's bound on a whole Write exchange.
const v1Deadline = 5 * time.Second

// Write implements the v1 exchange: sample record, the server's request
// for every stacktrace id in it, locations record; all within 5 s.
func (s *Server) Write(stream profilestorev1alpha1.ProfileStoreService_WriteServer) error {
	start := time.Now()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	c, err := checkCompression(first.GetRecord())
	if err != nil {
		return s.fail(err)
	}
	smp, err := DecodeV1Samples(first.GetRecord(), s.mem)
	if err != nil {
		return s.fail(err)
	}
	req, err := StacktraceRequest(smp.IDs, s.mem)
	if err != nil {
		return s.fail(err)
	}
	if err := stream.Send(&profilestorev1alpha1.WriteResponse{Record: req}); err != nil {
		return err
	}
	second, err := stream.Recv()
	if err != nil {
		return s.fail(invalid("no locations record: %v", err))
	}
	locs, err := DecodeV1Locations(second.GetRecord(), s.mem)
	if err != nil {
		return s.fail(err)
	}
	for i := range smp.Rows {
		st, ok := locs[string(smp.Rows[i].StackID[:])]
		if !ok {
			return s.fail(invalid("missing locations of stacktrace id %x", smp.Rows[i].StackID))
		}
		smp.Rows[i].Stack = st
	}
	if time.Since(start) > v1Deadline {
		return s.fail(status.Error(codes.DeadlineExceeded, "write exchange took longer than 5s"))
	}
	s.mu.Lock()
	s.rows = append(s.rows, smp.Rows...)
	s.writes++
	s.compressions = append(s.compressions, c)
	s.mu.Unlock()
	return nil
}

// WriteCalls returns the number of accepted Write exchanges.
func (s *Server) WriteCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}
