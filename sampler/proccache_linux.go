package sampler

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"go.opentelemetry.io/ebpf-profiler/libpf"
)

// procInfo holds a process's labels as plain strings.
type procInfo struct {
	// The tracer's values when the entry was made. A trace with other
	// values means the PID was reused or the process exec'd: rebuild.
	procNameH, exeH, containerH libpf.String

	comm        string // /proc/PID/comm without the trailing newline
	exe         string
	containerID string
	unit        string
	service     string
	env         []kvPair // sorted by key
}

type kvPair struct{ k, v string }

// processCache caches procInfo per PID. It is owned by the batching
// goroutine (not safe for concurrent use). Entries are dropped by sweep when
// /proc/PID is gone.
type processCache struct {
	procs map[uint32]*procInfo
	// readCgroup and exists are replaced in tests.
	readCgroup func(pid uint32) (string, error)
	exists     func(pid uint32) bool
}

func newProcessCache() *processCache {
	return &processCache{
		procs:      make(map[uint32]*procInfo),
		readCgroup: readProcCgroup,
		exists:     procExists,
	}
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
			p.service = e.apmService
		}
		return p
	}
	p = &procInfo{
		procNameH:   e.procName,
		exeH:        e.exe,
		containerH:  e.container,
		comm:        strings.TrimRight(e.procName.String(), "\n"),
		exe:         e.exe.String(),
		containerID: e.container.String(),
		service:     e.apmService,
	}
	if cg, err := c.readCgroup(e.pid); err == nil {
		l := parseCgroup(cg)
		if p.containerID == "" {
			p.containerID = l.ContainerID
		}
		p.unit = l.SystemdUnit
	}
	if len(e.env) > 0 {
		p.env = make([]kvPair, 0, len(e.env))
		for k, v := range e.env {
			p.env = append(p.env, kvPair{k.String(), v.String()})
		}
		slices.SortFunc(p.env, func(a, b kvPair) int { return strings.Compare(a.k, b.k) })
	}
	c.procs[e.pid] = p
	return p
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
