package main

import (
	"bytes"
	"context"
	"io"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/sampler"
)

func TestBadFlagsNameTheFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"unknown flag", []string{"--bogus"}, []string{"unknown flag: --bogus"}},
		{"frequency", []string{"--profiling-cpu-sampling-frequency", "0"}, []string{"--profiling-cpu-sampling-frequency:", "out of range"}},
		{"go without symbolization", []string{"--tracers", "python,go"}, []string{"--tracers:", "--symbolize-go"}},
		{"unknown tracer", []string{"--tracers", "cobol"}, []string{"--tracers:", `unknown tracer "cobol"`}},
		{"off-cpu range", []string{"--off-cpu-threshold", "1.5"}, []string{"--off-cpu-threshold:"}},
		{"probabilistic", []string{"--profiling-probabilistic-threshold", "200"}, []string{"--profiling-probabilistic-threshold:"}},
		{"env var", []string{"--include-env-var", "A=B"}, []string{"--include-env-var:"}},
		{"map scale", []string{"--map-scale-factor", "9"}, []string{"--map-scale-factor:"}},
		{"relative bpffs root", []string{"--obi-process-ctx", "--bpffs-root", "sys/fs/bpf"}, []string{"--bpffs-root:", "absolute path"}},
		{"no encoder without record", []string{"--no-encoder"}, []string{"--no-encoder needs --record"}},
		{"unknown encoder user", []string{"--encoder-uid", "no-such-user-tandem"}, []string{"--encoder-uid=no-such-user-tandem"}},
		{"buffer", []string{"--max-buffer-bytes", "0"}, []string{"--max-buffer-bytes=0"}},
		{"held executables", []string{"--max-held-executables", "0"}, []string{"--max-held-executables=0: must be at least 1"}},
		{"held executable bytes", []string{"--max-held-executable-bytes", "1024"}, []string{"--max-held-executable-bytes=1024: must be at least 1 MiB"}},
		{"flush interval", []string{"--flush-interval", "0s"}, []string{"--flush-interval:", "must be positive"}},
		{"log level", []string{"--encoder-uid", "0", "--log-level", "loud"}, []string{"--log-level"}},
		{"several at once", []string{"--profiling-cpu-sampling-frequency", "0", "--map-scale-factor", "9"},
			[]string{"--profiling-cpu-sampling-frequency:", "--map-scale-factor:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := execute(context.Background(), tt.args, io.Discard, &stderr); code != cli.ExitUsage {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, cli.ExitUsage, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not contain %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

func TestEncoderUIDs(t *testing.T) {
	o := &options{encoderUIDs: []string{"65534", "root", "65534", ""}}
	got, err := o.peerUIDs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []uint32{0, 65534}) {
		t.Errorf("peer uids %v, want [0 65534] (0 always, names resolved, deduplicated)", got)
	}
}

// TestDefaultEncoderUserMissing: the default trusts the dedicated user
// tandem, not nobody; where it does not exist the error says how to create
// it or which flag to pass.
func TestDefaultEncoderUserMissing(t *testing.T) {
	lookupUser = func(name string) (*user.User, error) { return nil, user.UnknownUserError(name) }
	t.Cleanup(func() { lookupUser = user.Lookup })
	var stderr bytes.Buffer
	if code := execute(context.Background(), []string{"--socket", filepath.Join(t.TempDir(), "s")}, io.Discard, &stderr); code != cli.ExitUsage {
		t.Fatalf("exit status %d, want %d; stderr:\n%s", code, cli.ExitUsage, stderr.String())
	}
	for _, want := range []string{"--encoder-uid=tandem", "tandem.sysusers", "name the encoder's user with --encoder-uid"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not contain %q:\n%s", want, stderr.String())
		}
	}
	// Not needed without an encoder.
	o := &options{encoderUIDs: []string{defaultEncoderUID}, noEncoder: true, record: "x", maxBufferBytes: 1, maxHeldExecutables: 1, maxHeldExecutableBytes: 1 << 20, cfg: sampler.DefaultConfig()}
	if err := o.complete(); err != nil {
		t.Errorf("--no-encoder with the default user missing: %v", err)
	}
}

// TestRecordOnlyKeepsExecutableNotices: --no-encoder --record still
// reports executables, so that the recording carries their notices (a
// replay names native frames from them); --debuginfo-upload-disable turns
// that off.
func TestRecordOnlyKeepsExecutableNotices(t *testing.T) {
	for _, tc := range []struct {
		uploadDisable, want bool
	}{{false, true}, {true, false}} {
		o := &options{noEncoder: true, record: "x", maxBufferBytes: 1, maxHeldExecutables: 1, maxHeldExecutableBytes: 1 << 20, uploadDisable: tc.uploadDisable, cfg: sampler.DefaultConfig()}
		if err := o.complete(); err != nil {
			t.Fatal(err)
		}
		if o.cfg.SendExecutables != tc.want {
			t.Errorf("--no-encoder --record, --debuginfo-upload-disable=%v: SendExecutables %v, want %v", tc.uploadDisable, o.cfg.SendExecutables, tc.want)
		}
	}
}

// TestVersionAndHelpOnStdout: --version and --help print to stdout, as
// tandem-encoder's do, so that `tandem-sampler --version | ...` works.
func TestVersionAndHelpOnStdout(t *testing.T) {
	for _, arg := range []string{"--version", "--help"} {
		var stdout, stderr bytes.Buffer
		if code := execute(context.Background(), []string{arg}, &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("%s: exit %d", arg, code)
		}
		if stdout.Len() == 0 || stderr.Len() != 0 {
			t.Errorf("%s printed %q to stdout and %q to stderr, want only stdout", arg, stdout.String(), stderr.String())
		}
	}
	var stdout bytes.Buffer
	execute(context.Background(), []string{"--version"}, &stdout, io.Discard)
	if !strings.Contains(stdout.String(), "tandem-sampler version") {
		t.Errorf("--version printed %q", stdout.String())
	}
}

// TestHelpListsWhatIsChecked: --help names every tracer the list accepts
// and every capability the start-up check can ask for.
func TestHelpListsWhatIsChecked(t *testing.T) {
	var stdout bytes.Buffer
	execute(context.Background(), []string{"--help"}, &stdout, io.Discard)
	help := strings.Join(strings.Fields(stdout.String()), " ")
	want := []string{"CAP_BPF", "CAP_PERFMON", "CAP_SYS_PTRACE", "CAP_CHECKPOINT_RESTORE", "CAP_SYS_ADMIN", "CAP_SYSLOG"}
	for _, tr := range sampler.KnownTracers() {
		if tr != "go" {
			want = append(want, tr)
		}
	}
	for _, w := range want {
		if !strings.Contains(help, w) {
			t.Errorf("--help does not mention %s:\n%s", w, help)
		}
	}
}
