//go:build !noview

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/executables"
	"github.com/tandem-profiler/tandem/encoder/ingest"
	"github.com/tandem-profiler/tandem/encoder/pprofout"
	"github.com/tandem-profiler/tandem/encoder/symbolize"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// loadProfiles reads every PATH of `view`: pprof files (gzipped or not),
// directories (every regular file in them not starting with "."), and
// dumps (converted through the encoder's aggregator into one profile
// each), and merges them into one profile. A file that is neither a pprof
// profile nor a dump is an error naming it.
func loadProfiles(ctx context.Context, paths []string, logger *slog.Logger) (*profile.Profile, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", p, err)
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("view %s: %w", p, err)
		}
		n := len(files)
		for _, e := range ents {
			if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
				files = append(files, filepath.Join(p, e.Name()))
			}
		}
		if len(files) == n {
			return nil, fmt.Errorf("view %s: the directory holds no profile (pprof files or dumps)", p)
		}
	}
	profiles := make([]*profile.Profile, 0, len(files))
	for _, path := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p, err := loadOne(ctx, path, logger)
		if err != nil {
			return nil, err
		}
		profiles = append(profiles, p)
	}
	p, err := mergeProfiles(profiles)
	if err != nil {
		return nil, fmt.Errorf("view: merge %d profiles: %w", len(profiles), err)
	}
	return p, nil
}

// loadOne reads one file: a dump when it starts like one, else a pprof
// profile.
func loadOne(ctx context.Context, path string, logger *slog.Logger) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("view %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, len(ipc.DumpMagic))
	n, _ := io.ReadFull(f, head)
	if bytes.Equal(head[:n], []byte(ipc.DumpMagic)) {
		return dumpProfile(ctx, path, logger)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("view %s: %w", path, err)
	}
	p, err := profile.Parse(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("view %s: neither a dump nor a pprof profile (%w); give pprof files (such as the encoder's --output-dir writes), directories of them, or dumps (--record)", path, err)
	}
	return p, nil
}

// viewSink feeds a dump's frames to an aggregator, and the executables
// its notices name (read again by path, as replay does) to the symbolizer
// through the executables router serve and replay use.
type viewSink struct {
	agg      *aggregate.Aggregator
	execs    *executables.Router
	rejected int
	samples  int
}

func (s *viewSink) Batch(sess *ingest.Session, b *schema.Batch) {
	if err := s.agg.Add(&sess.Hello, b); err != nil {
		s.rejected++
		return
	}
	s.samples += len(b.Samples)
}

func (s *viewSink) Loss(*ingest.Session, *schema.LossReport) {}

func (s *viewSink) Executable(_ *ingest.Session, n *schema.ExecutableNotice, f *os.File) {
	s.execs.Submit(n, f)
	s.agg.NoteExecutable(n) // after the symbolizer has it (Aggregator.NoteExecutable)
}

// dumpProfile aggregates a whole dump into one interval and converts it
// as the pprof output does, native frames named by the encoder's
// symbolizer where the executables are still on this machine.
func dumpProfile(ctx context.Context, path string, logger *slog.Logger) (*profile.Profile, error) {
	sym, err := symbolize.New(symbolize.DefaultConfig(), logger.With("component", "symbolize"), nil)
	if err != nil {
		return nil, err
	}
	defer sym.Close()
	cfg := aggregate.DefaultConfig()
	cfg.Symbolizer = sym
	agg, err := aggregate.NewAggregator(cfg, nil)
	if err != nil {
		return nil, err
	}
	execs, err := executables.New(executables.Deps{Symbolizer: sym, Logger: logger})
	if err != nil {
		return nil, err
	}
	sink := &viewSink{agg: agg, execs: execs}
	d, err := ipc.OpenDump(path)
	if err != nil {
		return nil, fmt.Errorf("view %s: %w", path, err)
	}
	defer d.Close()
	tracker, err := ingest.NewTracker(sink, logger.With("component", "ingest"), nil)
	if err != nil {
		return nil, fmt.Errorf("view %s: %w", path, err)
	}
	serveErr := tracker.Serve(ctx, d, nil)
	if sink.rejected > 0 {
		logger.Warn("dump batches rejected", "dump", path, "batches", sink.rejected)
	}
	f := agg.Flush(time.Now())
	if f.Empty() {
		if serveErr != nil {
			return nil, fmt.Errorf("view %s: %w", path, serveErr)
		}
		return nil, fmt.Errorf("view %s: the dump holds no samples", path)
	}
	if serveErr != nil {
		// What was read is shown; the rest of the dump is lost, and said so.
		logger.Warn("dump cut short: showing what was read", "dump", path, "samples", sink.samples, "err", serveErr)
	}
	return pprofout.Profile(f), nil
}

// mergeProfiles merges profiles whose sample types may differ (each pprof
// file has the types its interval held): every profile gets the union of
// the types, in order of first appearance, and the CPU period type when
// any has it; then profile.Merge.
func mergeProfiles(ps []*profile.Profile) (*profile.Profile, error) {
	if len(ps) == 0 {
		return nil, errors.New("no profiles")
	}
	var types []*profile.ValueType
	var period *profile.ValueType
	index := func(st *profile.ValueType) int {
		return slices.IndexFunc(types, func(t *profile.ValueType) bool { return t.Type == st.Type && t.Unit == st.Unit })
	}
	for _, p := range ps {
		for _, st := range p.SampleType {
			if index(st) < 0 {
				types = append(types, &profile.ValueType{Type: st.Type, Unit: st.Unit})
			}
		}
		if pt := p.PeriodType; pt != nil && (period == nil || pt.Type == "cpu" && period.Type != "cpu") {
			period = &profile.ValueType{Type: pt.Type, Unit: pt.Unit}
		}
	}
	if period == nil {
		period = &profile.ValueType{Type: "samples", Unit: "count"}
	}
	def := ""
	for _, p := range ps {
		if def == "" {
			def = p.DefaultSampleType
		}
		where := make([]int, len(p.SampleType))
		for i, st := range p.SampleType {
			where[i] = index(st)
		}
		for _, s := range p.Sample {
			v := make([]int64, len(types))
			for i, x := range s.Value {
				v[where[i]] = x
			}
			s.Value = v
		}
		p.SampleType = make([]*profile.ValueType, len(types))
		for i, t := range types {
			p.SampleType[i] = &profile.ValueType{Type: t.Type, Unit: t.Unit}
		}
		if p.PeriodType == nil || p.PeriodType.Type != period.Type || p.PeriodType.Unit != period.Unit {
			p.PeriodType, p.Period = &profile.ValueType{Type: period.Type, Unit: period.Unit}, 0
		}
	}
	m, err := profile.Merge(ps)
	if err != nil {
		return nil, err
	}
	m.DefaultSampleType = def
	titleMapping(m)
	return m, nil
}

// mergedTitle is what pprof's UI calls the merged profile.
const mergedTitle = "all processes"

// titleMapping puts first a mapping no location uses, named mergedTitle:
// pprof titles a profile (and its "File:" legend) after the first
// mapping, which in a whole-node profile is whatever executable came
// first, often vmlinux.
func titleMapping(p *profile.Profile) {
	p.Mapping = append([]*profile.Mapping{{File: mergedTitle}}, p.Mapping...)
	for i, m := range p.Mapping {
		m.ID = uint64(i + 1)
	}
}
