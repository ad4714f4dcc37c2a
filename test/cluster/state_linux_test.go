package cluster

import (
	"os"
	"testing"
)

// TestStateRoundTrip: what Up records is what Down from another process
// (make cluster-down) reads back, whatever Config.Log is (make cluster-up
// logs to os.Stderr, which json encodes as an object it cannot decode
// into an io.Writer).
func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig(dir, "/bin")
	cfg.Log = os.Stderr
	c := &Cluster{State: State{Config: cfg, NodeIP: "10.213.0.1", Ports: map[string]int{"apiserver": 6443}}}
	if err := c.save(); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config.Dir != dir || got.NodeIP != c.NodeIP || got.Ports["apiserver"] != 6443 {
		t.Errorf("loaded %+v, want %+v", got.State, c.State)
	}
}
