//go:build unix

package ipc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// CheckSocketDir checks that only trusted uids can change what the socket
// path leads to: the socket's directory and every directory above it,
// before and after resolving symbolic links, must be owned by root, by this
// process's effective uid or by one of trusted (the encoder's uids), and
// must not be writable by group (unless the group is root) or others. A
// directory above the socket's own may be writable by anyone when its
// sticky bit is set (/tmp): others can add entries there but cannot rename
// or remove the trusted one below. A directory that does not exist yet is
// not an error: connecting will fail, and the next attempt checks again.
// The error names the directory, what is wrong, and the fix.
func CheckSocketDir(socket string, trusted []uint32) error {
	abs, err := filepath.Abs(socket)
	if err != nil {
		return fmt.Errorf("check socket directory of %s: %w", socket, err)
	}
	dir := filepath.Dir(abs)
	owners := append([]uint32{0, uint32(os.Geteuid())}, trusted...)
	dirs := ancestors(dir)
	if real, err := filepath.EvalSymlinks(dir); err == nil && real != dir {
		for _, d := range ancestors(real) {
			if !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	for _, d := range dirs {
		fi, err := os.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("check socket directory %s: %w", d, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			continue // its target is among dirs (resolved path), its parent too
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("check socket directory %s: no owner information", d)
		}
		if problem := dirProblem(fi.Mode(), st.Uid, st.Gid, owners, d == dir); problem != "" {
			return fmt.Errorf("socket directory %s (socket %s): %s, so others could replace or remove the socket and receive the profile stream and executables; "+
				"fix: make it owned by root or the encoder's user and writable only by its owner "+
				"(chown root:root %s && chmod 0755 %s, as systemd's RuntimeDirectory does), "+
				"or pass %s=false if only the sampler and the encoder can reach it (a pod's emptyDir): %w",
				d, abs, problem, d, d, SocketDirCheckFlag, ErrUnsafeSocketDir)
		}
	}
	return nil
}
