package export

import (
	"context"
	"fmt"
	"slices"

	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding/gzip"

	profilestorev1alpha1 "github.com/tandem-profiler/tandem/schema/parca/parca/profilestore/v1alpha1"
)

// Client makes single attempts at the remote store's RPCs over one
// connection: OTLP/profiles Export, Parca's WriteArrow and Write. Retries,
// timeouts and queueing are the Exporter's. It is safe for concurrent use.
type Client struct {
	otlp     pprofileotlp.GRPCClient
	store    profilestorev1alpha1.ProfileStoreServiceClient
	callOpts []grpc.CallOption
}

// NewClient returns a Client over conn; cfg.Compression applies to OTLP.
func NewClient(cfg Config, conn *grpc.ClientConn) *Client {
	c := &Client{
		otlp:  pprofileotlp.NewGRPCClient(conn),
		store: profilestorev1alpha1.NewProfileStoreServiceClient(conn),
	}
	if cfg.Compression == CompressionGzip {
		c.callOpts = append(c.callOpts, grpc.UseCompressor(gzip.Name))
	}
	return c
}

// ExportOTLP sends one OTLP/profiles request. A partial success returns
// the number of profiles the receiver rejected and its message.
func (c *Client) ExportOTLP(ctx context.Context, req pprofileotlp.ExportRequest) (rejectedProfiles int64, message string, err error) {
	resp, err := c.otlp.Export(ctx, req, c.callOpts...)
	if err != nil {
		return 0, "", err
	}
	ps := resp.PartialSuccess()
	return ps.RejectedProfiles(), ps.ErrorMessage(), nil
}

// PartialOutcome is the Outcome of an OTLP partial success in which the
// receiver rejected rejectedProfiles of a request's profiles, profiles
// holding the samples of each. OTLP says how many profiles, not which: all
// or none is exact; otherwise the k rejected hold at least the samples of
// the k smallest (rejected) and at most those of the k largest: the
// difference is unconfirmed.
func PartialOutcome(profiles []int, rejectedProfiles int64, msg string) Outcome {
	if rejectedProfiles <= 0 {
		return Outcome{}
	}
	err := fmt.Errorf("partial success: %d of %d profiles rejected: %s", rejectedProfiles, len(profiles), msg)
	k := int(rejectedProfiles)
	if k >= len(profiles) {
		total := 0
		for _, n := range profiles {
			total += n
		}
		return Outcome{Rejected: total, Err: err}
	}
	sizes := slices.Clone(profiles)
	slices.Sort(sizes)
	least, most := 0, 0
	for j := range k {
		least += sizes[j]
		most += sizes[len(sizes)-1-j]
	}
	return Outcome{Rejected: least, Unconfirmed: most - least, Err: err}
}

// WriteArrow sends one Arrow v2 IPC stream with WriteArrow. gRPC
// compression is not used: the IPC body is LZ4-compressed.
func (c *Client) WriteArrow(ctx context.Context, payload []byte) error {
	_, err := c.store.WriteArrow(ctx, &profilestorev1alpha1.WriteArrowRequest{IpcBuffer: payload})
	return err
}
