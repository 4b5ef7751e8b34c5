# sbx: see README.md. `make check` is what CI runs (through scripts/test).
GO ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS := ./...

.PHONY: all build docker check fmt vet staticcheck test cross generate verify-generate bench bench-startup bench-proxy clean

all: build

build:
	scripts/build bin/sbx

# The container image (Dockerfile): see its header for the docker run options.
docker: build
	docker build -t sbx .

check: fmt vet staticcheck cross verify-generate test

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# sbx refuses to compile with cgo (cmd/sbx/cgo_guard.go); only the race
# detector's test build and the seccomp generator use it.
vet:
	CGO_ENABLED=0 $(GO) vet $(PKGS)
	CGO_ENABLED=0 $(GO) vet -tags sbxinner ./cmd/sbx-inner

staticcheck:
	CGO_ENABLED=0 $(STATICCHECK) $(PKGS)
	CGO_ENABLED=0 $(STATICCHECK) -tags sbxinner ./cmd/sbx-inner

# Every package must build for macOS too.
cross:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet $(PKGS)
	GOOS=darwin GOARCH=amd64 CGO_ENABLED=0 $(GO) build $(PKGS)
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build $(PKGS)

# The unit tests and the integration tests on real sandboxes, with -race.
test:
	CGO_ENABLED=1 $(GO) test -race -count=1 $(PKGS)

# Rebuild the seccomp BPF programs from linux/seccomp/rules.go (needs cgo and
# libseccomp-dev).
generate:
	cd linux/seccomp && CGO_ENABLED=1 $(GO) run -tags seccompgen ./gen .

# Check that the committed BPF programs match the rules.
verify-generate:
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	(cd linux/seccomp && CGO_ENABLED=1 $(GO) run -tags seccompgen ./gen $$tmp) && \
	for a in amd64 arm64 amd64_unix arm64_unix; do cmp linux/seccomp/bpf_$$a.bin $$tmp/bpf_$$a.bin || \
	  { echo "linux/seccomp/bpf_$$a.bin is stale: run make generate"; exit 1; }; done

# Start-up, proxy and gate benchmarks in one go: bench/report.md + SVG.
bench:
	scripts/bench-report

bench-startup:
	scripts/bench-startup

bench-proxy:
	scripts/bench-proxy

clean:
	rm -rf bin
