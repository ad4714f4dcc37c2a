// Command agent is the guest side of package vmtest: the initramfs's /init
// (a busybox script) mounts the file systems, loads the modules and execs
// it. It runs the plan the host wrote (vmtest.Plan): the workload, the
// encoder, then the sampler; it reports each step on the console as a
// vmtest.Event, writes the results as a tar archive onto the raw results
// disk and powers the VM off. It never waits without a bound: a step that
// does not happen in time is reported failed, and the results (the logs
// above all) are still written.
package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tandem-profiler/tandem/confine"
	"github.com/tandem-profiler/tandem/test/vm"
)

func main() {
	plan, err := readPlan()
	if err == nil {
		err = run(plan)
	}
	if err != nil {
		emit(vm.Event{Name: vm.EventFailed, Detail: err.Error()})
	}
	if plan != nil {
		if err := saveKernelLog(plan); err != nil {
			emit(vm.Event{Name: vm.EventFailed, Detail: "save the kernel log: " + err.Error()})
		}
		if n, err := writeResults(plan); err != nil {
			emit(vm.Event{Name: vm.EventFailed, Detail: "write results: " + err.Error()})
		} else {
			emit(vm.Event{Name: vm.EventResults, Value: float64(n)})
		}
	}
	unix.Sync()
	// As pid 1, exiting would panic the kernel: power off instead.
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

func emit(e vm.Event) { _, _ = os.Stdout.WriteString(e.Line()) }

func readPlan() (*vm.Plan, error) {
	b, err := os.ReadFile(vm.PlanPath)
	if err != nil {
		return nil, fmt.Errorf("read the plan: %w", err)
	}
	var p vm.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("parse the plan %s: %w", vm.PlanPath, err)
	}
	return &p, nil
}

func uptime() float64 {
	var info unix.Sysinfo_t
	if unix.Sysinfo(&info) != nil {
		return 0
	}
	return float64(info.Uptime)
}

// proc is a started command.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func start(name string, c vm.Command) (*proc, error) {
	if len(c.Args) == 0 {
		return nil, fmt.Errorf("%s: the plan gives no command", name)
	}
	logFile, err := os.Create(c.Log)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Env = append([]string{"PATH=/bin:/tandem", "HOME=/"}, c.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.UID != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(c.UID), Gid: uint32(c.UID)}
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited early: %v", p.name, p.err)
	default:
		return nil
	}
}

// stop sends SIGTERM and waits for the exit, SIGKILL after within.
func (p *proc) stop(within time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(within):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not exit within %v of SIGTERM (killed)", p.name, within)
	}
}

func status(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// waitUntil polls cond every 100 ms until it holds, one of the processes
// exits, or within passes.
func waitUntil(what string, within time.Duration, cond func() bool, watch ...*proc) error {
	deadline := time.Now().Add(within)
	for !cond() {
		for _, p := range watch {
			if err := p.exited(); err != nil {
				return fmt.Errorf("while waiting for %s: %w", what, err)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not happen within %v", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func httpOK(url string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func run(plan *vm.Plan) error {
	emit(vm.Event{Name: vm.EventBooted, Value: uptime()})
	for _, d := range append([]string{filepath.Dir(plan.Socket)}, plan.WritableDirs...) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.Chown(d, plan.SocketDirUID, plan.SocketDirUID); err != nil {
			return err
		}
	}
	for _, d := range plan.Cover {
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k"); err != nil {
			return fmt.Errorf("cover %s: %w", d, err)
		}
	}
	for _, w := range plan.Writes {
		if err := os.WriteFile(w.Path, []byte(w.Content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", w.Path, err)
		}
	}
	workload, err := start("workload", plan.Workload)
	if err != nil {
		return err
	}
	defer func() { _ = syscall.Kill(-workload.cmd.Process.Pid, syscall.SIGKILL) }()
	encoder, err := start("encoder", plan.Encoder)
	if err != nil {
		return err
	}
	defer func() { _ = syscall.Kill(-encoder.cmd.Process.Pid, syscall.SIGKILL) }()
	if err := waitUntil("the encoder's /readyz", plan.ReadyWithin, func() bool {
		return httpOK("http://" + plan.EncoderHTTP + "/readyz")
	}, encoder, workload); err != nil {
		return err
	}
	emit(vm.Event{Name: vm.EventEncoderReady, Value: uptime()})

	notifyPath := filepath.Join(filepath.Dir(plan.Socket), "notify.sock")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("listen for the sampler's readiness: %w", err)
	}
	defer notify.Close()
	ready := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := notify.Read(buf)
			if err != nil {
				return
			}
			for _, l := range strings.Split(string(buf[:n]), "\n") {
				if l == "READY=1" {
					close(ready)
					return
				}
			}
		}
	}()
	sc := plan.Sampler
	sc.Env = append(sc.Env, "NOTIFY_SOCKET="+notifyPath)
	began := time.Now()
	sampler, err := start("sampler", sc)
	if err != nil {
		return err
	}
	defer func() { _ = syscall.Kill(-sampler.cmd.Process.Pid, syscall.SIGKILL) }()
	select {
	case <-ready:
		// The sampler confines itself before READY=1: check every
		// thread now, on this kernel.
		confined := "confined"
		if _, err := confine.CheckConfined(sampler.cmd.Process.Pid, confine.Sampler); err != nil {
			confined = "not confined: " + err.Error()
		}
		emit(vm.Event{Name: vm.EventSamplerReady, Value: time.Since(began).Seconds(), Detail: confined})
	case <-sampler.done:
		if plan.ExpectSamplerExit {
			emit(vm.Event{Name: vm.EventSamplerExited, Value: time.Since(began).Seconds(), Detail: status(sampler.err)})
			return nil
		}
		return fmt.Errorf("the sampler exited before it was ready: %v", sampler.err)
	case <-time.After(plan.ReadyWithin):
		return fmt.Errorf("the sampler did not report sampling (READY=1) within %v", plan.ReadyWithin)
	}

	select {
	case <-time.After(plan.ProfileFor):
	case <-sampler.done:
		return fmt.Errorf("the sampler exited while profiling: %v", sampler.err)
	case <-encoder.done:
		return fmt.Errorf("the encoder exited while profiling: %v", encoder.err)
	}
	// The sampler exits once the encoder acknowledged its last batch.
	serr := sampler.stop(plan.StopWithin)
	emit(vm.Event{Name: vm.EventSamplerExited, Detail: status(serr)})
	// The sampler may exit once its goodbye is sent, before the encoder
	// has read it: the metrics are read once it has.
	metricsErr := waitUntil("the encoder's metric "+plan.DrainedMetric, plan.StopWithin, func() bool {
		v, ok := readMetric(plan, plan.DrainedMetric)
		return ok && v > 0
	}, encoder)
	metricsErr = errors.Join(metricsErr, saveMetrics(plan))
	eerr := encoder.stop(plan.StopWithin)
	emit(vm.Event{Name: vm.EventEncoderExited, Detail: status(eerr)})
	return errors.Join(metricsErr, wrap("sampler", serr), wrap("encoder", eerr))
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// readMetric reads one series (name and labels, as exposed) from the
// encoder's /metrics.
func readMetric(plan *vm.Plan, series string) (float64, bool) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + plan.EncoderHTTP + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

func saveMetrics(plan *vm.Plan) error {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + plan.EncoderHTTP + "/metrics")
	if err != nil {
		return fmt.Errorf("read the encoder's metrics: %w", err)
	}
	defer resp.Body.Close()
	f, err := os.Create(plan.MetricsFile)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}

// writeResults writes plan.Collect as a tar archive onto the results
// device and returns its size.
func writeResults(plan *vm.Plan) (int64, error) {
	dev, err := os.OpenFile(plan.ResultsDevice, os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("open the results disk: %w", err)
	}
	tw := tar.NewWriter(dev)
	var errs []error
	for _, root := range plan.Collect {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			return addFile(tw, path)
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, tw.Close())
	size, err := dev.Seek(0, io.SeekCurrent)
	errs = append(errs, err, dev.Sync(), dev.Close())
	return size, errors.Join(errs...)
}

func addFile(tw *tar.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(path, "/"), Mode: 0o644, Size: st.Size(), ModTime: st.ModTime()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// saveKernelLog writes the kernel's whole log buffer (dmesg, every level,
// whatever the console's level) to plan.KernelLog.
func saveKernelLog(plan *vm.Plan) error {
	if plan.KernelLog == "" {
		return nil
	}
	size, err := unix.Klogctl(unix.SYSLOG_ACTION_SIZE_BUFFER, nil)
	if err != nil {
		return fmt.Errorf("klogctl size: %w", err)
	}
	buf := make([]byte, size)
	n, err := unix.Klogctl(unix.SYSLOG_ACTION_READ_ALL, buf)
	if err != nil {
		return fmt.Errorf("klogctl read: %w", err)
	}
	return os.WriteFile(plan.KernelLog, buf[:n], 0o644)
}
