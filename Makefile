# llem: two commands work on a fresh machine.
#   make demo   build llem and run the main job (the quickstart on the embedded engine)
#   make test   the whole test suite
CARGO ?= cargo
LLEM := target/release/llem

.PHONY: demo test build bench-expand ci

build:
	$(CARGO) build --release -p llem

# Until the embedded engine lands, the main job is planned, not executed: the dry run
# prints the quickstart experiment (fully resolved, hashed) and the example study's
# Williams-ordered plan.
demo: build
	$(LLEM) run examples/quickstart.yaml --dry-run
	@echo
	$(LLEM) run examples/sweep.yaml --dry-run

test:
	$(CARGO) test --workspace

bench-expand:
	bench/expand.sh

ci:
	bash .ci/run
