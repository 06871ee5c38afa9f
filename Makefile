# marlow: the two commands a newcomer needs are `make demo` and `make test`.
# The steps of test and check-slow live in .ci/run so that CI runs the same
# commands on machines without make.

GO ?= go
# The native engine's SIMD attention kernels (simd/archsimd) need this Go
# experiment; without it the engine runs the same arithmetic on gonum.
GOEXPERIMENT ?= simd
export GOEXPERIMENT

.PHONY: all build demo figures test check-slow ci clean

all: build

## build: compile the CLI into bin/marlow
build:
	$(GO) build -o bin/marlow ./cmd/marlow

## demo: the demo study end to end (voting x synth-math x tiny model s, four
## conditions): pretrains the base model if it is not committed or cached,
## trains and evaluates the four runs into runs/demo/ (resuming or skipping
## what is already there), then writes the report into reports/demo/.
demo: build
	./bin/marlow run seeds/demo.yaml
	./bin/marlow report seeds/demo.yaml

## figures: rebuild every committed report from its stored log archive
## (reports/<experiment>/logs.tar.zst, made with `marlow archive`).
figures: build
	@set -e; for a in reports/*/logs.tar.zst; do \
		[ -e "$$a" ] || continue; \
		echo "marlow report $$a"; \
		./bin/marlow report "$$a" --out "$$(dirname "$$a")"; \
	done

## test: gofmt check, go vet ./..., go test ./...
test:
	bash .ci/run test

## check-slow: slower end-to-end checks (spec parser fuzzing, interop, the
## mini base models' calibration, the runner's determinism, crash-resume
## and learning checks, ...)
check-slow:
	bash .ci/run check-slow

## ci: what CI runs: set-up, test, check-slow
ci:
	bash .ci/run

clean:
	rm -rf bin
