package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/sdnotifytest"
)

// Idle footprint of the encoder the image ships (issue 30,
// docs/benchmarks/footprint.md).
const (
	// idleTarget is issue 30's target for an idle encoder's resident
	// memory. It is not met: the benchmark reports the gap.
	idleTarget = 12 << 20
	// idleBudget fails the benchmark: today's figure (19.5 MiB peak
	// RSS, the largest of 24 starts, 2026-12-06) plus 1 MiB. A change
	// that links more package initialisation (k8s.io/api's types cost
	// 1.4 MiB), or turns the linker's method dead-code elimination off
	// again, exceeds it.
	idleBudget = 41 << 19 // 20.5 MiB
)

// BenchmarkIdleFootprint builds tandem-encoder as the image does
// (harness.BuildConfig.Image: the Makefile's IMAGE_ENCODER_TAGS), starts
// `serve` with no sampler (pprof files, no Kubernetes, no telemetry
// endpoint), waits for READY=1 and reads its peak and current resident
// memory from /proc/PID/status. It fails, in its own output, when the
// peak exceeds idleBudget, and reports how far it is from idleTarget.
// The binary is copied once more in 32 KiB writes, as a tar extraction
// (an image layer unpacked) writes it: the size of the page cache's
// folios, which follows how the file was written or read, changes what
// the kernel maps at each fault (the same binary written in one 42 MB
// write measured 30.6 MiB idle instead of 20.8).
func BenchmarkIdleFootprint(b *testing.B) {
	dir := b.TempDir()
	built := harness.Build(b, harness.BuildConfig{Image: true, Dir: filepath.Join(dir, "built")}, harness.Encoder)
	bin := filepath.Join(dir, "tandem-encoder")
	data, err := os.ReadFile(filepath.Join(built, harness.Encoder.Out))
	if err != nil {
		b.Fatal(err)
	}
	if err := writeSynced(bin, data); err != nil {
		b.Fatal(err)
	}
	var peak, rss, anon, file int64
	for b.Loop() {
		st := idleStatus(b, bin, dir)
		if st["VmHWM"] > peak {
			peak, rss, anon, file = st["VmHWM"], st["VmRSS"], st["RssAnon"], st["RssFile"]
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
	b.ReportMetric(float64(anon)/(1<<20), "anon-MiB")
	b.ReportMetric(float64(file)/(1<<20), "file-MiB")
	b.ReportMetric(0, "ns/op")
	if peak > idleTarget {
		b.Logf("idle encoder peak RSS %.1f MiB (anonymous %.1f, file-backed %.1f): issue 30's target of %d MiB is not met", float64(peak)/(1<<20), float64(anon)/(1<<20), float64(file)/(1<<20), idleTarget>>20)
	}
	if peak > idleBudget {
		b.Errorf("idle encoder peak RSS %.1f MiB exceeds the budget of %.1f MiB (anonymous %.1f, file-backed %.1f): see docs/benchmarks/footprint.md for how to find which packages' initialisation the binary's pages come from",
			float64(peak)/(1<<20), float64(idleBudget)/(1<<20), float64(anon)/(1<<20), float64(file)/(1<<20))
	}
}

// idleStatus starts bin serve, waits for its READY=1 and returns its
// memory figures (bytes) from /proc/PID/status, then stops it.
func idleStatus(b *testing.B, bin, dir string) map[string]int64 {
	b.Helper()
	run, err := os.MkdirTemp(dir, "run")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(run)
	notify := sdnotifytest.Listen(b, run)
	cmd := exec.Command(bin, "serve", "--socket", filepath.Join(run, "s.sock"), "--output-dir", filepath.Join(run, "out"),
		"--http-address=", "--kubernetes=off", "--log-level=warn")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), notify.Env())
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() { cmd.Process.Kill(); <-exited }()
	if err := notify.WaitFor("READY=1", exited, time.Minute); err != nil {
		b.Fatalf("encoder not ready: %v\n%s", err, stderr.String())
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	st := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		fs := strings.Fields(v)
		if !ok || len(fs) != 2 || fs[1] != "kB" {
			continue
		}
		if n, err := strconv.ParseInt(fs[0], 10, 64); err == nil {
			st[k] = n << 10
		}
	}
	return st
}

// writeSynced writes data to a new executable file in 32 KiB writes and
// waits for it to reach the disk.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	for len(data) > 0 { // in io.Copy's 32 KiB writes, as a tar extraction writes
		n := min(len(data), 32<<10)
		if _, err := f.Write(data[:n]); err != nil {
			f.Close()
			return err
		}
		data = data[n:]
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
