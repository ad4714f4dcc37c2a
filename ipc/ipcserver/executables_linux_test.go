package ipcserver

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/waittest"
)

// writeExecutable writes a file of size bytes in dir and opens it.
func writeExecutable(t *testing.T, dir, name string, size int) (string, *os.File) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, f
}

// noticeOf encodes the notice of an executable seen in process pid.
func noticeOf(t *testing.T, pid int, id uint64) []byte {
	t.Helper()
	b, err := schema.EncodeExecutableNotice(&schema.ExecutableNotice{
		FileID: schema.FileID{Hi: id, Lo: id}, PID: uint32(pid), HasDescriptor: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRetainedExecutablesReleased: the client closes a kept descriptor
// once its file is deleted, the server acknowledged the notice and the
// process is gone (in any order), and sends it no more; a deleted file
// whose process runs, or a linked one, is kept and sent again.
func TestRetainedExecutablesReleased(t *testing.T) {
	checkNoFDLeak(t)
	running := exec.Command("sleep", "1000")
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = running.Process.Kill(); _ = running.Wait() })
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, Config{})
	cl := newTestClient(t, s.Addr().String(), func(c *ipc.ClientConfig) { c.ExecutableCheckInterval = time.Millisecond })
	run(t, cl)
	conn := accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	waittest.For(t, "client to be connected", func() bool { return cl.Stats().Connected })

	dir := t.TempDir()
	const size = 10 << 10
	runningPath, runningFile := writeExecutable(t, dir, "running", size)
	exitedPath, exitedFile := writeExecutable(t, dir, "exited", size)
	_, linkedFile := writeExecutable(t, dir, "linked", size)
	notices := [][]byte{noticeOf(t, running.Process.Pid, 1), noticeOf(t, exited.Process.Pid, 2), noticeOf(t, exited.Process.Pid, 3)}
	for i, f := range []*os.File{runningFile, exitedFile, linkedFile} {
		if !cl.SendExecutable(notices[i], f) {
			t.Fatal("SendExecutable refused while connected")
		}
	}
	for i := range notices {
		expectFrame(t, conn, ipc.FrameExecutable, notices[i]).File.Close()
	}
	for _, p := range []string{runningPath, exitedPath} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	waittest.For(t, "the deleted files to be seen", func() bool { return cl.Stats().ExecutablesHeldDeleted == 2 })
	if st := cl.Stats(); st.ExecutablesReleasedEarly != 0 || st.ExecutablesHeld != 3 || st.ExecutablesHeldBytes != 3*size {
		t.Fatalf("released before the server acknowledged: %+v", st)
	}

	cl.SendReliable(1, ipc.FrameBatch, seqPayload(1, 50), 1)
	expectFrame(t, conn, ipc.FrameBatch, seqPayload(1, 50))
	if err := conn.Ack(1); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, "the exited process's executable to be released", func() bool { return cl.Stats().ExecutablesReleasedEarly == 1 })
	if st := cl.Stats(); st.ExecutablesHeld != 2 || st.ExecutablesHeldDeleted != 1 || st.ExecutablesHeldBytes != 2*size {
		t.Errorf("after the ack: %+v", st)
	}
	if err := running.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = running.Wait()
	waittest.For(t, "the killed process's executable to be released", func() bool { return cl.Stats().ExecutablesReleasedEarly == 2 })
	if st := cl.Stats(); st.ExecutablesHeld != 1 || st.ExecutablesHeldDeleted != 0 || st.ExecutablesHeldBytes != size {
		t.Errorf("after the process exited: %+v", st)
	}

	// A restarted encoder gets the linked file's notice alone.
	conn.Close()
	conn = accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	expectFrame(t, conn, ipc.FrameExecutable, notices[2]).File.Close()
	cl.SendReliable(2, ipc.FrameBatch, seqPayload(2, 50), 1)
	expectFrame(t, conn, ipc.FrameBatch, seqPayload(2, 50))
}

// TestRetainedExecutableBounds: past either bound the oldest kept
// descriptor is closed, counted by bound.
func TestRetainedExecutableBounds(t *testing.T) {
	const size = 10 << 10
	for _, tc := range []struct {
		name                string
		count               int
		bytes               int64
		wantCount, wantByte uint64
	}{
		{"count", 2, 1 << 20, 1, 0},
		{"bytes", 10, 2*size + size/2, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkNoFDLeak(t)
			s := startServer(t, Config{})
			cl := newTestClient(t, s.Addr().String(), func(c *ipc.ClientConfig) {
				c.MaxRetainedExecutables, c.MaxRetainedExecutableBytes = tc.count, tc.bytes
			})
			run(t, cl)
			conn := accept(t, s)
			expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
			waittest.For(t, "client to be connected", func() bool { return cl.Stats().Connected })
			dir := t.TempDir()
			for i := range 3 {
				_, f := writeExecutable(t, dir, string(rune('a'+i)), size)
				if !cl.SendExecutable([]byte{byte(i)}, f) {
					t.Fatal("SendExecutable refused while connected")
				}
				expectFrame(t, conn, ipc.FrameExecutable, []byte{byte(i)}).File.Close()
			}
			waittest.For(t, "the oldest to be evicted", func() bool {
				st := cl.Stats()
				return st.ExecutablesEvictedForCount+st.ExecutablesEvictedForBytes == 1
			})
			st := cl.Stats()
			if st.ExecutablesEvictedForCount != tc.wantCount || st.ExecutablesEvictedForBytes != tc.wantByte || st.ExecutablesHeld != 2 || st.ExecutablesHeldBytes != 2*size {
				t.Errorf("%+v", st)
			}
		})
	}
}
