package sampler

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"go.opentelemetry.io/ebpf-profiler/libpf"
)

// procInfo holds a process's labels as plain strings.
type procInfo struct {
	// The tracer's values when the entry was made. A trace with other
	// values means the PID was reused or the process exec'd: rebuild.
	procNameH, exeH, containerH libpf.String

	comm string // /proc/PID/comm without the trailing newline
	exe  string
	// stale: the tracer's name for the process disagrees with what its
	// main thread is called now (it exec'd after the tracer read
	// /proc/PID/comm); comm and exe were re-read from /proc.
	refreshed   bool
	containerID string
	unit        string
	service     string
	env         []kvPair // sorted by key
}

type kvPair struct{ k, v string }

// processCache caches procInfo per PID. It is owned by the batching
// goroutine (not safe for concurrent use). Entries are dropped by sweep when
// /proc/PID is gone.
//
// It holds at most max entries (maxCachedProcesses): a flood of
// short-lived processes, each sampled once, would otherwise grow it until
// the next sweep. When full, it sweeps the exited ones (at most every
// fullSweepInterval: a sweep costs a syscall per entry), then drops
// arbitrary entries, an eighth of max at a time.
type processCache struct {
	procs map[uint32]*procInfo
	max   int
	m     *samplerMetrics // nil: counts nothing
	// lastFullSweep is when a full cache was last swept.
	lastFullSweep time.Time
	// readCgroup, exists, readIdentity and now are replaced in tests.
	readCgroup   func(pid uint32) (string, error)
	exists       func(pid uint32) bool
	readIdentity func(pid uint32) (comm, exe string, err error)
	now          func() time.Time
}

// fullSweepInterval bounds how often a full process cache is swept.
const fullSweepInterval = time.Second

func newProcessCache() *processCache {
	return &processCache{
		procs:        make(map[uint32]*procInfo),
		max:          maxCachedProcesses,
		now:          time.Now,
		readCgroup:   readProcCgroup,
		exists:       procExists,
		readIdentity: readProcIdentity,
	}
}

// readProcIdentity reads a process's current comm and executable.
func readProcIdentity(pid uint32) (comm, exe string, err error) {
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10)
	b, err := os.ReadFile(dir + "/comm")
	if err != nil {
		return "", "", err
	}
	exe, err = os.Readlink(dir + "/exe")
	if err != nil {
		return "", "", err
	}
	return strings.TrimRight(string(b), "\n"), exe, nil
}

func readProcCgroup(pid uint32) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/cgroup")
	return string(b), err
}

func procExists(pid uint32) bool {
	err := unix.Access("/proc/"+strconv.FormatUint(uint64(pid), 10), unix.F_OK)
	return !errors.Is(err, unix.ENOENT)
}

// get returns the labels of the entry's process, reading /proc on a miss.
func (c *processCache) get(e *traceEntry) *procInfo {
	p := c.procs[e.pid]
	if p != nil && p.procNameH == e.procName && p.exeH == e.exe && p.containerH == e.container {
		if p.service == "" && e.apmService != "" {
			p.service = c.m.bound(e.apmService, maxLabelBytes)
		}
		c.checkExec(p, e)
		return p
	}
	if p == nil {
		c.makeRoom()
	}
	p = &procInfo{
		procNameH:   e.procName,
		exeH:        e.exe,
		containerH:  e.container,
		comm:        c.m.bound(strings.TrimRight(e.procName.String(), "\n"), maxLabelBytes),
		exe:         c.m.bound(e.exe.String(), maxPathBytes),
		containerID: c.m.bound(e.container.String(), maxLabelBytes),
		service:     c.m.bound(e.apmService, maxLabelBytes),
	}
	if cg, err := c.readCgroup(e.pid); err == nil {
		l := parseCgroup(cg)
		if p.containerID == "" {
			p.containerID = c.m.bound(l.ContainerID, maxLabelBytes)
		}
		p.unit = c.m.bound(l.SystemdUnit, maxLabelBytes)
	}
	if len(e.env) > 0 {
		p.env = make([]kvPair, 0, len(e.env))
		for k, v := range e.env {
			p.env = append(p.env, kvPair{c.m.bound(k.String(), maxLabelBytes), c.m.bound(v.String(), maxLabelBytes)})
		}
		slices.SortFunc(p.env, func(a, b kvPair) int { return strings.Compare(a.k, b.k) })
	}
	c.procs[e.pid] = p
	c.checkExec(p, e)
	return p
}

// checkExec catches a process that exec'd after the tracer read its
// metadata: the tracer keeps reporting the old name (a "pyenv-exec" shim
// that became python3, say), while the eBPF side reports the main thread's
// current comm with every sample. When they disagree, /proc is read once
// more. Comparing costs nothing per sample; the re-read happens once per
// exec.
func (c *processCache) checkExec(p *procInfo, e *traceEntry) {
	if p.refreshed || e.tid != e.pid {
		return
	}
	thread := strings.TrimRight(e.comm.String(), "\n")
	if p.comm == "" {
		// Kernel threads (and processes the tracer holds no metadata for)
		// come without a process name: the main thread's comm is it.
		p.comm = c.m.bound(thread, maxLabelBytes)
		return
	}
	if thread == "" || thread == p.comm || strings.HasPrefix(p.comm, thread) {
		return
	}
	comm, exe, err := c.readIdentity(e.pid)
	if err != nil {
		return
	}
	p.refreshed = true
	p.comm, p.exe = c.m.bound(comm, maxLabelBytes), c.m.bound(exe, maxPathBytes)
}

// makeRoom makes room for one more process in a full cache: it sweeps
// the exited ones, unless it did so less than fullSweepInterval ago, and
// then, if still full, drops an eighth of the entries (map order: no
// process can choose to stay).
func (c *processCache) makeRoom() {
	if len(c.procs) < c.max {
		return
	}
	if now := c.now(); now.Sub(c.lastFullSweep) >= fullSweepInterval {
		c.lastFullSweep = now
		if n := c.sweep(); n > 0 && c.m != nil {
			c.m.processesEvicted.Add(uint64(n))
		}
	}
	if len(c.procs) < c.max {
		return
	}
	n := max(1, c.max/8)
	for pid := range c.procs {
		delete(c.procs, pid)
		if n--; n == 0 {
			break
		}
	}
	if c.m != nil {
		c.m.processesCacheFull.Add(uint64(max(1, c.max/8)))
	}
}

// sweep drops the processes that no longer exist and returns how many.
func (c *processCache) sweep() int {
	n := 0
	for pid := range c.procs {
		if !c.exists(pid) {
			delete(c.procs, pid)
			n++
		}
	}
	return n
}

func (c *processCache) len() int { return len(c.procs) }
