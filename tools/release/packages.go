package release

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// PackageName is the name of the .deb and .rpm.
const PackageName = "tandem"

// Identity names who answers for a release.
type Identity struct {
	// Name is a person's or a group's name.
	Name string
	// Email is where to write (Debian's Maintainer field needs one).
	Email string
	// URL is where the project is (its issues, its sources).
	URL string
}

// Contact is the identity as "Name <email>", Debian's Maintainer field and
// RPM's Packager.
func (i Identity) Contact() string { return i.Name + " <" + i.Email + ">" }

// Maintainer is who answers for Tandem's release, written here alone: the
// packages' Maintainer (deb), Packager and Vendor (rpm) and the Debian
// changelog's signature, the image's authors and vendor labels, and the
// chart's maintainers entry (Chart.yaml, a file Helm reads, must repeat
// it: TestMaintainerInOnePlace).
var Maintainer = Identity{Name: "Tandem developers", Email: "tandem-profiler@users.noreply.github.com", URL: SourceURL}

// Packagers are the package formats written per platform, nfpm's names.
var Packagers = []string{"deb", "rpm"}

// Where the packages put things. The units in deploy/systemd run the
// binaries from /usr/local/bin (a hand install); the packages' copies
// name BinDir instead.
const (
	BinDir         = "/usr/bin"
	unitSourcePath = "/usr/local/bin/"
)

// unitDir is where a packager's units go: Debian 12 keeps them in
// /lib/systemd/system (its lintian flags /usr/lib), RPM distributions in
// /usr/lib/systemd/system.
var unitDir = map[string]string{"deb": "/lib/systemd/system", "rpm": "/usr/lib/systemd/system"}

// Units are the systemd units the packages install, from deploy/systemd.
var Units = []string{"tandem-encoder.socket", "tandem-encoder.service", "tandem-sampler.service"}

const description = `continuous eBPF profiler split by privilege
Tandem samples every process on the host with eBPF and exports profiles
as OTLP/profiles or Parca's Arrow records, or writes pprof files. A root
sampler holding only the capabilities the tracer needs and no network
streams to an unprivileged encoder that owns every export.
.
The package installs both binaries, their systemd units (not enabled),
the encoder's system user (systemd-sysusers) and settings files in
/etc/default.`

// WritePackages writes one package per entry of Packagers for b's platform
// into dir and returns their paths. stage is a scratch directory.
func WritePackages(src Source, b Binaries, dir, stage string) ([]string, error) {
	staged, err := stageFiles(src, stage)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, format := range Packagers {
		info := packageInfo(src, b, staged, format)
		pkgr, err := nfpm.Get(format)
		if err != nil {
			return nil, fmt.Errorf("packager %s: %w", format, err)
		}
		info = nfpm.WithDefaults(info)
		if err := nfpm.Validate(info); err != nil {
			return nil, fmt.Errorf("%s package: %w", format, err)
		}
		var buf bytes.Buffer
		if err := pkgr.Package(info, &buf); err != nil {
			return nil, fmt.Errorf("write the %s %s package: %w", b.Platform, format, err)
		}
		path := filepath.Join(dir, pkgr.ConventionalFileName(info))
		if err := writeFile(path, buf.Bytes()); err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	return out, nil
}

// staged are files written for the packages (paths in the stage).
type staged struct {
	units     map[string]string // unit name -> rewritten copy
	man       map[string]string // page name (tandem-encoder.1) -> gzipped copy
	copyright string
	changelog string
	scripts   map[string]string // deploy/package's files by name
}

func stageFiles(src Source, stage string) (*staged, error) {
	s := &staged{units: map[string]string{}, man: map[string]string{}, scripts: map[string]string{}}
	write := func(name string, data []byte, mode os.FileMode) (string, error) {
		p := filepath.Join(stage, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			return "", fmt.Errorf("stage %s: %w", name, err)
		}
		return p, nil
	}
	for _, u := range Units {
		data, err := os.ReadFile(filepath.Join(src.Root, "deploy/systemd", u))
		if err != nil {
			return nil, fmt.Errorf("read unit: %w", err)
		}
		if s.units[u], err = write("units/"+u, bytes.ReplaceAll(data, []byte(unitSourcePath), []byte(BinDir+"/")), 0o644); err != nil {
			return nil, err
		}
	}
	pages, err := ManPages(src)
	if err != nil {
		return nil, err
	}
	for name, page := range pages {
		if s.man[name], err = write("man/"+name+".gz", gzipped(page), 0o644); err != nil {
			return nil, err
		}
	}
	if s.copyright, err = write("copyright", []byte(debianCopyright(src)), 0o644); err != nil {
		return nil, err
	}
	if s.changelog, err = write("changelog.gz", gzipped([]byte(debianChangelog(src))), 0o644); err != nil {
		return nil, err
	}
	for _, name := range []string{"postinst", "prerm", "rpm-preun", "postrm", "lintian-overrides"} {
		data, err := os.ReadFile(filepath.Join(src.Root, "deploy/package", name))
		if err != nil {
			return nil, fmt.Errorf("read maintainer script: %w", err)
		}
		mode := os.FileMode(0o755)
		if name == "lintian-overrides" {
			mode = 0o644
		}
		if s.scripts[name], err = write("scripts/"+name, data, mode); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func packageInfo(src Source, b Binaries, s *staged, format string) *nfpm.Info {
	mtime := src.Created
	file := func(source, dest string, mode os.FileMode, typ string) *files.Content {
		return &files.Content{Source: source, Destination: dest, Type: typ, Packager: format,
			FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: mtime}}
	}
	contents := files.Contents{
		file(b.Sampler, BinDir+"/tandem-sampler", 0o755, ""),
		file(b.Encoder, BinDir+"/tandem-encoder", 0o755, ""),
		file(filepath.Join(src.Root, "deploy/systemd/tandem.sysusers"), "/usr/lib/sysusers.d/tandem.conf", 0o644, ""),
		file(filepath.Join(src.Root, "deploy/systemd/tandem-sampler.default"), "/etc/default/tandem-sampler", 0o644, files.TypeConfigNoReplace),
		file(filepath.Join(src.Root, "deploy/systemd/tandem-encoder.default"), "/etc/default/tandem-encoder", 0o644, files.TypeConfigNoReplace),
		file(filepath.Join(src.Root, "deploy/systemd/tandem-sampler-obi.conf"), "/usr/share/doc/tandem/examples/tandem-sampler-obi.conf", 0o644, ""),
	}
	for _, u := range Units {
		contents = append(contents, file(s.units[u], unitDir[format]+"/"+u, 0o644, ""))
	}
	names := make([]string, 0, len(s.man))
	for n := range s.man {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		contents = append(contents, file(s.man[n], "/usr/share/man/man1/"+n+".gz", 0o644, ""))
	}
	preRemove := s.scripts["prerm"]
	switch format {
	case "deb":
		contents = append(contents,
			file(s.copyright, "/usr/share/doc/tandem/copyright", 0o644, ""),
			file(s.changelog, "/usr/share/doc/tandem/changelog.gz", 0o644, ""),
			file(s.scripts["lintian-overrides"], "/usr/share/lintian/overrides/tandem", 0o644, ""))
	case "rpm":
		contents = append(contents, file(filepath.Join(src.Root, "LICENSE"), "/usr/share/licenses/tandem/LICENSE", 0o644, files.TypeRPMLicense))
		preRemove = s.scripts["rpm-preun"]
	}
	info := &nfpm.Info{
		Name:        PackageName,
		Arch:        b.Platform.Arch,
		Platform:    b.Platform.OS,
		Version:     src.Version,
		Section:     "utils",
		Priority:    "optional",
		Maintainer:  Maintainer.Contact(),
		Description: description,
		Vendor:      Maintainer.Name,
		Homepage:    SourceURL,
		License:     License,
		MTime:       mtime,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Umask:    0o022,
			Scripts: nfpm.Scripts{
				PostInstall: s.scripts["postinst"],
				PreRemove:   preRemove,
				PostRemove:  s.scripts["postrm"],
			},
			Deb: nfpm.Deb{Compression: "gzip"},
			RPM: nfpm.RPM{Compression: "gzip", BuildHost: "tandem-release", Group: "Development/Tools", Summary: strings.SplitN(description, "\n", 2)[0]},
		},
	}
	return info
}

// gzipped compresses data with no name and no time in the header, as
// Debian wants man pages and changelogs (gzip -9n).
func gzipped(data []byte) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zw.Header.OS = 3 // Unix, as gzip(1) writes
	_, _ = zw.Write(data)
	_ = zw.Close()
	return b.Bytes()
}

// debianCopyright is the .deb's copyright file (Debian's machine-readable
// format); the year is the commit's.
func debianCopyright(src Source) string {
	return `Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: tandem
Source: ` + SourceURL + `

Files: *
Copyright: ` + src.Created.UTC().Format("2006") + ` The Tandem authors
License: Apache-2.0

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License"); you may
 not use this file except in compliance with the License.
 .
 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
 WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
 License for the specific language governing permissions and limitations
 under the License.
 .
 On Debian systems, the full text of the Apache License, Version 2.0 can be
 found in /usr/share/common-licenses/Apache-2.0.
`
}

// debianChangelog is the native package's changelog: one entry, this
// build.
func debianChangelog(src Source) string {
	return fmt.Sprintf("%s (%s) unstable; urgency=medium\n\n  * Tandem %s.\n  * Built from commit %s.\n\n -- %s  %s\n",
		PackageName, DebVersion(src.Version), src.Version, src.Revision, Maintainer.Contact(), src.Created.UTC().Format(time.RFC1123Z))
}

// DebVersion is a version as a Debian version: SemVer's pre-release after
// "~", so that 0.1.0-dev+abc sorts before 0.1.0 (nfpm's rule).
func DebVersion(version string) string {
	v, meta, _ := strings.Cut(version, "+")
	v = strings.Replace(v, "-", "~", 1)
	if meta != "" {
		v += "+" + meta
	}
	return v
}
