package repo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/test/privtest"

	"github.com/tandem-profiler/tandem/test/harness"
)

// TestSystemdUnitsVerify runs systemd-analyze verify on the units, the
// sampler's with its optional drop-in, with ExecStart pointed at stand-in
// executables (the real ones are installed under /usr/local/bin on a node).
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		privtest.SkipOrFail(t, "systemd-analyze is needed to lint deploy/systemd")
	}
	root := harness.ModuleRoot(t)
	dir := t.TempDir()
	units := []string{"tandem-encoder.socket", "tandem-encoder.service", "tandem-sampler.service"}
	for _, bin := range []string{"tandem-encoder", "tandem-sampler"} {
		if err := os.WriteFile(filepath.Join(dir, bin), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var paths []string
	for _, u := range units {
		data, err := os.ReadFile(filepath.Join(root, "deploy", "systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte("/usr/local/bin/"), []byte(dir+"/"))
		p := filepath.Join(dir, u)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	// The optional drop-in (span map sharing with OBI), installed as an
	// administrator would: verify reads drop-ins next to the unit.
	dropIn, err := os.ReadFile(filepath.Join(root, "deploy", "systemd", "tandem-sampler-obi.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "tandem-sampler.service.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tandem-sampler.service.d", "obi.conf"), dropIn, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	// Units may reference targets this container does not have; only
	// problems in our own units count.
	var problems []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "tandem") {
			problems = append(problems, line)
		}
	}
	if len(problems) > 0 {
		t.Fatalf("systemd-analyze verify (%v):\n%s", err, strings.Join(problems, "\n"))
	}
}

// unitSettings parses a unit file into key -> values (repeated keys
// accumulate; an empty assignment resets, as systemd does).
func unitSettings(t *testing.T, name string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "deploy", "systemd", name))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not key=value", name, line)
		}
		if v == "" {
			out[k] = []string{""}
			continue
		}
		out[k] = append(out[k], v)
	}
	return out
}

// TestSystemdPosture checks the settings the privilege split rests on.
func TestSystemdPosture(t *testing.T) {
	sock := unitSettings(t, "tandem-encoder.socket")
	for k, want := range map[string]string{"SocketUser": "root", "SocketGroup": "tandem", "SocketMode": "0660", "Accept": "no"} {
		if got := strings.Join(sock[k], " "); got != want {
			t.Errorf("tandem-encoder.socket %s=%s, want %s", k, got, want)
		}
	}
	enc := unitSettings(t, "tandem-encoder.service")
	for k, want := range map[string]string{
		"Type": "notify", "User": "tandem", "NoNewPrivileges": "yes", "CapabilityBoundingSet": "",
		"AmbientCapabilities": "", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"PrivateDevices": "yes", "Restart": "on-failure", "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
		"EnvironmentFile": "-/etc/default/tandem-encoder",
	} {
		if got := strings.Join(enc[k], " "); got != want {
			t.Errorf("tandem-encoder.service %s=%s, want %s", k, got, want)
		}
	}
	// The allow-list and the privileged groups first; confine.Rules adds
	// its own lines after them (TestRuntimeProfiles).
	if got := strings.Join(enc["SystemCallFilter"], " "); !strings.HasPrefix(got, "@system-service ~@privileged @resources ") {
		t.Errorf("tandem-encoder.service SystemCallFilter=%s, want @system-service ~@privileged @resources first", got)
	}
	for _, k := range []string{"WatchdogSec", "MemoryMax"} {
		if len(enc[k]) == 0 {
			t.Errorf("tandem-encoder.service sets no %s", k)
		}
	}
	// The default output is pprof files in the state directory: bounded,
	// or a host left on its defaults fills its disk.
	if exec := strings.Join(enc["ExecStart"], " "); !regexp.MustCompile(`--output-dir-max-bytes[ =][1-9][0-9]* `).MatchString(exec) ||
		!strings.HasSuffix(exec, " $TANDEM_ENCODER_ARGS") {
		t.Errorf("tandem-encoder.service ExecStart=%s: want a positive --output-dir-max-bytes before $TANDEM_ENCODER_ARGS (which may override it)", exec)
	}
	smp := unitSettings(t, "tandem-sampler.service")
	for k, want := range map[string]string{
		"RestrictAddressFamilies": "AF_UNIX", "IPAddressDeny": "any", "PrivateNetwork": "yes",
		"LimitMEMLOCK": "infinity", "NoNewPrivileges": "yes", "EnvironmentFile": "-/etc/default/tandem-sampler",
		"Type": "notify",
	} {
		if got := strings.Join(smp[k], " "); got != want {
			t.Errorf("tandem-sampler.service %s=%s, want %s", k, got, want)
		}
	}
	var caps []string
	for _, c := range strings.Fields(strings.Join(smp["CapabilityBoundingSet"], " ")) {
		caps = append(caps, strings.TrimPrefix(c, "CAP_"))
	}
	if !equalSets(caps, samplerCapabilities) {
		t.Errorf("tandem-sampler.service CapabilityBoundingSet=%v, want exactly the measured set %v", caps, samplerCapabilities)
	}
}

// TestSysusersCreatesEncoderUser applies tandem.sysusers to an empty root:
// it must create the user the encoder service runs as and the sampler
// names (--encoder-uid tandem), and the group the socket is owned by.
func TestSysusersCreatesEncoderUser(t *testing.T) {
	sysusers, err := exec.LookPath("systemd-sysusers")
	if err != nil {
		privtest.SkipOrFail(t, "systemd-sysusers is needed to check deploy/systemd/tandem.sysusers")
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(harness.ModuleRoot(t), "deploy", "systemd", "tandem.sysusers")
	if out, err := exec.Command(sysusers, "--root="+root, conf).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	for file, want := range map[string]string{"passwd": "tandem:", "group": "tandem:"} {
		data, err := os.ReadFile(filepath.Join(root, "etc", file))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, line := range strings.Split(string(data), "\n") {
			found = found || strings.HasPrefix(line, want)
		}
		if !found {
			t.Errorf("tandem.sysusers creates no %s entry in /etc/%s", strings.TrimSuffix(want, ":"), file)
		}
	}
	if user := unitSettings(t, "tandem-encoder.service")["User"]; len(user) != 1 || user[0] != "tandem" {
		t.Errorf("tandem-encoder.service User=%v, want the sysusers user tandem", user)
	}
	if group := unitSettings(t, "tandem-encoder.socket")["SocketGroup"]; len(group) != 1 || group[0] != "tandem" {
		t.Errorf("tandem-encoder.socket SocketGroup=%v, want the sysusers group tandem", group)
	}
}

// TestMakeRunHelpNamesTheEncoderUser: `make help` describes make run with
// the user run-pair.sh really runs the encoder as.
func TestMakeRunHelpNamesTheEncoderUser(t *testing.T) {
	root := harness.ModuleRoot(t)
	script, err := os.ReadFile(filepath.Join(root, "deploy", "local", "run-pair.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ENCODER_USER=\$\{TANDEM_ENCODER_USER:-([a-z0-9_-]+)\}`).FindSubmatch(script)
	if m == nil {
		t.Fatal("run-pair.sh sets no default ENCODER_USER")
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	help := regexp.MustCompile(`(?m)^run:.*## (.*)$`).FindSubmatch(makefile)
	if help == nil {
		t.Fatal("the Makefile's run target has no ## help text")
	}
	if !strings.Contains(string(help[1]), "user "+string(m[1])) || strings.Contains(string(help[1]), "65534") {
		t.Errorf("make help says %q for run; run-pair.sh runs the encoder as user %s", help[1], m[1])
	}
}

// TestMakeRunPassesExtraArgs: make run's script hands TANDEM_SAMPLER_ARGS
// and TANDEM_ENCODER_ARGS to the two commands, split on whitespace as the
// systemd units do (stand-in executables record what they get).
func TestMakeRunPassesExtraArgs(t *testing.T) {
	privtest.RequireRoot(t) // the script runs the sampler as root and the encoder as another user
	dir, err := os.MkdirTemp("", "tandem-run-pair-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The encoder runs as nobody: it must reach its stand-in and the record.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	record := func(name string) string { return filepath.Join(dir, name+".args") }
	for _, name := range []string{"encoder", "sampler"} {
		if err := os.WriteFile(record(name), nil, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(record(name), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	// The encoder stays until stopped; the sampler records and exits, which
	// ends the pair.
	stub := map[string]string{
		"tandem-encoder": "#!/bin/sh\nprintf '%s\\n' \"$@\" >" + record("encoder") + "\nexec sleep 600\n",
		"tandem-sampler": "#!/bin/sh\nwhile [ ! -s " + record("encoder") + " ]; do sleep 0.05; done\nprintf '%s\\n' \"$@\" >" + record("sampler") + "\n",
	}
	for name, text := range stub {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(moduleRoot(t), "deploy", "local", "run-pair.sh"))
	cmd.Env = append(os.Environ(), "TANDEM_BIN_DIR="+bin, "TANDEM_ENCODER_USER=nobody",
		"TANDEM_RUN_DIR="+filepath.Join(dir, "run"), "TANDEM_OUTPUT_DIR="+filepath.Join(dir, "profiles"),
		"TANDEM_SAMPLER_ARGS=--off-cpu-threshold=0.01   --tracers=python", "TANDEM_ENCODER_ARGS=--profiling-label-ttl=5m")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("run-pair.sh: %v\n%s", err, out)
	}
	for name, want := range map[string]string{"sampler": "--off-cpu-threshold=0.01\n--tracers=python\n", "encoder": "--profiling-label-ttl=5m\n"} {
		got, err := os.ReadFile(record(name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(got), want) {
			t.Errorf("the %s got arguments\n%s\nwant them to end with\n%s", name, got, want)
		}
	}
}
