# ax — make targets. `make run` and `make test` are all a newcomer needs.
GO        ?= go
BIN       ?= bin/ax
PIPELINES ?= examples
FUZZTIME  ?= 30s

.PHONY: all build run quickstart test vet validate-dag bench bench-base fuzz chaos sim clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/ax

# The main job: the scheduler on an embedded SQLite file (./ax.db) with the
# example pipelines, and the example executor beside it. PORT is the
# server's; the executor takes PORT+1010 (8080 -> 9090). A busy port stops
# it before anything starts. Ctrl-C stops both; `bin/ax status` shows runs.
PORT ?= 8080
run: build
	$(GO) build -o bin/example-executor ./examples/executor
	BIN=$(BIN) PIPELINES=$(PIPELINES) PORT=$(PORT) SECRETS_DIR=$(SECRETS_DIR) scripts/run.sh

vet:
	$(GO) vet ./...

# The README's quick start, as written (also the last step of make test).
quickstart:
	.ci/quickstart

# All tests; the engine again under the race detector. MySQL tests run when
# AX_TEST_MYSQL_DSN is set (CI always sets it; see .ci/run).
# Test artifacts (the console test's screenshot) go under test-output/.
test: vet
	mkdir -p test-output
	$(GO) test -count=1 -artifacts -outputdir $(CURDIR)/test-output ./...
	$(GO) test -count=1 -race -short ./engine/... ./sim/... ./store/... ./dag/... ./runner/...
	# Alone, because it restarts MariaDB under two servers (skips without a DSN).
	AX_TEST_HA_RESTART=1 $(GO) test -count=1 -run TestHAMariaDBRestart ./cmd/ax
	# 30 seconds of make chaos's HTTP-executor mode (skips without a DSN).
	AX_CHAOS_DURATION=30s AX_CHAOS_MODE=http $(GO) test -count=1 -run '^TestChaosHTTP$$' ./cmd/ax
	# The README's quick start, run as written in a scratch copy of the tree.
	.ci/quickstart

# Validate every checked-in pipeline (CI-friendly: exit 1 with file:line:col errors).
validate-dag: build
	$(BIN) validate --strict $(PIPELINES)

# One table of figures, each against a baseline measured in the same run
# (and bench.json); MySQL rows run when AX_TEST_MYSQL_DSN is set.
# With BASE=<rev> it guards against regression instead: the tests of <rev>
# (checked out into a temporary git worktree, removed after, on Ctrl-C too)
# and of the working tree run the engine's rows alternately, ROUNDS rounds,
# and each row prints both medians, new/base, and a flag when the change
# costs more than 10 %; FAIL_OVER=1.10 makes that exit 1, ROWS=<regexp>
# picks rows by name (bench-base.json). `make bench-base` is BASE=auto: the
# newest tag, else the merge base with origin/main, else with main.
BASE      ?=
ROUNDS    ?= 3
ROWS      ?=
FAIL_OVER ?= 0
bench:
ifeq ($(BASE),)
	$(GO) run ./cmd/axbench -json bench.json
else
	$(GO) run ./cmd/axbench -base '$(BASE)' -rounds $(ROUNDS) -rows '$(ROWS)' -fail-over $(FAIL_OVER) -json bench-base.json
endif

bench-base:
	$(MAKE) bench BASE='$(or $(BASE),auto)'

# Random kills and stalls of the primary of two servers on MySQL, for
# $(CHAOS); prints executions, duplicates, missed logical times, takeover times.
# MODE=http runs the pipeline's middle task on two SDK executors in their own
# processes, killed at random too, and prints unknown outcomes as well.
CHAOS ?= 2m
MODE  ?=
chaos:
	@test -n "$$AX_TEST_MYSQL_DSN" || { echo "make chaos needs AX_TEST_MYSQL_DSN (for example root@tcp(127.0.0.1:3306)/test)"; exit 2; }
	@if [ "$(MODE)" = http ]; then \
		AX_CHAOS_DURATION=$(CHAOS) AX_CHAOS_MODE=http $(GO) test -count=1 -run '^TestChaosHTTP$$' -v -timeout 0 ./cmd/ax; \
	else \
		AX_CHAOS_DURATION=$(CHAOS) $(GO) test -count=1 -run '^TestChaos$$' -v -timeout 0 ./cmd/ax; \
	fi

# The deterministic simulator on $(SEEDS) seeds (make test runs 200):
# prints seeds/s, what was simulated and the tally of invariant checks; a
# failing seed replays with go test ./sim -run Sim -seed N.
SEEDS ?= 1000
sim:
	cd sim && $(GO) test -count=1 -timeout 0 -run '^TestSim$$' -seeds $(SEEDS) -simreport

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME) ./defs/
	$(GO) test -run '^$$' -fuzz FuzzNext -fuzztime $(FUZZTIME) ./defs/
	$(GO) test -run '^$$' -fuzz FuzzCompile -fuzztime $(FUZZTIME) ./dag/
	$(GO) test -run '^$$' -fuzz FuzzAPIRequest -fuzztime $(FUZZTIME) ./api/

clean:
	rm -rf bin test-output
