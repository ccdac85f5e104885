# The two commands: `make run` serves capacityd with its data services,
# `make test` runs every test against real PostgreSQL and Redis.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go

# The Go modules of the repository: the service (.) and the typed client
# (client/, a module of its own so that its users get none of the service's
# dependencies). test, vet, lint and vulncheck cover each.
MODULES := . client

.PHONY: console-docs door-docs run test test-tools test-ha services services-down npm-tools build vet lint docs bench bench-quick bench-bin fuzz-smoke vulncheck chaos

run: services build
	@source .data/env && scripts/run.sh

# The widget tests drive a headless chromium, the scale-out tests
# Debian's pgbouncer and haproxy, and the failover tests a pg_auto_failover
# formation (pg_autoctl): installed here when missing (as root; otherwise
# the tests fail saying how to install them).
TEST_TOOLS := chromium:chromium pgbouncer:pgbouncer haproxy:haproxy socat:socat curl:curl \
	pg_autoctl:postgresql-15-auto-failover

test: services npm-tools test-tools
	@source .data/env && for m in $(MODULES); do (cd $$m && $(GO) test -race -count=1 -timeout 25m ./...) || exit 1; done
	@$(MAKE) --no-print-directory fuzz-smoke

# The highly available authority's longer tests (docs/testing.md): every
# failover, switchover and replication test of internal/test/hatest and
# internal/test/testenv, on private pg_auto_failover formations; make test runs
# only one failover.
test-ha: services
	@scripts/services.sh tools $(TEST_TOOLS)
	@source .data/env && TEST_HA=1 $(GO) test -race -count=1 -timeout 30m -v -run 'AutoFailover|HA' ./internal/test/testenv/ ./internal/test/hatest/

services:
	@scripts/services.sh up

# The Debian packages the tests drive (installed when missing, as root).
test-tools:
	@scripts/services.sh tools $(TEST_TOOLS)

services-down:
	@scripts/services.sh down

# The npm tools, pinned by tools/npm/package-lock.json: Redocly CLI (make
# lint) and Prism, the validating proxy of the API description test
# (internal/test/apicheck). Installed into tools/npm/node_modules when missing or
# when the lockfile changed; with Debian's nodejs and npm when npm is
# missing (as root).
NPM_BIN := tools/npm/node_modules/.bin

npm-tools:
	@scripts/npm-tools.sh

build:
	$(GO) build -o bin/capacityd ./cmd/capacityd

vet:
	@for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

# Generated docs: docs/api.md from api/openapi.yaml, docs/configuration.md
# from the settings table in cmd/capacityd/config.go. Tests fail while
# either differs from what it is generated from.
docs:
	$(GO) generate ./api
	$(GO) run ./cmd/capacityd config-doc > docs/configuration.md.tmp && mv docs/configuration.md.tmp docs/configuration.md

# The pictures of docs/console.md: every console page in English and
# Traditional Chinese, taken in a headless chromium (needs Chinese fonts:
# fonts-noto-cjk, installed here when missing and root).
console-docs: services
	@scripts/services.sh tools chromium:chromium fc-list:fontconfig
	@fc-list :lang=zh-tw | grep -q . || { [ "$$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk >/dev/null; } || true
	@source .data/env && UPDATE_DOCS=1 $(GO) test -count=1 -run '^TestConsoleDocsPictures$$' ./console/

# The pictures of docs/door.md: each state of the door page in English and
# Traditional Chinese, at a phone's size, taken in a headless chromium
# (needs Chinese fonts: fonts-noto-cjk, installed here when missing and root).
door-docs: services
	@scripts/services.sh tools chromium:chromium fc-list:fontconfig
	@fc-list :lang=zh-tw | grep -q . || { [ "$$(id -u)" = 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk >/dev/null; } || true
	@source .data/env && UPDATE_DOCS=1 $(GO) test -count=1 -run '^TestDoorDocsPictures$$' ./console/

# Proof of exactness (internal/test/chaos): `make chaos` runs two long checked
# histories of two real instances under every fault class and prints their
# summaries (operations, faults by class, verdicts): one on a
# pg_auto_failover formation (pg_autoctl, installed when missing and root)
# behind HAProxy, one on a single server behind PgBouncer and HAProxy, each
# of CHAOS_DURATION; make test runs short ones. A failure writes the history
# and visualizations to artifacts/.
CHAOS_DURATION ?= 10m

chaos: services
	@scripts/services.sh tools pg_autoctl:postgresql-15-auto-failover pgbouncer:pgbouncer haproxy:haproxy
	@source .data/env && CHAOS_DURATION=$(CHAOS_DURATION) $(GO) test -count=1 -timeout 0 -run '^TestChaos(BehindProxies)?$$' -v ./internal/test/chaos/

# Static checks, run by CI: gofmt, go vet, staticcheck, Redocly's
# recommended rules on api/openapi.yaml (configured by redocly.yaml: no
# error may remain), and promtool (from Debian's prometheus package,
# installed when missing and root) on the alert rules under deploy/.
STATICCHECK_VERSION ?= v0.8.2

lint: npm-tools
	@unformatted=$$(for m in $(MODULES); do (cd $$m && gofmt -l $$($(GO) list -f '{{.Dir}}' ./...)); done); \
	  if [ -n "$$unformatted" ]; then echo "gofmt: run gofmt -w on:"; echo "$$unformatted"; exit 1; fi
	@for m in $(MODULES); do echo "vet, staticcheck: module $$m"; \
	  (cd $$m && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...) || exit 1; done
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true $(NPM_BIN)/redocly lint api/openapi.yaml
	@scripts/services.sh tools promtool:prometheus
	promtool check rules deploy/prometheus/alerts.yml

# Benchmarks (loadtest/): `make bench` (≤ 10 min) seeds capacityd_bench at
# full scale, measures, and rewrites docs/bench/ (BENCHMARKS.md, the
# PNG charts and the JSON report);
# `make bench-quick` (≤ 3 min, smaller seed, short runs, smaller waiting-list
# crowd, course, group and pool rushes) prints every target met or not and
# writes only the JSON, to $(BENCH_JSON). Neither fails on unmet targets,
# only on errors.
# BENCH_DATABASE_URL and BENCH_REDIS_URL choose another bench database and
# Redis (the database name must contain "bench").
BENCH_JSON ?= .data/bench-quick.json
BENCH_BIN := .data/bench

bench-bin:
	@$(GO) build -o $(BENCH_BIN)/capacityd ./cmd/capacityd && $(GO) build -o $(BENCH_BIN)/loadtest ./cmd/loadtest

bench: services bench-bin
	@source .data/env && $(BENCH_BIN)/loadtest seed && \
	  BENCH_COMMAND="make bench" $(BENCH_BIN)/loadtest run -capacityd $(BENCH_BIN)/capacityd \
	    -json docs/bench/bench.json -markdown docs/bench/BENCHMARKS.md -charts docs/bench

bench-quick: services bench-bin
	@source .data/env && $(BENCH_BIN)/loadtest seed -quick && \
	  $(BENCH_BIN)/loadtest run -quick -capacityd $(BENCH_BIN)/capacityd -json $(BENCH_JSON)

# Fuzzing: `make fuzz-smoke` runs every fuzz target for a number of
# executions, about 4 s of them on a 2-vCPU machine (make test runs it after
# the unit tests); no input may produce a 5xx or a panic. The budgets are
# counts, not durations: a duration-based -fuzztime can end with a spurious
# "context deadline exceeded" (golang/go#75804, unfixed in Go 1.26).
# FUZZTIME=<duration or Nx> overrides every target's budget. Longer runs:
# see docs/testing.md ("Fuzzing").
FUZZTIME ?=
FUZZ_TARGETS := httpapi:FuzzActivityBody:4000x httpapi:FuzzSignupRequest:2000x httpapi:FuzzStatusChange:2500x \
	httpapi:FuzzPathAndQuery:3500x httpapi:FuzzListQuery:4500x httpapi:FuzzNoteID:1500x \
	httpapi:FuzzAuthorizationHeader:3500x httpapi:FuzzVerifyToken:9000x httpapi:FuzzClaimsRules:10000x \
	registration:FuzzDecodeCursor:6000x

fuzz-smoke: services
	@source .data/env && for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; fn=$${rest%%:*}; budget=$${rest#*:}; [ -z "$(FUZZTIME)" ] || budget="$(FUZZTIME)"; \
	  echo "fuzz ./$$pkg $$fn for $$budget"; \
	  $(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$$budget -parallel=2 ./$$pkg/ || \
	  { echo "retrying $$fn once (a duration-based budget can end with a spurious 'context deadline exceeded'; a real crasher is saved under testdata/fuzz and fails again)"; \
	    $(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$$budget -parallel=2 ./$$pkg/; } || exit 1; \
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
	  for m in $(MODULES); do echo "govulncheck: module $$m"; \
	    (cd $$m && $(GO) run golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION) -db "file://$(CURDIR)/.data/vulndb" ./...) || exit 1; done
