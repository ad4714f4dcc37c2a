package confine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ThreadStatus is one thread's confinement as /proc/PID/task/TID/status
// shows it.
type ThreadStatus struct {
	TID                                    int
	Seccomp, NoNewPrivs, SeccompFilters    int
	CapEff, CapPrm, CapInh, CapBnd, CapAmb CapSet
}

// ReadStatus reads the confinement of every thread of pid.
func ReadStatus(pid int) ([]ThreadStatus, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list threads: %w", err)
	}
	var out []ThreadStatus
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "status"))
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread exited
		}
		if err != nil {
			return nil, err
		}
		st, err := parseStatus(b)
		if err != nil {
			return nil, fmt.Errorf("thread %s: %w", task.Name(), err)
		}
		st.TID, _ = strconv.Atoi(task.Name())
		out = append(out, st)
	}
	return out, nil
}

func parseStatus(b []byte) (ThreadStatus, error) {
	var st ThreadStatus
	ints := map[string]*int{"Seccomp": &st.Seccomp, "NoNewPrivs": &st.NoNewPrivs, "Seccomp_filters": &st.SeccompFilters}
	caps := map[string]*CapSet{"CapEff": &st.CapEff, "CapPrm": &st.CapPrm, "CapInh": &st.CapInh, "CapBnd": &st.CapBnd, "CapAmb": &st.CapAmb}
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		v = strings.TrimSpace(v)
		if p, ok := ints[k]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return st, fmt.Errorf("%s %q: %w", k, v, err)
			}
			*p = n
			seen++
		}
		if p, ok := caps[k]; ok {
			n, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				return st, fmt.Errorf("%s %q: %w", k, v, err)
			}
			*p = CapSet(n)
			seen++
		}
	}
	if seen != len(ints)+len(caps) {
		return st, errors.New("status lacks seccomp or capability fields")
	}
	return st, nil
}

// CheckConfined returns an error naming every thread of pid that is not
// confined as role: seccomp filter mode with at least the two filters
// Install adds, no_new_privs, and no capability beyond the role's steady
// set in the effective, permitted, inheritable and ambient sets, and for
// the sampler (root, which may drop them) in the bounding set too. The
// encoder runs as its own user, which cannot drop from the bounding set;
// no_new_privs keeps what is left there out of its reach. It returns the
// main thread's status for reports.
func CheckConfined(pid int, role Role) (ThreadStatus, error) {
	lastCap, err := readLastCap()
	if err != nil {
		return ThreadStatus{}, err
	}
	allowed := Capabilities(role, lastCap)
	threads, err := ReadStatus(pid)
	if err != nil {
		return ThreadStatus{}, err
	}
	var main ThreadStatus
	var errs []error
	for _, th := range threads {
		if th.TID == pid {
			main = th
		}
		if th.Seccomp != 2 || th.NoNewPrivs != 1 || th.SeccompFilters < 2 {
			errs = append(errs, fmt.Errorf("thread %d: Seccomp %d, NoNewPrivs %d, Seccomp_filters %d; want 2, 1, >= 2",
				th.TID, th.Seccomp, th.NoNewPrivs, th.SeccompFilters))
		}
		sets := map[string]CapSet{"CapEff": th.CapEff, "CapPrm": th.CapPrm, "CapInh": th.CapInh, "CapAmb": th.CapAmb}
		if role == Sampler {
			sets["CapBnd"] = th.CapBnd
		}
		for name, set := range sets {
			if extra := set &^ allowed; extra != 0 {
				errs = append(errs, fmt.Errorf("thread %d: %s holds %v beyond the %s's steady set", th.TID, name, extra, role))
			}
		}
	}
	return main, errors.Join(errs...)
}
