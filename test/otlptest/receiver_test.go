package otlptest_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/otlp"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/otlptest"
)

// twoTypeRequest encodes one flush of cpu CPU samples and probes probe
// samples: two profiles, "samples" and "events".
func twoTypeRequest(t *testing.T, cpu, probes int) pprofileotlp.ExportRequest {
	t.Helper()
	b := schema.NewBatchBuilder()
	m := b.Mapping(schema.Mapping{FileName: b.String("app")})
	stack := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x10, Mapping: m})})
	proc := b.Process(schema.Process{PID: 1, Comm: b.String("app")})
	for i := range cpu + probes {
		origin := schema.OriginCPUSampling
		if i >= cpu {
			origin = schema.OriginProbe
		}
		b.AddSample(schema.Sample{TimestampUnixNano: int64(100 + i), Origin: origin, Value: 1, Process: proc, TID: 1, Stack: stack})
	}
	a, err := aggregate.NewAggregator(aggregate.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Add(&schema.Hello{SamplingFrequencyHz: 19}, b.Batch()); err != nil {
		t.Fatal(err)
	}
	e, err := otlp.NewEncoder(otlp.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return e.Encode(a.Flush(time.Unix(0, 1000)))
}

// TestReceiverBehaviours: the test receiver does, with a request one of
// whose two profiles it refuses, what each behaviour says (what it
// answers, what it stores), and counts a profile stored again as
// duplicates. The never-twice tests rely on all three.
func TestReceiverBehaviours(t *testing.T) {
	const cpu, probes = 5, 3
	req := twoTypeRequest(t, cpu, probes)
	for _, tt := range []struct {
		b        otlptest.Behaviour
		code     codes.Code // of the answer
		stored   int        // observations stored per call
		rejected int64      // partial_success.rejected_profiles
	}{
		{otlptest.AllOrNothing, codes.InvalidArgument, 0, 0},
		{otlptest.StoreValidThenError, codes.InvalidArgument, cpu, 0},
		{otlptest.PartialSuccess, codes.OK, cpu, 1},
	} {
		t.Run(tt.b.String(), func(t *testing.T) {
			recv := otlptest.StartReceiver(t)
			recv.SetBehaviour(tt.b)
			recv.RefuseProfiles(otlptest.RefuseType("events"))
			conn, err := grpc.NewClient(recv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			client := pprofileotlp.NewGRPCClient(conn)
			for call := 1; call <= 2; call++ {
				resp, err := client.Export(context.Background(), req)
				if status.Code(err) != tt.code {
					t.Fatalf("call %d: %v, want code %v", call, err, tt.code)
				}
				if err == nil && resp.PartialSuccess().RejectedProfiles() != tt.rejected {
					t.Errorf("call %d: %d profiles rejected, want %d", call, resp.PartialSuccess().RejectedProfiles(), tt.rejected)
				}
				if got := recv.Observations(t); got != call*tt.stored {
					t.Errorf("after call %d: %d samples stored, want %d", call, got, call*tt.stored)
				}
				if got := recv.Refused(); got != call {
					t.Errorf("after call %d: %d profiles refused, want %d", call, got, call)
				}
			}
			// The second call stored the first's profile again.
			if got := recv.Duplicates(); got != tt.stored {
				t.Errorf("%d samples stored twice, want %d", got, tt.stored)
			}
		})
	}
}
