# ax — make targets. `make run` and `make test` are all a newcomer needs.
GO        ?= go
BIN       ?= bin/ax
PIPELINES ?= examples
FUZZTIME  ?= 30s

.PHONY: all build run test vet validate-dag bench fuzz clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/ax

# The main job: the scheduler on an embedded SQLite file (./ax.db) with the
# example pipelines. Ctrl-C stops it gracefully; `bin/ax status` shows runs.
run: build
	$(BIN) validate $(PIPELINES)
	$(BIN) server --store ax.db --pipelines $(PIPELINES)

vet:
	$(GO) vet ./...

# All tests; the engine again under the race detector. MySQL tests run when
# AX_TEST_MYSQL_DSN is set (CI always sets it; see .ci/run).
test: vet
	$(GO) test -count=1 ./...
	$(GO) test -count=1 -race -short ./engine/... ./store/... ./dag/... ./runner/...

# Validate every checked-in pipeline (CI-friendly: exit 1 with file:line:col errors).
validate-dag: build
	$(BIN) validate --strict $(PIPELINES)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./dag/... ./defs/... ./store/... ./engine/...

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./defs/
	$(GO) test -run '^$$' -fuzz FuzzCompile -fuzztime $(FUZZTIME) ./dag/

clean:
	rm -rf bin
