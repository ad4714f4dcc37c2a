package sampler

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckLockdown(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		refused       bool
	}{
		{"none", "[none] integrity confidentiality\n", false},
		{"integrity", "none [integrity] confidentiality\n", false},
		{"confidentiality", "none integrity [confidentiality]\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			err := checkLockdown(p)
			if got := errors.Is(err, ErrLockedDown); got != tc.refused {
				t.Fatalf("checkLockdown(%q) = %v, refused %v, want %v", tc.content, err, got, tc.refused)
			}
			if err != nil && (strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "lockdown=confidentiality")) {
				t.Errorf("%q: want one line naming the boot option", err)
			}
		})
	}
	if err := checkLockdown(filepath.Join(dir, "absent")); err != nil {
		t.Errorf("no securityfs: %v, want no check", err)
	}
}

func TestCheckKprobesMissing(t *testing.T) {
	_, err := checkKprobes(t.TempDir())
	if _, statErr := os.Stat(kprobePMUPath); statErr == nil {
		t.Skipf("this kernel has the kprobe PMU (%s): the check passes", kprobePMUPath)
	}
	if !errors.Is(err, ErrNoKprobes) || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "CONFIG_KPROBES") {
		t.Errorf("err %v, want one line wrapping ErrNoKprobes naming CONFIG_KPROBES", err)
	}
}

func TestCheckKprobesArmed(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		refused       bool
	}{
		{"armed", "1\n", false},
		{"disarmed", "0\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			err := checkKprobesArmed(p)
			if got := errors.Is(err, ErrNoKprobes); got != tc.refused {
				t.Fatalf("checkKprobesArmed(%q) = %v, refused %v, want %v", tc.content, err, got, tc.refused)
			}
			if err != nil && (strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "echo 1 > "+p)) {
				t.Errorf("%q: want one line naming the file and the fix", err)
			}
		})
	}
	if err := checkKprobesArmed(filepath.Join(dir, "absent")); err != nil {
		t.Errorf("no debugfs: %v, want no check", err)
	}
}
