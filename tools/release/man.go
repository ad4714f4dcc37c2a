package release

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ManDir holds the commands' man pages (roff, NAME.1), generated from the
// cobra commands; relative to the repository's root.
const ManDir = "docs/man"

// Commands are the programs the packages install, each with a man page.
var Commands = []string{"tandem-sampler", "tandem-encoder"}

// ManPages returns the man pages the packages install, by file name
// (tandem-encoder.1): every page in ManDir, and for a command ManDir lacks
// a short page naming the command, its --help and docs/install.md.
func ManPages(src Source) (map[string][]byte, error) {
	pages := map[string][]byte{}
	found, err := filepath.Glob(filepath.Join(src.Root, ManDir, "*.1"))
	if err != nil {
		return nil, err
	}
	for _, p := range found {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read man page: %w", err)
		}
		pages[filepath.Base(p)] = data
	}
	for _, cmd := range Commands {
		if _, ok := pages[cmd+".1"]; !ok {
			pages[cmd+".1"] = []byte(shortManPage(src, cmd))
		}
	}
	return pages, nil
}

var summaries = map[string]string{
	"tandem-sampler": "Tandem's privileged eBPF sampler",
	"tandem-encoder": "Tandem's unprivileged encoder and exporter",
}

func shortManPage(src Source, cmd string) string {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH %s 1 %q \"tandem %s\" \"Tandem\"\n", strings.ToUpper(cmd), src.Created.UTC().Format("2006-01-02"), src.Version)
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", cmd, summaries[cmd])
	fmt.Fprintf(&b, ".SH SYNOPSIS\n.B %s\n.RI [ flags ]\n", cmd)
	fmt.Fprintf(&b, ".SH DESCRIPTION\nRun\n.B %s \\-\\-help\nfor its commands and flags.\nThe systemd units tandem\\-sampler.service, tandem\\-encoder.service and\ntandem\\-encoder.socket run it; their settings are in /etc/default/%s.\n", cmd, cmd)
	b.WriteString(".SH SEE ALSO\n")
	for _, c := range Commands {
		if c != cmd {
			fmt.Fprintf(&b, ".BR %s (1),\n", c)
		}
	}
	b.WriteString(".BR systemd-sysusers (8)\n")
	return b.String()
}
