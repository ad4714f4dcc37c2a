package ipc

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerPID: the server of a listening socket is its creator when the
// creator holds it alone (or runs as another user than root), and the one
// other process holding it when a root creator passed it on, as systemd
// does under socket activation.
func TestServerPID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	self := int32(os.Getpid())

	for _, tc := range []struct {
		name    string
		path    string
		uid     uint32
		holders int
		want    func(holders []int) uint32
		wantErr string
	}{
		{"the creator alone", path, 0, 0, func([]int) uint32 { return uint32(self) }, ""},
		{"a non-root creator is the server", path, 1000, 1, func([]int) uint32 { return uint32(self) }, ""},
		{"another path", path + ".other", 0, 1, func([]int) uint32 { return uint32(self) }, ""},
		{"passed on", path, 0, 1, func(h []int) uint32 { return uint32(h[0]) }, ""},
		{"passed to two", path, 0, 2, func([]int) uint32 { return 0 }, "cannot tell which one serves it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hs []int
			for range tc.holders {
				hs = append(hs, int(holdSocket(t, ln)))
			}
			got, err := serverPID("/proc", tc.path, self, tc.uid)
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("serverPID: %v, want an error containing %q", err, tc.wantErr)
			}
			if want := tc.want(hs); got != want {
				t.Errorf("serverPID = %d, want %d (creator %d, holders %v)", got, want, self, hs)
			}
		})
	}
}
