package repo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFlagsDocumented keeps the README's flag tables and the binaries in
// step: every flag a command's --help lists appears in a README table row,
// and every flag a table row names is accepted by one of the commands
// (hidden and deprecated flags included, which --help does not list).
func TestFlagsDocumented(t *testing.T) {
	root := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := readmeTableFlags(string(readme))
	if len(documented) < 20 {
		t.Fatalf("found only %d flags in the README's tables: has their layout changed? (rows must start with \"| `--flag`\")", len(documented))
	}

	bin := t.TempDir()
	commands := map[string][][]string{} // binary path -> its commands' argument prefixes
	for _, c := range []struct{ name, pkg string }{{"tandem-sampler", "./cmd/sampler"}, {"tandem-encoder", "./cmd/encoder"}} {
		out := filepath.Join(bin, c.name)
		build := exec.Command("go", "build", "-o", out, c.pkg)
		build.Dir = root
		if msg, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", c.pkg, err, msg)
		}
		commands[out] = [][]string{nil}
		for _, sub := range subcommands(t, out) {
			commands[out] = append(commands[out], []string{sub})
		}
	}

	listed := map[string]bool{}
	for binary, cmds := range commands {
		for _, args := range cmds {
			for _, f := range helpFlags(t, binary, args) {
				listed[f] = true
				if !documented[f] {
					t.Errorf("%s %s: --%s is not in any of the README's flag tables: add a row", filepath.Base(binary), strings.Join(args, " "), f)
				}
			}
		}
	}
	for f := range documented {
		if listed[f] {
			continue
		}
		if !acceptedByAny(commands, f) {
			t.Errorf("README documents --%s, which no command accepts: remove the row or register the flag", f)
		}
	}
}

var (
	tableFlagRow = regexp.MustCompile("^\\|\\s*`--")
	flagToken    = regexp.MustCompile("`--([a-z0-9][a-z0-9-]*)")
	helpFlagLine = regexp.MustCompile(`^\s+(?:-[a-zA-Z], )?--([a-z0-9][a-z0-9-]*)`)
)

// readmeTableFlags returns the flags named in the first cell of the
// README's table rows.
func readmeTableFlags(readme string) map[string]bool {
	flags := map[string]bool{}
	for _, line := range strings.Split(readme, "\n") {
		if !tableFlagRow.MatchString(line) {
			continue
		}
		first := strings.SplitN(strings.TrimPrefix(line, "|"), "|", 2)[0]
		for _, m := range flagToken.FindAllStringSubmatch(first, -1) {
			flags[m[1]] = true
		}
	}
	return flags
}

// subcommands lists a cobra binary's commands (none for a flat command).
func subcommands(t *testing.T, binary string) []string {
	out, _ := exec.Command(binary, "--help").CombinedOutput()
	var subs []string
	in := false
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "Available Commands:"):
			in = true
		case in && strings.TrimSpace(line) == "":
			in = false
		case in:
			name := strings.Fields(line)[0]
			if name != "help" && name != "completion" {
				subs = append(subs, name)
			}
		}
	}
	return subs
}

// helpFlags returns the flags a command's --help lists, without the
// generic help and version flags.
func helpFlags(t *testing.T, binary string, args []string) []string {
	out, err := exec.Command(binary, append(slices.Clone(args), "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s --help: %v\n%s", binary, strings.Join(args, " "), err, out)
	}
	var flags []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := helpFlagLine.FindStringSubmatch(line); m != nil && m[1] != "help" && m[1] != "version" {
			flags = append(flags, m[1])
		}
	}
	if len(flags) == 0 {
		t.Fatalf("%s %s --help lists no flags:\n%s", binary, strings.Join(args, " "), out)
	}
	return flags
}

// acceptedByAny reports whether some command parses --flag. "--flag=
// --help" prints help for a flag that takes a string, and fails with a
// value error for other kinds; only an unregistered flag fails with
// "unknown flag".
func acceptedByAny(commands map[string][][]string, flag string) bool {
	for binary, cmds := range commands {
		for _, args := range cmds {
			out, _ := exec.Command(binary, append(slices.Clone(args), "--"+flag+"=", "--help")...).CombinedOutput()
			if !bytes.Contains(out, []byte("unknown flag")) {
				return true
			}
		}
	}
	return false
}
