#!/usr/bin/env bash
# Builds static tandem-sampler and tandem-encoder into OUT_DIR (default
# ./bin/static), as make image puts them into the image (and as
# tools/ociimage's TestImageReproducible checks), with the Makefile's build
# flags and the image's (make build-env: no cgo, vendor mode with the
# memlock overlay, trimmed paths, the version; no symbol table, DWARF or
# VCS stamp; an encoder without view).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-bin/static}
VERSION=${VERSION:-$(tools/release/version.sh)}
make -s prepare
eval "$(make -s --no-print-directory build-env VERSION="$VERSION")"
export GOFLAGS="$GOFLAGS $IMAGE_GOFLAGS" CGO_ENABLED
mkdir -p "$OUT_DIR"
go build -ldflags "$IMAGE_LDFLAGS $LDFLAGS" -o "$OUT_DIR/tandem-sampler" ./cmd/sampler
go build -tags="$IMAGE_ENCODER_TAGS" -ldflags "$IMAGE_LDFLAGS $LDFLAGS" -o "$OUT_DIR/tandem-encoder" ./cmd/encoder
