# The two commands: `make run` serves capacityd with its data services,
# `make test` runs every test against real PostgreSQL and Redis.
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go

.PHONY: run test services services-down build vet

run: services build
	@source .data/env && scripts/run.sh

test: services
	@source .data/env && $(GO) test -race -count=1 ./...

services:
	@scripts/services.sh up

services-down:
	@scripts/services.sh down

build:
	$(GO) build -o bin/capacityd ./cmd/capacityd

vet:
	$(GO) vet ./...
