package ipc

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrUnsafeSocketDir is wrapped by CheckSocketDir's errors: the socket's
// directory, or one above it, can be written by someone the sampler does
// not trust, who could then replace or remove the socket.
var ErrUnsafeSocketDir = errors.New("unsafe socket directory")

// SocketDirCheckFlag is the sampler flag that turns the directory check
// off; errors name it.
const SocketDirCheckFlag = "--socket-dir-check"

// ancestors returns dir and every directory above it, up to "/".
func ancestors(dir string) []string {
	var out []string
	for {
		out = append(out, dir)
		parent := filepath.Dir(dir)
		if parent == dir {
			return out
		}
		dir = parent
	}
}

// dirProblem says what makes a directory unsafe, "" if nothing. own says
// it is the socket's own directory, where the sticky bit does not help: an
// attacker could create the socket's name before the encoder does.
func dirProblem(mode fs.FileMode, uid, gid uint32, owners []uint32, own bool) string {
	if !slices.Contains(owners, uid) {
		return fmt.Sprintf("it is owned by uid %d, neither root nor an encoder uid (%s)", uid, uidList(owners))
	}
	sticky := mode&fs.ModeSticky != 0 && !own
	perm := mode.Perm()
	if perm&0o002 != 0 && !sticky {
		return fmt.Sprintf("it is writable by everyone (mode %04o)", perm)
	}
	if perm&0o020 != 0 && gid != 0 && !sticky {
		return fmt.Sprintf("it is writable by group %d (mode %04o)", gid, perm)
	}
	return ""
}

func uidList(uids []uint32) string {
	u := slices.Clone(uids)
	slices.Sort(u)
	u = slices.Compact(u)
	s := make([]string, len(u))
	for i, x := range u {
		s[i] = strconv.FormatUint(uint64(x), 10)
	}
	return strings.Join(s, ", ")
}
