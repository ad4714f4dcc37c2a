package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// samplerChildEnv makes the test binary run the command itself (see
// TestMain): tests that start the sampler run it as a child process, since
// it confines the process it runs in.
const samplerChildEnv = "TANDEM_SAMPLER_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(samplerChildEnv) == "1" {
		os.Exit(execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// startCommand runs tandem-sampler with args in a child process (this
// test binary), its output to stderr. exit receives its status once it
// ends; exited is closed then. The child is killed at the end of the test.
func startCommand(t *testing.T, args []string, stderr io.Writer) (cmd *exec.Cmd, exit chan int, exited chan struct{}) {
	t.Helper()
	cmd = exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), samplerChildEnv+"=1")
	cmd.Stdout = stderr
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the sampler: %v", err)
	}
	exit = make(chan int, 1)
	exited = make(chan struct{})
	go func() {
		defer close(exited)
		_ = cmd.Wait()
		exit <- cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return cmd, exit, exited
}

// cpuTime returns the CPU time (user and system) process pid has used.
func cpuTime(t *testing.T, pid uint32) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("read the CPU time of pid %d: %v", pid, err)
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime and stime are 14 and 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(f))
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// startBusyChild starts a single-threaded process that burns a CPU
// (sha256sum of /dev/zero), killed at the end of the test, and returns its
// pid and a channel closed if it exits.
func startBusyChild(t *testing.T) (pid uint32, exited <-chan struct{}) {
	t.Helper()
	child := exec.Command("sha256sum", "/dev/zero")
	if err := child.Start(); err != nil {
		t.Fatalf("start the busy child: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = child.Wait(); close(done) }()
	t.Cleanup(func() { _ = child.Process.Kill(); <-done })
	return uint32(child.Process.Pid), done
}
