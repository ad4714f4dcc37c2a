package sockopt

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// PeerCred returns the credentials of the process at the other end of a
// connected Unix socket, as the kernel recorded them at connect (for the
// accepting side) or listen (for the connecting side) time.
func PeerCred(c syscall.Conn) (*unix.Ucred, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("read peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := rc.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("read peer credentials: %w", err)
	}
	if credErr != nil {
		return nil, fmt.Errorf("read peer credentials: getsockopt SO_PEERCRED: %w", credErr)
	}
	return cred, nil
}

// SocketType returns the SO_TYPE of a socket and whether it is listening.
func SocketType(c syscall.Conn) (typ int, listening bool, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false, err
	}
	var acc int
	var e1, e2 error
	if err := rc.Control(func(fd uintptr) {
		typ, e1 = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
		acc, e2 = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	}); err != nil {
		return 0, false, err
	}
	if e1 != nil {
		return 0, false, fmt.Errorf("getsockopt SO_TYPE: %w", e1)
	}
	if e2 != nil {
		return 0, false, fmt.Errorf("getsockopt SO_ACCEPTCONN: %w", e2)
	}
	return typ, acc != 0, nil
}
