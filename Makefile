# marlow: the two commands a newcomer needs are `make demo` and `make test`.
# The steps of test and check-slow live in .ci/run so that CI runs the same
# commands on machines without make.

GO ?= go

.PHONY: all build demo test check-slow ci clean

all: build

## build: compile the CLI into bin/marlow
build:
	$(GO) build -o bin/marlow ./cmd/marlow

## demo: the demo study (voting x synth-math x tiny model s, four conditions).
## Until `marlow run` exists it prints the plan of the demo study.
demo: build
	@echo "note: 'marlow run' is not built yet; printing the plan of the demo study instead"
	./bin/marlow plan seeds/demo.yaml

## test: gofmt check, go vet ./..., go test ./...
test:
	bash .ci/run test

## check-slow: slower end-to-end checks (spec parser fuzzing, ...)
check-slow:
	bash .ci/run check-slow

## ci: what CI runs: set-up, test, check-slow
ci:
	bash .ci/run

clean:
	rm -rf bin
