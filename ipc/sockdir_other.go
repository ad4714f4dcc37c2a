//go:build !unix

package ipc

// CheckSocketDir does nothing on this platform, where the Client is not
// supported either.
func CheckSocketDir(socket string, trusted []uint32) error { return nil }
