#!/usr/bin/env bash
# Builds static tandem-sampler and tandem-encoder into OUT_DIR (default
# ./bin/static), as make image puts them into the image (and as
# tools/ociimage's TestImageReproducible checks): no cgo, vendor mode
# with the memlock overlay (see the Makefile), trimmed paths. The encoder
# has no view (-tags noview: pprof's web UI is for a workstation, and its
# html/template, like gRPC's x/net/trace that grpcnotrace drops, would turn
# off the linker's dead-code elimination of methods: 12 MB of binary, 3.7 MB
# of an idle encoder's resident memory; docs/benchmarks/footprint.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-bin/static}
VERSION=${VERSION:-$(tools/release/version.sh)}
make -s prepare
export CGO_ENABLED=0
# No VCS stamp: a clone stamps one, a git worktree none, and the version
# and the commit are stamped and labelled explicitly.
export GOFLAGS="-mod=vendor -trimpath -buildvcs=false -overlay=$PWD/.build/overlay.json -tags=grpcnotrace"
ldflags="-s -w -X github.com/tandem-profiler/tandem/internal/buildinfo.Version=$VERSION"
mkdir -p "$OUT_DIR"
go build -ldflags "$ldflags" -o "$OUT_DIR/tandem-sampler" ./cmd/sampler
go build -tags=grpcnotrace,noview -ldflags "$ldflags" -o "$OUT_DIR/tandem-encoder" ./cmd/encoder
