package export

import (
	"context"
	"errors"
	"fmt"
	"io"

	profilestorev1alpha1 "github.com/tandem-profiler/tandem/schema/parca/parca/profilestore/v1alpha1"
)

// WriteExchange is one Arrow v1 write: the sample record sent first on a
// Write stream, and the locations record answering the server's request
// for the stacktrace ids it does not know (encoder/arrow builds both).
type WriteExchange interface {
	// SampleRecord is the first message's Arrow IPC stream.
	SampleRecord() []byte
	// LocationsFor returns the locations record for the ids listed in the
	// server's response record (an IPC stream with a stacktrace_id column).
	LocationsFor(response []byte) ([]byte, error)
}

// errLocations marks a locations record the encoder could not build:
// permanent, not a gRPC status.
var errLocations = errors.New("build locations record")

// WriteV1 runs one exchange on its own ProfileStoreService.Write stream:
// send the sample record, receive the server's request, send the locations
// record (when the request is not empty), close the send side and drain
// until EOF (the server gives the whole exchange 5 s). It is one attempt;
// a failed exchange is run again from the start.
func (c *Client) WriteV1(ctx context.Context, x WriteExchange) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream on every error path
	stream, err := c.store.Write(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&profilestorev1alpha1.WriteRequest{Record: x.SampleRecord()}); err != nil {
		return recvErr(stream, err)
	}
	resp, err := stream.Recv()
	if err != nil {
		return err
	}
	if len(resp.GetRecord()) > 0 {
		locs, err := x.LocationsFor(resp.GetRecord())
		if err != nil {
			return fmt.Errorf("%w: %w", errLocations, err)
		}
		if err := stream.Send(&profilestorev1alpha1.WriteRequest{Record: locs}); err != nil {
			return recvErr(stream, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// recvErr turns a Send's io.EOF into the stream's real status.
func recvErr(stream profilestorev1alpha1.ProfileStoreService_WriteClient, err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}
	for {
		if _, rerr := stream.Recv(); rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return err
			}
			return rerr
		}
	}
}
