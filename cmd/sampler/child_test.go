package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"testing"
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
