package sampler

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCapEff(t *testing.T) {
	status := "Name:\tsampler\nCapInh:\t0000000000000000\nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\n"
	c, err := parseCapEff([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if c != 0x000001fffeffffff || c.has(capSysResource) || !c.has(capBPF) {
		t.Errorf("CapEff %#x", uint64(c))
	}
	if _, err := parseCapEff([]byte("Name:\tx\n")); err == nil {
		t.Error("no CapEff line accepted")
	}
	if _, err := parseCapEff([]byte("CapEff:\tzz\n")); err == nil {
		t.Error("bad CapEff accepted")
	}
}

func TestMissingCapabilities(t *testing.T) {
	all := capSet(0x000001fffeffffff) // this VM: everything but CAP_SYS_RESOURCE
	if m := missingCapabilities(all, capNeeds{kptrRestrict: 1, mountTracefs: true}); len(m) != 0 {
		t.Errorf("full set missing %v", m)
	}
	minimal := capSet(1<<capBPF | 1<<capPerfmon | 1<<capSysPtrace | 1<<capCheckpointRestore)
	if m := missingCapabilities(minimal, capNeeds{perfParanoid: 1}); len(m) != 0 {
		t.Errorf("minimal set missing %v", m)
	}
	// kptr_restrict=0 but perf_event_paranoid=2 (this VM): kallsyms
	// addresses need CAP_SYSLOG.
	if m := missingCapabilities(minimal, capNeeds{perfParanoid: 2}); len(m) != 1 || m[0].Names[0] != "CAP_SYSLOG" {
		t.Errorf("paranoid=2: missing %v, want CAP_SYSLOG", m)
	}
	m := missingCapabilities(1<<capBPF, capNeeds{kptrRestrict: 1, perfParanoid: 2, mountTracefs: true})
	err := &CapabilityError{Missing: m}
	msg := err.Error()
	for _, name := range []string{"CAP_PERFMON", "CAP_SYS_PTRACE", "CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN", "CAP_SYSLOG", "mount tracefs"} {
		if !strings.Contains(msg, name) {
			t.Errorf("error %q does not name %s", msg, name)
		}
	}
	if strings.Contains(msg, "CAP_BPF ") {
		t.Errorf("error %q names CAP_BPF, which is present", msg)
	}
	if !errors.Is(err, ErrMissingCapabilities) {
		t.Error("CapabilityError is not ErrMissingCapabilities")
	}
}

func TestCheckKallsyms(t *testing.T) {
	needs := capNeeds{kptrRestrict: 0, perfParanoid: 2}
	for _, tc := range []struct {
		name    string
		content *string // nil: no file
		want    string  // "" for no error
	}{
		{"addresses shown", ptr("0000000000000000 A fixed_percpu_data\nffffffff81000000 T _stext\n"), ""},
		{"zeros: capability missing", ptr("0000000000000000 A fixed_percpu_data\n0000000000000000 T _stext\n"), "CAP_SYSLOG"},
		{"empty: hidden by a sandbox", ptr(""), "ProtectKernelTunables"},
		{"missing file", nil, "ProtectKernelTunables"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kallsyms")
			if tc.content != nil {
				if err := os.WriteFile(path, []byte(*tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := checkKallsyms(path, needs)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// TestRequiredCapabilitiesCoversTheCheck: the help text names every
// capability the start-up check can ask for, on any host.
func TestRequiredCapabilitiesCoversTheCheck(t *testing.T) {
	help := RequiredCapabilities()
	for _, needs := range []capNeeds{{}, {kptrRestrict: 1}, {perfParanoid: 2}, {kptrRestrict: 1, perfParanoid: 2, mountTracefs: true}} {
		for _, m := range missingCapabilities(0, needs) {
			for _, name := range m.Names {
				if !strings.Contains(help, name) {
					t.Errorf("check asks for %s (%s) but the help %q does not name it", name, m.Reason, help)
				}
			}
		}
	}
}
