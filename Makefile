# The two commands: `make run` serves capacityd with its data services,
# `make test` runs every test against real PostgreSQL and Redis.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go

.PHONY: run test services services-down build vet lint bench bench-quick bench-bin fuzz-smoke vulncheck chaos

run: services build
	@source .data/env && scripts/run.sh

# The widget tests drive a headless chromium, and the scale-out tests
# Debian's pgbouncer and haproxy: installed here when missing (as root;
# otherwise the tests fail saying how to install them).
test: services
	@scripts/services.sh tools chromium:chromium pgbouncer:pgbouncer haproxy:haproxy
	@source .data/env && $(GO) test -race -count=1 ./...
	@$(MAKE) --no-print-directory fuzz-smoke

services:
	@scripts/services.sh up

services-down:
	@scripts/services.sh down

build:
	$(GO) build -o bin/capacityd ./cmd/capacityd

vet:
	$(GO) vet ./...

# Proof of exactness (internal/chaos): `make chaos` runs a long checked
# history of two real instances under every fault class and prints its
# summary (operations, faults by class, verdicts); make test runs a short
# one. A failure writes the history and visualizations to artifacts/.
CHAOS_DURATION ?= 10m

chaos: services
	@source .data/env && CHAOS_DURATION=$(CHAOS_DURATION) $(GO) test -count=1 -timeout 0 -run '^TestChaos$$' -v ./internal/chaos/

# Static checks, run by CI: gofmt, go vet, staticcheck, and promtool (from
# Debian's prometheus package, installed when missing and root) on the
# alert rules under deploy/.
STATICCHECK_VERSION ?= v0.8.2

lint:
	@unformatted=$$(gofmt -l $$($(GO) list -f '{{.Dir}}' ./...)); \
	  if [ -n "$$unformatted" ]; then echo "gofmt: run gofmt -w on:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@scripts/services.sh tools promtool:prometheus
	promtool check rules deploy/prometheus/alerts.yml

# Benchmarks (loadtest/): `make bench` (≤ 10 min) seeds capacityd_bench at
# full scale, measures, and rewrites BENCHMARKS.md and docs/bench/ (PNG
# charts and the JSON report);
# `make bench-quick` (≤ 3 min, smaller seed, short runs, smaller waiting-list
# crowd and course rush) prints every target met or not and writes only the
# JSON, to $(BENCH_JSON). Neither fails on unmet targets, only on errors.
# BENCH_DATABASE_URL and BENCH_REDIS_URL choose another bench database and
# Redis (the database name must contain "bench").
BENCH_JSON ?= .data/bench-quick.json
BENCH_BIN := .data/bench

bench-bin:
	@$(GO) build -o $(BENCH_BIN)/capacityd ./cmd/capacityd && $(GO) build -o $(BENCH_BIN)/loadtest ./cmd/loadtest

bench: services bench-bin
	@source .data/env && $(BENCH_BIN)/loadtest seed && \
	  BENCH_COMMAND="make bench" $(BENCH_BIN)/loadtest run -capacityd $(BENCH_BIN)/capacityd \
	    -json docs/bench/bench.json -markdown BENCHMARKS.md -charts docs/bench

bench-quick: services bench-bin
	@source .data/env && $(BENCH_BIN)/loadtest seed -quick && \
	  $(BENCH_BIN)/loadtest run -quick -capacityd $(BENCH_BIN)/capacityd -json $(BENCH_JSON)

# Fuzzing: `make fuzz-smoke` runs every fuzz target for
# $(FUZZTIME) each (make test runs it after the unit tests); no input may
# produce a 5xx or a panic. Longer runs: see README ("Fuzzing").
FUZZTIME ?= 4s
FUZZ_TARGETS := httpapi:FuzzActivityBody httpapi:FuzzSignupRequest httpapi:FuzzStatusChange \
	httpapi:FuzzPathAndQuery httpapi:FuzzListQuery httpapi:FuzzNoteID httpapi:FuzzAuthorizationHeader \
	httpapi:FuzzVerifyToken registration:FuzzDecodeCursor

fuzz-smoke: services
	@source .data/env && for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz ./$$pkg $$fn for $(FUZZTIME)"; \
	  $(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) -parallel=2 ./$$pkg/ || \
	  { echo "retrying $$fn once (the fuzz engine can report 'context deadline exceeded' as its time runs out; a real crasher is saved under testdata/fuzz and fails again)"; \
	    $(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) -parallel=2 ./$$pkg/; } || exit 1; \
	done

# govulncheck offline: this machine reaches the Go module proxy but
# not vuln.go.dev, so the vulnerability database is built from the OSV files
# of the golang.org/x/vulndb module (fetched through the proxy) with its
# indexdb command, then read with -db file://. Bump VULNDB_VERSION
# (go list -m golang.org/x/vulndb@master) for newer data. CI runs it.
VULNDB_VERSION ?= v0.0.0-20260813214354-9de686e1fb00
GOVULNCHECK_VERSION ?= v1.9.0

vulncheck:
	@dir=$$($(GO) mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p') && \
	  test -d "$$dir/data/osv" && mkdir -p .data && rm -rf .data/vulndb && \
	  $(GO) run golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION) -vulns "$$dir/data/osv" -out .data/vulndb && \
	  $(GO) run golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION) -db "file://$(CURDIR)/.data/vulndb" ./...
