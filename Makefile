# The two set-up commands of the README: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed-stamp

.PHONY: demo test test-all bench calibrate ablation soak clean

$(STAMP): pyproject.toml constraints-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints-dev.txt torch==2.13.0
	$(PY) -m pip install -q -c constraints-dev.txt -e '.[dev,jax,tf]'
	touch $(STAMP)

demo: $(STAMP)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash examples/demo.sh

test: $(STAMP)
	$(PY) -m pytest -q

test-all: $(STAMP)
	$(PY) -m pytest -q -m "slow or not slow"

bench: $(STAMP)
	$(PY) bench/bench.py
	$(PY) bench/runtime_cost.py --seeds 2 --repeat 5 --out bench/runtime_cost.md
	$(PY) bench/production_sizes.py -n 2 --seed 1 --out bench/production_sizes.md

clean:
	rm -rf $(VENV) .gpuemu .gpuemu-demo bench/out

calibrate: $(STAMP)
	TRITON_INTERPRET=1 $(PY) -m gpuemu calibrate --op all --corpus examples/kernels/manifest.yaml --samples 200 --out rulepacks/calibrated.yaml

ablation: $(STAMP)
	$(PY) -m pip install -q -c constraints-dev.txt -e '.[plot]'
	TRITON_INTERPRET=1 $(PY) -m gpuemu bench --ablation --iterations 20 --seed 1 --out bench/ablation

# Every correct control (corpus kernels and torch's own ops) under `gpuemu fuzz` defaults, 1,000 cases per dtype
soak: $(STAMP)
	$(PY) bench/soak.py --iterations 1000 --seed 20261201 --out bench/soak

# The runtime's tests on triton 3.6 in a second venv (with numpy 2.4, whose int() of a one-element array 3.6's
# interpreter relied on for loop bounds: the runtime converts them itself)
# Triton's own language tests (test_core.py and the interpreter-enabled files of Triton's `make test-interpret`)
# under the stock interpreter and on gpuemu's runtime, side by side: bench/conformance/results.md. The tests come
# from TRITON_TESTS (a Triton checkout), TRITON_GIT (a git directory with Triton's history) or GitHub
# (bench/conformance/run.py); about 30 minutes on 2 cores
.PHONY: conformance
conformance: $(STAMP)
	$(PY) -m pip install -q pytest-timeout pytest-xdist
	$(PY) bench/conformance/run.py

.PHONY: test-triton36 bench-runtime
VENV36 ?= /tmp/venv36
test-triton36:
	test -x $(VENV36)/bin/python || $(PYTHON) -m venv $(VENV36)
	$(VENV36)/bin/pip install -q torch==2.13.0 triton==3.6.0 'numpy==2.4.6' mpmath pyyaml safetensors rich wrapt \
		opentelemetry-api pytest hypothesis jsonschema
	PYTHONPATH=$(CURDIR) $(VENV36)/bin/python -m pytest -q tests/test_runtime.py tests/test_runtime_gaps.py \
		tests/test_runtime_aot.py tests/test_launch_resources.py

# The runtime's cost per program against plain TRITON_INTERPRET on the example corpus (bench/runtime_cost.md)
bench-runtime: $(STAMP)
	$(PY) bench/runtime_cost.py --seeds 2 --repeat 5 --out bench/runtime_cost.md

# gpuemu lint on the example corpus for sm_80/86/89/90, cold and warm cache (issue 4: < 60 s cold, < 5 s warm)
.PHONY: bench-lint
bench-lint: $(STAMP)
	$(PY) bench/lint_bench.py

# The hook's cost: unsampled intercepted launch vs bare (ratio), sampled check per op and size (bench/hook_overhead.md)
.PHONY: bench-hook
bench-hook: $(STAMP)
	$(PY) bench/hook_overhead.py --out bench/hook_overhead.md

# The gate's end-to-end tests with what they need from the OS: headless Chromium + chromedriver (the HTML
# report in a real browser) and a Prometheus server (the alert rule fires on a planted divergence). Installs
# missing OS packages with apt-get (as root, else sudo) and the dev extra; a missing piece fails, not skips.
.PHONY: test-gate-e2e
SUDO ?= $(shell [ "$$(id -u)" = 0 ] || echo sudo)
test-gate-e2e: $(STAMP)
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null && command -v prometheus >/dev/null || \
		{ $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q \
			--no-install-recommends chromium chromium-driver prometheus; }
	$(PY) -m pip install -q -c constraints-dev.txt -e '.[dev]'
	GPUEMU_REQUIRE_E2E=1 $(PY) -m pytest -q -rs -m "browser or prometheus" tests/test_html_report.py tests/test_alerts_e2e.py

# gpuemu check over the whole example corpus (72 launchers: 34 buggy, 38 correct): exit 1 expected; then the
# correct subset alone, exit 0 (less the field kernel annotated expect: precondition, silently wrong on strided
# input by design, which the gate rightly flags). Outputs under bench/out/check/ (JSON, JUnit, SARIF, HTML, Markdown).
.PHONY: check-corpus
CHECK_N ?= 10
check-corpus: $(STAMP)
	mkdir -p bench/out/check  # gpuemu check writes into folders that exist
	$(PY) -m gpuemu check --manifest examples/kernels/manifest.yaml -n $(CHECK_N) --seed 1 --store bench/out/check/store \
		--json bench/out/check/corpus.json --junit bench/out/check/corpus.junit.xml --sarif bench/out/check/corpus.sarif \
		--html bench/out/check/corpus.html --markdown bench/out/check/corpus.md; \
		rc=$$?; echo "exit $$rc (1 expected: the corpus has buggy kernels)"; test $$rc -eq 1
	$(PY) -m gpuemu check --manifest examples/kernels/manifest.yaml --select correct=true --select 'expect!=precondition' \
		-n $(CHECK_N) --seed 1 \
		--store bench/out/check/store-correct --json bench/out/check/correct.json

# import gpuemu.hook on GPT-2 and a Llama-style model vs backend="inductor", planted bugs, launch micro (bench/hook_real_model.md)
.PHONY: bench-hook-real
bench-hook-real: $(STAMP)
	$(PY) bench/hook_real_model.py --steps 100 --evals 100 --deterministic --cudagraphs --noise-floor --out bench/hook_real_model.md --json bench/hook_real_model.json

# the example corpus under gpuemu check: local worker processes and a local Ray cluster, 1 and 2 workers
.PHONY: bench-ray
bench-ray: $(STAMP)
	$(PY) bench/ray_bench.py --iterations 10 --workers 1,2 --out bench/ray_bench.md

# docs/gate.md's commands in a fresh copy of the repository, and its workflow through the Action's script: exit 0
# when every command prints what the page shows (times, dates, key ids and commit hashes aside)
.PHONY: check-docs
check-docs: $(STAMP)
	$(PY) scripts/gate_doc.py
