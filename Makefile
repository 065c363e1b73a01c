# buddy — the two commands are `make run` and `make test` (README).
#
#   make run       build buddy and serve it on its embedded defaults (prints the page address)
#   make test      everything the project checks (what CI runs)
#   make build     bin/buddy
#   make builtins  rebuild builtins-wasm/ from builtins-src/ with TinyGo
#   make fixtures  rebuild runtime/testdata/*.wasm from their .wat
#   make bench     benchmarks with real counts (results: docs/BENCHMARKS.md)
#   make load      buddy serve under LOAD_SESSIONS WebSocket sessions on loopback (docs/BENCHMARKS.md)
#   make e2e-llm   the agent loop against a real llama-server, both APIs (README; outside make test)
#   make fuzz      every fuzz target for FUZZTIME each, FUZZJOBS at a time (docs/BENCHMARKS.md, "Fuzzing")
#   make check     gofmt, go mod tidy, generated files; then git diff --exit-code
#   make lint      gofmt, and go vet for Linux, Windows and macOS
#   make tools     install the pinned toolchains the tests need (and chromium for the page tests)

SHELL := /bin/bash
GO ?= go
BIN := bin/buddy
FUZZTIME ?= 60s
FUZZJOBS ?= 1
BENCHTIME ?= 2s
BENCHCOUNT ?= 6
LOAD_SESSIONS ?= 1000
LOAD_RATE ?= 100
# Nested modules: ./... in the root skips them.
GUEST_MODULES := skillkit builtins-src

.PHONY: run build test test-go test-guests tools builtins builtins-check fixtures fixtures-check \
	templates-check bench bench-once load e2e-llm fuzz check lint clean

run: build
	./$(BIN) serve

build:
	$(GO) build -trimpath -o $(BIN) ./cmd/buddy

# The toolchains the tests build guests with, pinned and installed by the
# project's own scripts (idempotent: a fraction of a second once installed).
tools:
	@scripts/install-tinygo.sh
	@scripts/install-guest-tools.sh wat c >/dev/null
	@scripts/install-rust-wasm.sh >/dev/null
	@scripts/install-chromium.sh

test: tools builtins-check fixtures-check templates-check lint test-go test-guests bench-once
	@echo "make test: all checks passed"

test-go:
	$(GO) test -race -timeout 20m ./...
	# The hostile modules 1,000 times each, concurrently (100 under -race above).
	$(GO) test -count=1 -run '^TestHostileModulesInALoop$$' -timeout 10m ./runtime/

# skillkit and the built-in sources: host-side unit tests and a wasm vet.
test-guests:
	cd skillkit && $(GO) test -race ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...
	cd builtins-src && $(GO) test -race ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet ./...

# Every benchmark for a few iterations, so none can rot, and the runtime's
# package (whose benchmarks reuse runtimes and instances) for 100, so one
# that breaks on its hundredth iteration fails here; real numbers come from
# `make bench`.
bench-once:
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 15m ./...
	$(GO) test -run '^$$' -bench . -skip '^BenchmarkLoad' -benchtime 100x -timeout 15m ./runtime/

# buddy serve under load: LOAD_SESSIONS concurrent WebSocket sessions on
# loopback, each invoking write_file under approval "always" and approving it
# (cmd/buddy/e2e_load_test.go; `make test` runs it with 50 sessions).
# write_file writes into /dev/shm when it is a tmpfs; BUDDY_LOAD_FILES=DIR
# puts the files under DIR instead. The database stays on a disk: the test's
# temporary directory, or the user's cache directory when that is in memory
# (/tmp on Debian 13); BUDDY_LOAD_DB=DIR puts it under DIR instead.
# BUDDY_LOAD_DUMP=FILE writes every call's figures to FILE (for
# scripts/load-syncs.py; docs/BENCHMARKS.md, "What sets the burst's tail").
load:
	BUDDY_LOAD_SESSIONS=$(LOAD_SESSIONS) BUDDY_LOAD_RATE=$(LOAD_RATE) \
		$(GO) test -count=1 -run '^TestLoad$$' -v -timeout 10m ./cmd/buddy/

# The agent loop against a real LLM server: llama.cpp's llama-server (Debian
# sid's build, cached in ~/.cache/buddy/llama-sid) with a tiny generated model,
# over /v1/chat/completions and /v1/messages (cmd/buddy/e2e_llm_test.go).
# Skipped, saying why, when llama-server cannot be set up. Against a real
# server instead: BUDDY_E2E_BASE_URL=... BUDDY_E2E_MODEL=... [BUDDY_E2E_KIND=
# anthropic] [BUDDY_E2E_API_KEY_ENV=ANTHROPIC_API_KEY] make e2e-llm
e2e-llm:
	BUDDY_E2E_LLM=1 $(GO) test -count=1 -run '^TestE2ELLM$$' -v -timeout 20m ./cmd/buddy/

builtins:
	scripts/build-builtins.sh

builtins-check:
	scripts/build-builtins.sh --check

fixtures:
	scripts/build-fixtures.sh

fixtures-check:
	scripts/build-fixtures.sh --check

templates-check:
	scripts/sync-templates.sh --check

bench: tools
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) -timeout 60m ./... | tee bench.out
	@echo "compare runs with: go run golang.org/x/perf/cmd/benchstat@v0.0.0-20251208221838-04cf7a2dca90 bench.out"

fuzz:
	FUZZTIME=$(FUZZTIME) FUZZJOBS=$(FUZZJOBS) scripts/fuzz.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v /testdata/)); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	# The other systems buddy builds for (its *_other.go files): every
	# package and its tests must at least compile and vet there.
	GOOS=windows $(GO) vet ./...
	GOOS=darwin $(GO) vet ./...

check: lint
	$(GO) mod tidy
	cd skillkit && $(GO) mod tidy
	cd builtins-src && $(GO) mod tidy
	scripts/build-builtins.sh
	scripts/build-fixtures.sh
	scripts/sync-templates.sh
	git diff --exit-code

clean:
	rm -rf bin bench.out
