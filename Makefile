# pingd — see README.md. Every target runs on a fresh Debian/Ubuntu machine.
GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin/pingd
FUZZTIME  ?= 20s

.PHONY: all build run test test-short vet fmt-check fuzz clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/pingd

# Starts a private Prosody on loopback (installing it if missing) with the
# component configured and two test accounts, then pingd on SQLite.
run: build
	./scripts/run-local.sh $(BIN)

# Everything: vet, formatting, unit and integration tests with the race
# detector (integration tests start their own Prosody).
test: vet fmt-check
	$(GO) test -race -timeout 15m ./...

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
