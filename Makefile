# Tandem's build. `make help` lists the targets.
#
# The sampler embeds go.opentelemetry.io/ebpf-profiler unmodified. Its rlimit
# package insists on raising RLIMIT_MEMLOCK, which needs CAP_SYS_RESOURCE; we
# replace that one file at compile time (see _overlay/rlimit.go.txt), and we
# leave out of the build the upstream OTLP exporter files that share a
# package with the tracer's reporter interfaces (they would link gRPC, TLS
# and pdata into the root process). _overlay/manifest.txt lists both, with
# the upstream files' hashes (checked by sampler/overlay_test.go). `go
# build -overlay` refuses to replace files in the module cache, so every build
# and test runs in vendor mode against a `go mod vendor` tree that is a build
# artifact (git-ignored, never committed).

SHELL        := /bin/bash
GO           ?= go
# The version every artefact carries: the file VERSION, with -dev+<commit>
# between releases (tools/release/version.sh says how).
VERSION      ?= $(shell tools/release/version.sh)
BUILD_DIR    := $(CURDIR)/.build
OVERLAY      := $(BUILD_DIR)/overlay.json
GOBIN_DIR    := $(shell $(GO) env GOPATH)/bin
CAPNP_STD    := $(shell $(GO) env GOMODCACHE)/capnproto.org/go/capnp/v3@v3.1.0-alpha.2/std
# The build flags, written here only: builds, tests, the image's static
# binaries (deploy/container/build-static.sh) and the whole-system tests'
# binaries (test/harness) take them from `make build-env`, so they share
# the build cache; nothing here needs cgo. test/repo fails when they are
# typed again elsewhere.
LDFLAGS      := -X github.com/tandem-profiler/tandem/internal/buildinfo.Version=$(VERSION)
# grpcnotrace leaves gRPC's x/net/trace out: its html/template (like any
# reachable text/template execution) makes the linker keep every exported
# method of every type (docs/benchmarks/footprint.md).
export GOFLAGS := -mod=vendor -trimpath -overlay=$(OVERLAY) -tags=grpcnotrace
# The image's binaries (build-static.sh, test/harness's Image builds) also
# leave out the symbol table and DWARF and the VCS stamp (a clone stamps
# one, a git worktree none; the version and the commit are stamped and
# labelled explicitly), and its encoder the view (noview: pprof's web UI is
# for a workstation, and its html/template would turn off the linker's
# dead-code elimination of methods; docs/benchmarks/footprint.md).
IMAGE_LDFLAGS := -s -w
IMAGE_GOFLAGS := -buildvcs=false
IMAGE_ENCODER_TAGS := grpcnotrace,noview
export CGO_ENABLED := 0
export PATH    := $(GOBIN_DIR):$(PATH)
# How long each fuzz target runs inside `make test`.
FUZZTIME     ?= 5s

.PHONY: help build test vet unit fuzz fuzz-all fuzz-dirs bench run generate check-generated tools vm-tools cluster-tools test-kernel test-kernels clean prepare manifests image reference release cluster-up cluster-down

help: ## list targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

vendor/modules.txt: go.mod go.sum
	GOFLAGS= $(GO) mod vendor

# replace lines map a vendored file to its _overlay/ replacement, exclude
# lines to "" (go build then acts as if the file did not exist).
$(OVERLAY): _overlay/manifest.txt $(wildcard _overlay/*.go.txt) vendor/modules.txt
	@mkdir -p $(BUILD_DIR)
	@awk -v root="$(CURDIR)" 'BEGIN { printf "{\"Replace\":{" } \
		$$1 == "replace" || $$1 == "exclude" { \
			printf "%s\"%s/vendor/%s\":\"%s\"", (n++ ? "," : ""), root, $$3, ($$1 == "replace" ? root "/_overlay/" $$4 : "") } \
		END { print "}}" }' _overlay/manifest.txt > $@.tmp && mv $@.tmp $@

prepare: $(OVERLAY)

.PHONY: build-env
build-env: ## print the build flags, one KEY='value' a line (a shell can eval them; test/harness reads them)
	@printf "%s='%s'\n" GOFLAGS '$(GOFLAGS)' CGO_ENABLED '$(CGO_ENABLED)' LDFLAGS '$(LDFLAGS)' \
	  IMAGE_LDFLAGS '$(IMAGE_LDFLAGS)' IMAGE_GOFLAGS '$(IMAGE_GOFLAGS)' IMAGE_ENCODER_TAGS '$(IMAGE_ENCODER_TAGS)'

build: prepare ## build bin/tandem-sampler and bin/tandem-encoder
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/tandem-sampler ./cmd/sampler
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/tandem-encoder ./cmd/encoder

tools: vm-tools cluster-tools ## install what tests and code generation need (apt packages, go tools, the Kubernetes build)
	@command -v capnp >/dev/null || { apt-get update -qq && apt-get install -y -qq capnproto >/dev/null; }
	@command -v protoc >/dev/null || { apt-get update -qq && apt-get install -y -qq protobuf-compiler >/dev/null; }
	@command -v capnpc-go >/dev/null || GOFLAGS= $(GO) install capnproto.org/go/capnp/v3/capnpc-go@v3.1.0-alpha.2
	@command -v protoc-gen-go >/dev/null || GOFLAGS= $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
	@command -v protoc-gen-go-grpc >/dev/null || GOFLAGS= $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0
	@command -v staticcheck >/dev/null || GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	@command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3 >/dev/null; }
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }
	@command -v gcc >/dev/null || { apt-get update -qq && apt-get install -y -qq gcc >/dev/null; }
	@command -v objdump >/dev/null || { apt-get update -qq && apt-get install -y -qq binutils >/dev/null; }
	@command -v lintian >/dev/null || { apt-get update -qq && apt-get install -y -qq lintian >/dev/null; }
	@# libc's separate debug file (/usr/lib/debug/.build-id), for the symbolizer's debug file tests
	@dpkg -s libc6-dbg >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq libc6-dbg >/dev/null; }

# The cluster test (test/cluster) and make cluster-up: Debian's etcd,
# containerd, runc, CNI plugins and nft, gcc for the pause binary, and
# Kubernetes (tools/kubernetes/version.txt) built from the Go module proxy
# into /var/cache/tandem/kubernetes/<version>: about 20 minutes and 5 GB
# of Go build cache the first time, nothing once cached.
CLUSTER_DEBS := etcd-server containerd runc containernetworking-plugins nftables gcc libc6-dev

cluster-tools: prepare
	@missing=$$(for p in $(CLUSTER_DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; done); \
	  [ -z "$$missing" ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; }
	@$(GO) run ./tools/kubernetes/kubebuild >/dev/null

# The kernel test (test/vm) boots Debian 12's kernels (amd64 and arm64) in
# qemu with a static busybox in its initramfs. Nothing is installed into
# the host's /boot: test/vm/kernelcache downloads each kernel of the
# matrix (test/vm/matrix.go) with apt-get download and unpacks it with
# dpkg -x into /var/cache/tandem/kernels, keyed by package version (a new
# Debian kernel replaces the cached one). The arm64 packages need arm64
# added to dpkg for a moment (only when one is missing from the cache).
VM_TOOLS     := qemu-system-x86_64:qemu-system-x86 qemu-system-aarch64:qemu-system-arm \
	aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu depmod:kmod xz:xz-utils
vm-tools: prepare
	@missing=$$(for t in $(VM_TOOLS); do command -v $${t%%:*} >/dev/null || echo $${t#*:}; done; \
	  [ -e /usr/aarch64-linux-gnu/lib/libc.a ] || echo libc6-dev-arm64-cross); \
	  [ -z "$$missing" ] || { apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; }
	@$(GO) run ./test/vm/kernelcache

# Parca's gRPC services, written from docs (schema/parca/<package path>/*.proto),
# generated next to their sources.
PROTO_ROOT   := schema/parca
PROTO_FILES  = $(shell cd $(PROTO_ROOT) 2>/dev/null && find . -name '*.proto' | sort)

generate: tools ## regenerate the Cap'n Proto and protobuf code
	cd schema/internal/wire && capnp compile -I$(CAPNP_STD) -ogo stream.capnp
	@if [ -n "$(PROTO_FILES)" ]; then \
	  echo "protoc $(PROTO_FILES)"; \
	  cd $(PROTO_ROOT) && protoc -I . \
	    --go_out=. --go_opt=paths=source_relative \
	    --go-grpc_out=. --go-grpc_opt=paths=source_relative \
	    $(PROTO_FILES); \
	fi

check-generated: generate ## fail when committed generated code is stale
	@git diff --exit-code -- schema/ && test -z "$$(git status --porcelain --untracked-files=all -- schema/ | grep -E '\.(pb|capnp)\.go$$')" \
	  || { echo "generated code is stale or uncommitted: run 'make generate' and commit" >&2; exit 1; }

vet: prepare ## gofmt, go vet and staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
		if [ -n "$$unformatted" ]; then echo "not gofmt-formatted (run gofmt -w):" $$unformatted >&2; exit 1; fi
	$(GO) vet ./...
	@command -v staticcheck >/dev/null || GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	staticcheck ./...

# The end-to-end tests run alone, after the rest, one package at a time: they
# measure the real sampler's memory and CPU time, and the tracer's own memory
# grows with every new executable it sees, so other packages' builds
# (compilers, linkers, test binaries) running beside them would be measured
# too. The kernel test (a VM under software emulation, both CPUs busy) is
# among them for the same reason, and so is the cluster (a single-node
# Kubernetes with the chart installed from a registry on loopback). Inside
# test/e2e the tests that measure nothing machine-wide run two at a time
# (t.Parallel; test/e2e/doc.go says which run alone).
E2E_PKG      := ./test/e2e ./test/vm ./test/cluster

unit: prepare
	$(GO) test -count=1 -timeout 12m $$($(GO) list ./... | grep -vxF -f <($(GO) list $(E2E_PKG)))
	$(GO) test -count=1 -p 1 -timeout 20m $(filter-out ./test/vm,$(E2E_PKG))
	$(GO) test -count=1 -timeout 30m ./test/vm

test-kernel: prepare vm-tools ## run only the kernel test as make test does (6.1, 6.12, arm64) in qemu
	$(GO) test -count=1 -v -timeout 20m -run '^TestKernels$$' ./test/vm

test-kernels: prepare vm-tools ## run the kernel test on the whole matrix (test/vm/matrix.go)
	TANDEM_VM_KERNELS=all $(GO) test -count=1 -v -timeout 40m -run '^TestKernels$$' ./test/vm

# make test fuzzes the decoders of bytes that cross the privilege boundary or
# come from files (stream, frames, dumps, executables the symbolizer reads) for FUZZTIME each; every other fuzz
# target runs on its seed corpus as a unit test, and `make fuzz-all` fuzzes
# them all (their instrumented builds are slow on a cold cache).
FUZZ_DIRS    ?= schema ipc encoder/symbolize

fuzz: prepare ## fuzz the stream and frame decoders briefly (part of make test)
	@$(MAKE) -s fuzz-dirs FUZZ_SCOPE="$(FUZZ_DIRS)"

fuzz-all: prepare ## fuzz every fuzz target briefly
	@$(MAKE) -s fuzz-dirs FUZZ_SCOPE=.

fuzz-dirs:
	@# Targets are found with grep: `go test -list` would link every test binary.
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' --exclude-dir=vendor --exclude-dir=.build $(FUZZ_SCOPE)); do \
	  pkg=./$$(dirname $${f#./}); \
	  for t in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | cut -d' ' -f2); do \
	    echo "fuzz $$pkg $$t"; \
	    if ! out=$$($(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg 2>&1); then \
	      echo "$$out"; \
	      case "$$out" in *"Failing input written"*|*"failure while testing seed corpus"*) exit 1;; *"context deadline exceeded"*) ;; *) exit 1;; esac; \
	      echo "fuzz $$pkg $$t: go's fuzzer ended on its own deadline (context deadline exceeded, no failing input): once more" >&2; \
	      $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	    else echo "$$out"; fi; \
	  done; \
	done

test: tools check-generated vet unit fuzz ## vet, every test (privileged ones too when root), short fuzzing

# The image: both static binaries (build-static.sh) on no base, named
# <the chart's image.repository>:<version, "+" as "_"> (the chart's default
# image), labelled with the commit and dated with the commit's time, so
# that one commit gives one digest (tools/ociimage's TestImageReproducible).
IMAGE_OUT    ?= bin/tandem-image.oci.tar
RELEASE_DIR  ?= bin/release

image: prepare ## build the container image as an OCI archive, bin/tandem-image.oci.tar (podman/docker load, ctr import)
	@$(GO) run ./tools/release/mkrelease image --out $(IMAGE_OUT)

release: prepare ## write the release to bin/release: image (OCI archive), Helm chart, .deb, .rpm, SHA256SUMS
	@$(GO) run ./tools/release/mkrelease build --out $(RELEASE_DIR)

# A single-node cluster on this machine with the chart installed from
# make image, left running: . .build/cluster/env for KUBECONFIG and the rest.
CLUSTER_DIR  ?= $(BUILD_DIR)/cluster

cluster-up: tools image ## bring a single-node Kubernetes up here with the chart installed (see docs/kubernetes.md)
	$(GO) run ./tools/cluster up --dir $(CLUSTER_DIR) --image $(IMAGE_OUT)
	@echo "cluster up: . $(CLUSTER_DIR)/env, then \$$KUBECTL get pods -A; pprof files in $(CLUSTER_DIR)/profiles"

cluster-down: prepare ## take make cluster-up's cluster down, restoring the host
	$(GO) run ./tools/cluster down --dir $(CLUSTER_DIR)

manifests: prepare ## render deploy/kubernetes/daemonset.yaml from the Helm chart's defaults
	$(GO) test -count=1 -run '^TestDaemonSetIsChartDefaults$$' ./test/repo -update

# The reference pages are generated from the code (tools/reference) and
# checked in; make test fails when one is stale (the TestReference* tests).
reference: prepare ## regenerate docs/reference (flags, output settings, chart values, metrics) and docs/man from the code
	$(GO) test -count=1 -run '^TestReference' ./cmd/sampler ./cmd/encoder ./test/repo -args -update

bench: prepare ## run the benchmarks (numbers go in docs/benchmarks/)
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./...

run: build ## run the sampler (root) and the encoder (system user tandem) on this machine
	./deploy/local/run-pair.sh

clean:
	rm -rf bin .build vendor
