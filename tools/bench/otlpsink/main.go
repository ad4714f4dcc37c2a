// Command otlpsink is a measurement aid: a minimal OTLP/profiles gRPC
// receiver that counts what it is sent and keeps nothing. It registers the
// real pprofileotlp service (so it checks that the requests decode) and
// accepts gzip. tools/bench/compare-upstream.sh points both
// tandem-encoder and the upstream agent at it.
//
//	otlpsink -listen 127.0.0.1:14317 [-stats FILE]
//
// On SIGINT or SIGTERM it prints the totals (and writes them as JSON to
// -stats, when set) and exits. It is not part of Tandem.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed exports
	"google.golang.org/grpc/stats"
)

// Totals are the counts since start.
type Totals struct {
	Requests int64 `json:"requests"`
	// Samples counts sampled events: a sample's values summed, or its
	// timestamps when it has no values.
	Samples int64 `json:"samples"`
	// SampleRecords counts Sample messages (aggregated stacks).
	SampleRecords int64 `json:"sample_records"`
	Profiles      int64 `json:"profiles"`
	// WireBytes are the gRPC message bytes as received (compressed when the
	// client compressed); ProtoBytes the uncompressed protobuf.
	WireBytes  int64  `json:"wire_bytes"`
	ProtoBytes int64  `json:"proto_bytes"`
	First      string `json:"first_request,omitempty"`
	Last       string `json:"last_request,omitempty"`
}

type sink struct {
	pprofileotlp.UnimplementedGRPCServer
	mu sync.Mutex
	t  Totals
}

func (s *sink) Export(_ context.Context, req pprofileotlp.ExportRequest) (pprofileotlp.ExportResponse, error) {
	var samples, records, profiles int64
	rps := req.Profiles().ResourceProfiles()
	for i := range rps.Len() {
		sps := rps.At(i).ScopeProfiles()
		for j := range sps.Len() {
			ps := sps.At(j).Profiles()
			profiles += int64(ps.Len())
			for k := range ps.Len() {
				ss := ps.At(k).Samples()
				records += int64(ss.Len())
				for l := range ss.Len() {
					smp := ss.At(l)
					if vs := smp.Values(); vs.Len() > 0 {
						for m := range vs.Len() {
							samples += vs.At(m)
						}
					} else {
						samples += int64(smp.TimestampsUnixNano().Len())
					}
				}
			}
		}
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	s.mu.Lock()
	s.t.Requests++
	s.t.Samples += samples
	s.t.SampleRecords += records
	s.t.Profiles += profiles
	if s.t.First == "" {
		s.t.First = now
	}
	s.t.Last = now
	s.mu.Unlock()
	return pprofileotlp.NewExportResponse(), nil
}

// Stats handler: payload sizes as they arrive.
func (s *sink) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (s *sink) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (s *sink) HandleConn(context.Context, stats.ConnStats)                       {}
func (s *sink) HandleRPC(_ context.Context, st stats.RPCStats) {
	if in, ok := st.(*stats.InPayload); ok {
		s.mu.Lock()
		s.t.WireBytes += int64(in.CompressedLength)
		s.t.ProtoBytes += int64(in.Length)
		s.mu.Unlock()
	}
}

func (s *sink) totals() Totals {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t
}

func main() {
	listen := flag.String("listen", "127.0.0.1:14317", "address to listen on")
	statsFile := flag.String("stats", "", "write the totals here as JSON at exit")
	every := flag.Duration("log-interval", 0, "also log the totals this often (0: only at exit)")
	flag.Parse()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	s := &sink{}
	srv := grpc.NewServer(grpc.StatsHandler(s), grpc.MaxRecvMsgSize(256<<20))
	pprofileotlp.RegisterGRPCServer(srv, s)
	go func() {
		if err := srv.Serve(ln); err != nil {
			log.Fatalf("serve: %v", err)
		}
	}()
	log.Printf("otlpsink listening on %s", ln.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	var tick <-chan time.Time
	if *every > 0 {
		t := time.NewTicker(*every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			log.Printf("totals %+v", s.totals())
			continue
		case <-sig:
		}
		break
	}
	srv.Stop()
	t := s.totals()
	out, _ := json.Marshal(t)
	fmt.Println(string(out))
	if *statsFile != "" {
		if err := os.WriteFile(*statsFile, append(out, '\n'), 0o644); err != nil {
			log.Fatalf("write stats: %v", err)
		}
	}
}
