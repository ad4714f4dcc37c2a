package export_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/internal/grpcretry"
	"github.com/tandem-profiler/tandem/test/parcatest"
)

// parcaClient is a Client of srv.
func parcaClient(t *testing.T, srv *parcatest.Server) *export.Client {
	t.Helper()
	cfg := export.DefaultConfig()
	cfg.Address = srv.Addr()
	cfg.Insecure = true
	conn, err := export.Dial(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return export.NewClient(cfg, conn)
}

func checkParcaRows(t *testing.T, srv *parcatest.Server, c *testcorpus.Corpus, version string) {
	t.Helper()
	want := parcatest.Expected(parcatest.Stream{Hello: c.Hello, Batches: c.Batches}, version, nil)
	got := srv.Rows()
	if diff := parcatest.Diff(want, got, 5); diff != nil {
		t.Fatalf("server rows differ from the input:\n%s", strings.Join(diff, "\n"))
	}
	if err := parcatest.CheckStackIDs(got); err != nil {
		t.Fatal(err)
	}
}

func TestExportArrowV2(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	for _, limit := range []int{0, 48 << 10} {
		srv := parcatest.StartServer(t)
		client := parcaClient(t, srv)
		cfg := arrow.DefaultConfig()
		cfg.MaxMessageBytes = limit
		enc, err := arrow.NewV2Encoder(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		payloads, err := enc.Encode(f)
		enc.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range payloads {
			if err := client.WriteArrow(context.Background(), p); err != nil {
				t.Fatalf("limit %d: %v (server: %v)", limit, err, srv.Errors())
			}
		}
		if limit > 0 && srv.WriteArrowCalls() < 2 {
			t.Errorf("limit %d: %d WriteArrow calls, want the flush split", limit, srv.WriteArrowCalls())
		}
		for _, comp := range srv.Compressions() {
			if comp != "lz4" {
				t.Errorf("IPC compression %s, want lz4", comp)
			}
		}
		checkParcaRows(t, srv, c, "v2")
	}
}

func TestExportArrowV2Rejected(t *testing.T) {
	srv := parcatest.StartServer(t)
	client := parcaClient(t, srv)
	err := client.WriteArrow(context.Background(), []byte("not arrow"))
	if err == nil || !strings.Contains(err.Error(), "InvalidArgument") || grpcretry.Retryable(err) {
		t.Fatalf("err = %v, want InvalidArgument (permanent, not retried)", err)
	}
}

func TestExportArrowV1(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	for _, limit := range []int{0, 64 << 10} {
		srv := parcatest.StartServer(t)
		client := parcaClient(t, srv)
		cfg := arrow.DefaultConfig()
		cfg.MaxMessageBytes = limit
		enc, err := arrow.NewV1Encoder(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		xs, err := enc.Encode(f)
		enc.Close()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for _, x := range xs {
			if err := client.WriteV1(context.Background(), x); err != nil {
				t.Fatalf("limit %d: %v (server: %v)", limit, err, srv.Errors())
			}
		}
		t.Logf("limit %d: %d exchanges in %v", limit, len(xs), time.Since(start))
		if srv.WriteCalls() != len(xs) || (limit > 0 && len(xs) < 2) {
			t.Errorf("limit %d: %d Write exchanges accepted of %d", limit, srv.WriteCalls(), len(xs))
		}
		for _, comp := range srv.Compressions() {
			if comp != "none" {
				t.Errorf("IPC compression %s, want none", comp)
			}
		}
		checkParcaRows(t, srv, c, "v1")
	}
}

// halfExchange sends the sample record and never the locations record.
type halfExchange struct{ samples []byte }

func (h halfExchange) SampleRecord() []byte { return h.samples }
func (h halfExchange) LocationsFor([]byte) ([]byte, error) {
	return nil, errors.New("no locations")
}

func TestExportArrowV1ServerDemandsLocations(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	enc, err := arrow.NewV1Encoder(arrow.DefaultConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	xs, err := enc.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	srv := parcatest.StartServer(t)
	client := parcaClient(t, srv)
	err = client.WriteV1(context.Background(), halfExchange{xs[0].SampleRecord()})
	if err == nil || !strings.Contains(err.Error(), "no locations") {
		t.Fatalf("err = %v, want the encoder's failure (permanent, not retried)", err)
	}
	if len(srv.Rows()) != 0 {
		t.Fatal("the server ingested a write without its locations record")
	}
}
