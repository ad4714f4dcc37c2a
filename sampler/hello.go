package sampler

import (
	"crypto/rand"
	"math"
	"strings"
	"time"

	"github.com/tandem-profiler/tandem/internal/buildinfo"
	"github.com/tandem-profiler/tandem/schema"
)

// baseHello fills the Hello fields that do not depend on the host: version,
// node, frequency, tracers, a fresh random session id and the start time.
func baseHello(cfg *Config) schema.Hello {
	h := schema.Hello{
		MajorVersion:        schema.MajorVersion,
		MinorVersion:        schema.MinorVersion,
		SamplerVersion:      buildinfo.String(),
		NodeName:            cfg.NodeName,
		SamplingFrequencyHz: uint32(cfg.SamplesPerSecond),
		Tracers:             cfg.TracerNames(),
		StartTimeUnixNano:   time.Now().UnixNano(),
		OffCPUThreshold:     uint32(cfg.OffCPUThreshold * float64(math.MaxUint32)),
	}
	_, _ = rand.Read(h.SessionID[:]) // crypto/rand.Read never fails
	return h
}

func joinComma(s []string) string { return strings.Join(s, ",") }
