package confine

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the committed profiles and unit lines from Rules")

// unitMarker precedes the generated SystemCallFilter= line in a unit.
const unitMarker = "# Denied from the first instruction by confine.Rules (TestRuntimeProfiles keeps this in step):"

// runtimeFiles are the committed files generated from Rules.
var runtimeFiles = []struct {
	role    Role
	profile string // OCI seccomp profile
	unit    string // systemd unit
}{
	{Sampler, "../deploy/seccomp/tandem-sampler.json", "../deploy/systemd/tandem-sampler.service"},
	{Encoder, "../deploy/seccomp/tandem-encoder.json", "../deploy/systemd/tandem-encoder.service"},
}

// TestRuntimeProfiles fails when a committed seccomp profile or a unit's
// SystemCallFilter= line no longer says what Rules says. Fix: go test
// ./confine -run TestRuntimeProfiles -update.
func TestRuntimeProfiles(t *testing.T) {
	for _, f := range runtimeFiles {
		t.Run(f.role.String(), func(t *testing.T) {
			want, err := OCIProfile(f.role)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(f.profile, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(f.profile)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from confine.Rules: run go test ./confine -run TestRuntimeProfiles -update", f.profile)
			}

			unit, err := os.ReadFile(f.unit)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(unit), "\n")
			line := SystemdFilter(f.role)
			found := false
			for i, l := range lines {
				if l != unitMarker || i+1 >= len(lines) {
					continue
				}
				found = true
				if *update {
					lines[i+1] = line
					if err := os.WriteFile(f.unit, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
						t.Fatal(err)
					}
				} else if lines[i+1] != line {
					t.Errorf("%s: the line after the marker is\n%s\nconfine.Rules says\n%s\n(run go test ./confine -run TestRuntimeProfiles -update)", f.unit, lines[i+1], line)
				}
			}
			if !found {
				t.Errorf("%s has no line %q followed by the generated SystemCallFilter=", f.unit, unitMarker)
			}
		})
	}
}

// TestOCIProfileShape checks the profile is what runc and the kubelet
// read: allow by default, EPERM for each rule, native architecture only.
func TestOCIProfileShape(t *testing.T) {
	for _, role := range Roles {
		b, err := OCIProfile(role)
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]any
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		if p["defaultAction"] != "SCMP_ACT_ALLOW" {
			t.Errorf("%s: defaultAction %v", role, p["defaultAction"])
		}
		if _, ok := p["architectures"]; ok {
			t.Errorf("%s: an architectures list admits foreign entries", role)
		}
		calls := p["syscalls"].([]any)
		if len(calls) != len(Denied(role, Always)) {
			t.Errorf("%s: %d syscall groups, want %d", role, len(calls), len(Denied(role, Always)))
		}
		for _, c := range calls {
			c := c.(map[string]any)
			if c["action"] != "SCMP_ACT_ERRNO" || c["errnoRet"] != float64(1) {
				t.Errorf("%s: %v: want SCMP_ACT_ERRNO with errnoRet 1 (EPERM)", role, c["names"])
			}
		}
	}
}

// TestRulesAssemble checks every rule's names exist for the native
// architecture and that the filters are deny-lists of the rules.
func TestRulesAssemble(t *testing.T) {
	for _, role := range Roles {
		p, err := Policy(role)
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		if len(p.Syscalls) != len(Denied(role, AfterStart)) {
			t.Errorf("%s: %d groups, want %d", role, len(p.Syscalls), len(Denied(role, AfterStart)))
		}
	}
}

// TestSecurityDocListsRules fails when docs/security.md's table misses a
// system call the rules deny.
func TestSecurityDocListsRules(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Rules {
		for _, n := range r.Names {
			if !strings.Contains(string(doc), "`"+n+"`") {
				t.Errorf("docs/security.md does not list %s (%s)", n, r.Why)
			}
		}
	}
}
