// Package ociimage builds Tandem's container image with
// go-containerregistry, with no base image and no registry: one layer
// holding the two static binaries, a CA bundle (the NSS roots Go's
// x509roots/fallback module carries, so the bundle is pinned by go.mod),
// and /etc/passwd and /etc/group naming root and the encoder's uid
// (65532, nonroot). No shell, no package manager. Everything that could
// vary between two builds of one commit (file times, owners, the creation
// time, the order of entries) is fixed, so the same inputs give the same
// digest.
//
// WriteArchive writes the image as one tar that is both an OCI image
// layout (index.json, for podman load and ctr import) and a docker-save
// archive (manifest.json, for docker load).
package ociimage
