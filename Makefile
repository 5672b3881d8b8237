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
# Williams-ordered plan; then the energy meter measures a short CPU workload here.
demo: build
	$(LLEM) run examples/quickstart.yaml --dry-run
	@echo
	$(LLEM) run examples/sweep.yaml --dry-run
	@echo
	$(LLEM) config
	$(LLEM) measure --interval 50ms -- sh -c 'i=0; while [ $$i -lt 2500000 ]; do i=$$((i+1)); done'

# The Parquet files are also checked with pandas and polars, installed by the script.
test:
	scripts/python-env.sh
	LLEM_REQUIRE_PYTHON_CHECKS=1 $(CARGO) test --workspace

bench-expand:
	bench/expand.sh

ci:
	bash .ci/run
