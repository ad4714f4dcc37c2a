#!/usr/bin/env bash
# Builds static tandem-sampler and tandem-encoder into OUT_DIR (default
# ./bin/static), as make image puts them into the image (and as
# tools/ociimage's TestImageReproducible checks): no cgo, vendor mode
# with the memlock overlay (see the Makefile), trimmed paths.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-bin/static}
VERSION=${VERSION:-$(tools/release/version.sh)}
make -s prepare
export CGO_ENABLED=0
export GOFLAGS="-mod=vendor -trimpath -overlay=$PWD/.build/overlay.json"
ldflags="-s -w -X github.com/tandem-profiler/tandem/internal/buildinfo.Version=$VERSION"
mkdir -p "$OUT_DIR"
go build -ldflags "$ldflags" -o "$OUT_DIR/tandem-sampler" ./cmd/sampler
go build -ldflags "$ldflags" -o "$OUT_DIR/tandem-encoder" ./cmd/encoder
