# pingd — see README.md. Every target runs on a fresh Debian/Ubuntu machine.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin/pingd
FUZZTIME  ?= 20s

.PHONY: all build run test test-deps test-pg-check test-short vet fmt-check fuzz clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/pingd

# Starts a private Prosody on loopback (installing it if missing) with the
# component configured and two test accounts, then pingd on SQLite.
run: build
	./scripts/run-local.sh $(BIN)

# Everything: vet, formatting, unit and integration tests with the race
# detector (integration tests start their own Prosody and ejabberd; the
# Debian packages they need are installed first if missing). The store and
# multi-instance tests run on PostgreSQL too: on the server
# PINGD_TEST_POSTGRES names, or else on a private cluster started for the
# run and stopped after it, also when tests fail. PINGD_INTEGRATION=require
# makes a missing server or client program fail its tests instead of
# skipping them, as a plain go test does.
test: test-deps vet fmt-check
	PINGD_INTEGRATION=require ./scripts/with-postgres.sh $(GO) test -race -timeout 15m ./...

# The PostgreSQL plumbing of make test alone: starts the private cluster
# (unless PINGD_TEST_POSTGRES names a server), makes and drops test
# schemas on it, and stops it.
test-pg-check: test-deps
	./scripts/with-postgres.sh sh -c 'test -n "$$PINGD_TEST_POSTGRES" && $(GO) test -count=1 -run "^TestPostgresURL$$" -v ./internal/testenv'

test-deps:
	./scripts/test-deps.sh

# Unit tests only (no Prosody, no PostgreSQL).
test-short:
	$(GO) test -short -race ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Runs every fuzz target for FUZZTIME each.
fuzz:
	./scripts/fuzz.sh $(FUZZTIME)

clean:
	rm -rf bin .run

# The long fault runs of docs/reliability.md (about half an hour): 10,000
# notifications with 10 kill -9, the XMPP server stopped and killed during
# fan-outs, slow and broken receivers, slow-loris clients on the real
# binary. Needs Prosody, as `make test` does. PINGD_SEED=n replays a run.
.PHONY: soak
soak:
	PINGD_SOAK=1 PINGD_INTEGRATION=require $(GO) test -run '^TestSoak' -count=1 -timeout 90m -v ./cmd/pingd

# Benchmarks (bench/, results in docs/benchmarks.md): pingd side by side
# with Prosody's and ejabberd's own pubsub, a no-logic component and plain
# net/http, each ratio measured in one run with the sides alternating.
# BENCH selects benchmarks (a go test -bench pattern); BENCH_PROFILES names
# a directory for CPU profiles of pingd's side; BENCH_REPORT a file the
# result tables are appended to.
.PHONY: bench bench-quick
BENCH          ?= .
BENCH_PROFILES ?=
BENCH_REPORT   ?=
BENCHARGS = $(if $(BENCH_PROFILES),-bench.profiles=$(abspath $(BENCH_PROFILES))) $(if $(BENCH_REPORT),-bench.report=$(abspath $(BENCH_REPORT)))

# Full sizes (up to 1,000 XMPP subscribers, 10,000 webhooks, 100,000
# subscriptions); takes about eight minutes.
bench:
	$(GO) test ./bench -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 120m -args -bench.full $(BENCHARGS)

# Small sizes, about a minute, for regular use.
bench-quick:
	$(GO) test ./bench -run '^$$' -bench '$(BENCH)' -benchtime 1x -timeout 10m -args $(BENCHARGS)
