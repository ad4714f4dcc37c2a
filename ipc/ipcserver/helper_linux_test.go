package ipcserver

import (
	"bytes"
	"context"
	"fmt"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/test/waittest"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runHelper runs the test binary as a helper process. Mode "activation"
// plays an encoder started by systemd socket activation: fd 3 is the
// listening socket and LISTEN_PID/LISTEN_FDS name this process.
func runHelper(mode string) int {
	if mode != "activation" {
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
	if err := activationHelper(); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

func activationHelper() error {
	s, err := Listen(Config{
		Path:        os.Getenv("TANDEM_TEST_UNUSED_PATH"),
		AllowedUIDs: []uint32{uint32(os.Getuid())},
	}, nil, nil)
	if err != nil {
		return err
	}
	defer s.Close()
	if !s.Activated() {
		return fmt.Errorf("listener not taken from systemd")
	}
	if v, ok := os.LookupEnv("LISTEN_FDS"); ok {
		return fmt.Errorf("LISTEN_FDS=%s left in the environment", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := s.Accept(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		f, err := c.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Printf("%s %q\n", f.Type, f.Payload)
		if f.Type.Reliable() {
			if err := c.Ack(payloadSeq(f.Payload)); err != nil {
				return err
			}
		}
	}
}

func TestSystemdActivation(t *testing.T) {
	checkNoFDLeak(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "activated.sock")
	unused := filepath.Join(dir, "unused.sock")
	// Play systemd: create the listening socket, hand it over as fd 3 and
	// set LISTEN_PID to the pid of the process that will use it (the shell
	// execs the test binary, keeping its pid).
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	lf, err := ln.File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=encoder exec "$0"`, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=activation", "TANDEM_TEST_UNUSED_PATH="+unused)
	cmd.ExtraFiles = []*os.File{lf}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	cl := newTestClient(t, path, nil)
	cl.SendReliable(1, ipc.FrameBatch, seqPayload(1, 8), 1)
	run(t, cl)
	waittest.For(t, "the activated server to ack", func() bool { return cl.Stats().AckedSeq == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := cl.Close(ctx, []byte("bye")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
		waited = true
	case <-time.After(waitTimeout):
		t.Fatal("helper did not exit")
	}
	if err != nil {
		t.Fatalf("helper: %v\nstderr:\n%s", err, stderr.String())
	}
	want := fmt.Sprintf("hello %q\nbatch %q\ngoodbye %q\n", "hello", seqPayload(1, 8), "bye")
	if stdout.String() != want {
		t.Errorf("helper saw:\n%s\nwant:\n%s", stdout.String(), want)
	}
	if _, err := os.Lstat(unused); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("helper bound its configured path instead of using the activated socket: %v", err)
	}
}
