package ipc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// serverPID returns the pid of the process serving the listening socket at
// path, given creator, the pid SO_PEERCRED reports for a connection to it.
// SO_PEERCRED names the process that called listen(), not the one that
// accepts: under socket activation that is the service manager (systemd,
// pid 1), which passed the socket to the encoder. So when creator runs as
// root (creatorUID 0; a service manager does), the holders of the
// listening socket are looked up in /proc: the one holder other than
// creator is the server. It returns creator when creator is the only
// holder, or when the socket cannot be found under path in creator's
// network namespace (the encoder then listens itself, in a pod under
// another path); 0 and an error when several other processes hold it.
func serverPID(procRoot, path string, creator int32, creatorUID uint32) (uint32, error) {
	if creatorUID != 0 {
		return uint32(creator), nil
	}
	ino, err := listeningInode(filepath.Join(procRoot, strconv.Itoa(int(creator)), "net", "unix"), path)
	if err != nil || ino == "" {
		return uint32(creator), err
	}
	holders, err := socketHolders(procRoot, "socket:["+ino+"]")
	if err != nil {
		return 0, err
	}
	var others []int
	for _, pid := range holders {
		if pid != int(creator) {
			others = append(others, pid)
		}
	}
	switch len(others) {
	case 0:
		return uint32(creator), nil
	case 1:
		return uint32(others[0]), nil
	default:
		return 0, fmt.Errorf("the socket %s is held by processes %v besides its creator (pid %d): cannot tell which one serves it", path, others, creator)
	}
}

// listeningInode returns the inode of the listening Unix socket bound to
// path in a /proc/PID/net/unix table, "" when there is none.
func listeningInode(table, path string) (string, error) {
	b, err := os.ReadFile(table)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", table, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Scan() // header: Num RefCount Protocol Flags Type St Inode Path
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// __SO_ACCEPTCON (0x10000) in Flags marks a listening socket.
		if len(f) == 8 && f[7] == path && f[3] == "00010000" {
			return f[6], nil
		}
	}
	return "", sc.Err()
}

// socketHolders returns the processes (thread group ids) with a descriptor
// whose link is target ("socket:[INODE]"). Processes whose descriptors
// cannot be read (gone, or not this user's without CAP_SYS_PTRACE) are
// skipped.
func socketHolders(procRoot, target string) ([]int, error) {
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(procRoot, e.Name(), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && l == target {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids, nil
}
