package reference

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"
)

// Directories of the command pages, relative to the repository's root.
const (
	MarkdownDir = "docs/reference"
	ManDir      = "docs/man"
)

// hostPlaceholder replaces a flag default that is this machine's host name.
const hostPlaceholder = "$(hostname)"

// Commands returns the Markdown page (MarkdownDir/<name>.md, cobra's
// naming: "tandem-encoder_serve.md") and the man page (section 1,
// ManDir/<name>.1: "tandem-encoder-serve.1") of root and of every command
// under it. It changes root for the generator: auto-generation tags off,
// and a flag default equal to the host name shown as "$(hostname)".
func Commands(root *cobra.Command, manual string) (Files, error) {
	host, _ := os.Hostname()
	prepare(root, host)
	fs := Files{}
	if err := walk(root, func(c *cobra.Command) error {
		var md bytes.Buffer
		if err := doc.GenMarkdownCustom(c, &md, func(name string) string { return name }); err != nil {
			return fmt.Errorf("markdown of %s: %w", c.CommandPath(), err)
		}
		base := strings.ReplaceAll(c.CommandPath(), " ", "_")
		fs[MarkdownDir+"/"+base+".md"] = md.Bytes()
		return nil
	}); err != nil {
		return nil, err
	}
	// cobra renders man pages from Markdown, where <word> is an HTML tag and
	// disappears: escape it, now that the Markdown pages are written.
	escapeAngles(root)
	if err := walk(root, func(c *cobra.Command) error {
		var man bytes.Buffer
		date := time.Unix(0, 0).UTC()
		header := &doc.GenManHeader{Section: "1", Source: "Tandem", Manual: manual, Date: &date}
		if err := doc.GenMan(c, header, &man); err != nil {
			return fmt.Errorf("man page of %s: %w", c.CommandPath(), err)
		}
		fs[ManDir+"/"+strings.ReplaceAll(c.CommandPath(), " ", "-")+".1"] = undate(man.Bytes(), date)
		return nil
	}); err != nil {
		return nil, err
	}
	return fs, nil
}

// prepare turns off cobra's generation tags (they carry the date) and
// replaces host-dependent defaults, on root and every command under it.
func prepare(root *cobra.Command, host string) {
	_ = walk(root, func(c *cobra.Command) error {
		c.DisableAutoGenTag = true
		for _, set := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			set.VisitAll(func(f *pflag.Flag) {
				if host != "" && f.DefValue == host {
					f.DefValue = hostPlaceholder
				}
			})
		}
		return nil
	})
}

// escapeAngles backslash-escapes "<" in what a man page shows of every
// command under root.
func escapeAngles(root *cobra.Command) {
	esc := strings.NewReplacer("<", `\<`)
	seen := map[*pflag.Flag]bool{} // a parent's persistent flags are in its children's sets too
	_ = walk(root, func(c *cobra.Command) error {
		c.Short, c.Long, c.Example = esc.Replace(c.Short), esc.Replace(c.Long), esc.Replace(c.Example)
		for _, set := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			set.VisitAll(func(f *pflag.Flag) {
				if !seen[f] {
					seen[f] = true
					f.Usage, f.DefValue = esc.Replace(f.Usage), esc.Replace(f.DefValue)
				}
			})
		}
		return nil
	})
}

// walk calls fn for c and every available command under it, depth first,
// as cobra's tree generators do.
func walk(c *cobra.Command, fn func(*cobra.Command) error) error {
	if err := fn(c); err != nil {
		return err
	}
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := walk(sub, fn); err != nil {
			return err
		}
	}
	return nil
}

// undate removes the date from a man page's title line: a generated page
// must not change with the day it was generated on, and the release that
// ships it has its own date.
func undate(man []byte, date time.Time) []byte {
	th := regexp.MustCompile(`(?m)^(\.TH .*)"` + regexp.QuoteMeta(date.Format("Jan 2006")) + `"`)
	return th.ReplaceAll(man, []byte(`$1""`))
}
