// Package release builds Tandem's release: every artefact a user installs,
// written to one directory, all carrying one version (Describe: the file
// VERSION, through version.sh), so that one commit gives the same bytes on
// any machine.
//
// Build writes the container image as an OCI archive (one image per entry
// of Platforms), the Helm chart packaged with Helm's own library, a .deb
// and an .rpm per platform built with nfpm (both binaries, the systemd
// units, the sysusers file, man pages, the default settings files), and a
// SHA256SUMS file over them. Push copies the image and the chart from such
// a directory to a registry (the chart as an OCI artefact, as `helm push`
// does). Nothing here reads the clock: every time in every archive is the
// commit's.
//
// Imported by repository tooling (tools/release/mkrelease, which make
// release and make image run) and tests only.
package release
