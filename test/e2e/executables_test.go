package e2e

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/otlptest"
)

// Churn of TestExecutableChurn: a new executable every churnEvery, each
// run for churnRun and deleted right after it starts, for churnFor; each
// is the C workload padded to churnPad bytes, as large as the issue's.
// 15 s churns about 100 copies (500 MB): a process that kept deleted
// copies would still hold dozens after the churn, which the test checks
// go to none. The held-bytes default (4 GiB) is not reached either way.
const (
	churnFor   = 15 * time.Second
	churnEvery = 150 * time.Millisecond
	churnRun   = 300 * time.Millisecond
	churnPad   = 5 << 20
	// defaultHeldBytes is both processes' --max-held-executable-bytes
	// default (4 GiB); the test runs with the defaults.
	defaultHeldBytes = 4 << 30
)

// startDeletedCopy writes the C workload src to dir/name, padded to
// churnPad bytes and ended by n, so that every copy has its own file id
// (the tracer hashes the head, the tail and the length; an ELF file runs
// the same with bytes after its sections), starts it (running until
// killed) and deletes the file once it runs.
func startDeletedCopy(src, dir, name string, n uint64) (*exec.Cmd, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	b = append(b, make([]byte, max(churnPad-len(b)-8, 0))...)
	b = binary.LittleEndian.AppendUint64(b, n)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "0")
	if err := cmd.Start(); err != nil { // returns once exec succeeded
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return cmd, nil
}

// deletedFDs counts the descriptors of process pid to deleted files
// whose name contains part.
func deletedFDs(t *testing.T, pid int, part string) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	n := 0
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err == nil && strings.Contains(l, part) && strings.HasSuffix(l, " (deleted)") {
			n++
		}
	}
	return n
}

// churnNames counts, in samples, those with a frame in a mapping whose
// name contains part, and among them those whose frames there are named
// (tandem_leaf or tandem_middle).
func churnNames(samples []otlptest.Sample, part string) (all, named int64) {
	for _, s := range samples {
		in, ok := false, false
		for _, f := range s.Frames {
			if !strings.Contains(f.MappingFile, part) {
				continue
			}
			in = true
			ok = ok || f.Function == "tandem_leaf" || f.Function == "tandem_middle"
		}
		if in {
			all += s.Total()
			if ok {
				named += s.Total()
			}
		}
	}
	return all, named
}

// TestExecutableChurn runs, with the default bounds, what a CI node does
// (issue 32): short-lived distinct executables, each deleted right after
// it starts. Their functions are named (the descriptor travelled), the
// bytes of the files each process holds stay within the bound during the
// churn, and the descriptors to deleted files in both processes return to
// none within seconds after it. A deleted executable whose process still
// runs is then named by a restarted encoder: the sampler kept it.
func TestExecutableChurn(t *testing.T) {
	t.Parallel()
	cw := buildCWorkload(t)
	p := startPair(t, "--stats-interval", "1s") // the sampler's metrics, in-band, each second
	dir := sharedDir(t)
	spid, epid := p.Sampler.Pid(), p.Encoder.Pid()
	metric := func(name string) float64 { return harness.EncoderMetric(t, p.HTTPAddr, name) }

	// Runs throughout, deleted: after the churn, a restarted encoder must
	// still name it.
	long, err := startDeletedCopy(cw, dir, "long-0", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = long.Process.Kill(); _ = long.Wait() })

	var (
		mu      sync.Mutex
		running []*exec.Cmd
		started int
		reaped  sync.WaitGroup // the churned processes killed and waited for
	)
	stopChurn := make(chan struct{})
	churnDone := make(chan struct{})
	go func() { // starts and kills; the test goroutine watches
		defer close(churnDone)
		tick := time.NewTicker(churnEvery)
		defer tick.Stop()
		for {
			select {
			case <-stopChurn:
				mu.Lock()
				for _, c := range running {
					_ = c.Process.Kill() // reaped by its timer
				}
				mu.Unlock()
				reaped.Wait()
				return
			case <-tick.C:
			}
			mu.Lock()
			started++
			c, err := startDeletedCopy(cw, dir, fmt.Sprintf("churn-%d", started), uint64(started))
			if err != nil {
				mu.Unlock()
				t.Error(err)
				return
			}
			running = append(running, c)
			mu.Unlock()
			reaped.Add(1)
			time.AfterFunc(churnRun, func() {
				defer reaped.Done()
				_ = c.Process.Signal(syscall.SIGKILL)
				_ = c.Wait()
				mu.Lock()
				for i, r := range running {
					if r == c {
						running = append(running[:i], running[i+1:]...)
						break
					}
				}
				mu.Unlock()
			})
		}
	}()

	var maxEncBytes, maxSamBytes float64
	var maxEncDeleted, maxSamDeleted int
	end := time.Now().Add(churnFor)
	for time.Now().Before(end) {
		for _, pr := range []*proc{p.Sampler, p.Encoder} {
			if pr.Exited() {
				close(stopChurn)
				<-churnDone
				t.Fatalf("%s exited during the churn (%v); its last output:\n%s", pr.Name, pr.Err(), pr.Out.Tail(30))
			}
		}
		maxEncBytes = max(maxEncBytes, metric("tandem_encoder_executables_held_bytes"))
		maxSamBytes = max(maxSamBytes, metric("tandem_sampler_ipc_client_executables_held_bytes"))
		maxEncDeleted = max(maxEncDeleted, deletedFDs(t, epid, "/churn-"))
		maxSamDeleted = max(maxSamDeleted, deletedFDs(t, spid, "/churn-"))
		time.Sleep(250 * time.Millisecond) // a sampling period, not a wait for a condition
	}
	close(stopChurn)
	<-churnDone
	churnEnd := time.Now()
	t.Logf("churn: %d executables of %d MB in %v; held bytes at most: encoder %.0f MB, sampler %.0f MB; descriptors to deleted copies at most: encoder %d, sampler %d",
		started, churnPad>>20, churnFor, maxEncBytes/1e6, maxSamBytes/1e6, maxEncDeleted, maxSamDeleted)
	if maxEncBytes > defaultHeldBytes || maxSamBytes > defaultHeldBytes {
		t.Errorf("held bytes over the %d-byte bound: encoder %.0f, sampler %.0f", defaultHeldBytes, maxEncBytes, maxSamBytes)
	}
	if maxSamBytes == 0 || maxEncBytes == 0 {
		t.Errorf("held bytes never seen (encoder %.0f, sampler %.0f): the metrics are missing", maxEncBytes, maxSamBytes)
	}

	// Back to none: the encoder reads each deleted copy's symbols and
	// closes it; the sampler closes its copy once the encoder has it and
	// the process is gone.
	harness.WaitFor(t, "the descriptors to deleted copies to be closed", 30*time.Second, func() bool {
		return metric("tandem_encoder_executables_held_deleted") == 0 &&
			metric("tandem_sampler_ipc_client_executables_held_deleted") <= 1 && // the long-running one
			deletedFDs(t, epid, "/churn-") == 0 && deletedFDs(t, spid, "/churn-") == 0
	}, p.Sampler, p.Encoder)
	settled := time.Since(churnEnd)
	t.Logf("after the churn: no descriptor to a deleted copy in either process %v after it stopped; encoder holds %.0f descriptors (%.0f MB), sampler %.0f (%.0f MB); released early: encoder %.0f, sampler %.0f; evicted: encoder %.0f, sampler %.0f",
		settled.Round(100*time.Millisecond),
		metric("tandem_encoder_executables_held"), metric("tandem_encoder_executables_held_bytes")/1e6,
		metric("tandem_sampler_ipc_client_executables_held"), metric("tandem_sampler_ipc_client_executables_held_bytes")/1e6,
		metric("tandem_encoder_executables_released_early_total"), metric("tandem_sampler_ipc_client_executables_released_early_total"),
		metric("tandem_encoder_executables_evicted_total"), metric("tandem_sampler_ipc_client_executables_evicted_total"))

	// Names: the churned executables' samples name their functions.
	harness.WaitFor(t, "a flush after the churn", 30*time.Second, func() bool {
		all, _ := churnNames(p.recv.Samples(t), "churn-")
		return all > 0
	}, p.Sampler, p.Encoder)
	all, named := churnNames(p.recv.Samples(t), "churn-")
	t.Logf("churned executables: %d samples, %d with tandem_leaf or tandem_middle named (%.0f%%)", all, named, 100*float64(named)/float64(all))
	if float64(named) < 0.9*float64(all) {
		t.Errorf("%d of %d samples of the churned executables named: want at least 90%%", named, all)
	}

	// The long-running deleted executable, after an encoder restart: the
	// sampler kept its copy (its process runs) and passes it again.
	p.Encoder.Stop(t, 30*time.Second)
	p.recv = otlptest.StartReceiver(t)
	startEncoder(t, p)
	harness.WaitFor(t, "the restarted encoder to name the running deleted executable", 90*time.Second, func() bool {
		_, named := churnNames(p.recv.Samples(t), "long-")
		return named > 0
	}, p.Sampler, p.Encoder)
	if err := long.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = long.Wait()
	harness.WaitFor(t, "the sampler to close its copy once the process is gone", 30*time.Second, func() bool {
		return deletedFDs(t, spid, "/long-") == 0 && metric("tandem_sampler_ipc_client_executables_held_deleted") == 0
	}, p.Sampler, p.Encoder)
	p.Sampler.Stop(t, 30*time.Second)
	p.Encoder.Stop(t, 30*time.Second)
}
