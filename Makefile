# Two entry points, both self-contained on a machine with only Python (make docs builds the docs site):
#   make sweep  - create .venv, install, run the default CPU sweep, write out/sweeps/<machine>.json and out/plots/
#   make test   - create the same .venv and run the whole test suite, then the XLA tests
#                 (make test-xla: a second venv .venv-xla with torch 2.9.0 + torch-xla 2.9.0
#                 on XLA's CPU device; ~4-5 min to build once, ~1 min to run; skip: XLA_TESTS=0)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch==2.13.0 has a CPU-only wheel; override for a CUDA machine: make sweep TORCH_SPEC=torch
TORCH_SPEC ?= torch==2.13.0
# fp32 over the default CPU range (to 20 GFLOP); bf16 to 2 GFLOP, because CPUs without a native
# bf16 unit (AVX2-only, like the EPYC the reference sweeps/ come from) manage only ~1-2 GFLOP/s in bf16.
# Both with the CPU defaults: 5 passes (--repeats) at 1 s per shape and pass (docs/sweeping.md, "Passes");
# the bf16 half resumes the same file, so it must keep the same --repeats.
SWEEP_ARGS ?= --device cpu --dtype fp32
SWEEP_ARGS_BF16 ?= --device cpu --dtype bf16 --max-flop 2e9
STAMP := $(VENV)/.installed
# torch-xla 2.9.0 requires exactly torch 2.9.0 (a ~7 GB CUDA build from PyPI), hence its own venv.
XLA_VENV ?= .venv-xla
XLA_BIN := $(XLA_VENV)/bin
XLA_STAMP := $(XLA_VENV)/.installed
XLA_TESTS ?= 1
# pytest-xdist workers for make test: one per core (CI's two cores run the suite in about half the time); 1 = no workers
TEST_WORKERS ?= auto

.PHONY: venv sweep test plots lint clean venv-xla test-xla gpu-wheels published mutants calibration docs \
	steps-reference steps-calibration package-check model-steps-reference steps-accuracy

# pip prints only errors and warnings (no progress bars, no notice of a newer pip): the make log stays short.
PIP_QUIET := --quiet --disable-pip-version-check --progress-bar off

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_QUIET) --upgrade pip
	$(BIN)/python -m pip install $(PIP_QUIET) "$(TORCH_SPEC)"
	$(BIN)/python -m pip install $(PIP_QUIET) -e ".[measure,test]"
	touch $(STAMP)

venv: $(STAMP)

# make sweep writes only under $(OUT) (gitignored): $(OUT)/sweeps/<machine>.json and $(OUT)/plots/.
# The committed sweeps/ and plots/ are the project's reference run; `make plots` redraws plots/ from them.
OUT ?= out
MACHINE = $(shell $(BIN)/python -c "from mfu_sweep.specs.cpu import default_cpu_label; print(default_cpu_label())")

sweep: $(STAMP)
	$(BIN)/mfu-sweep sweep $(SWEEP_ARGS) -o $(OUT)/sweeps/$(MACHINE).json --force
	$(if $(strip $(SWEEP_ARGS_BF16)),$(BIN)/mfu-sweep sweep $(SWEEP_ARGS_BF16) -o $(OUT)/sweeps/$(MACHINE).json --resume)
	$(BIN)/mfu-sweep plot $(OUT)/sweeps/*.json -o $(OUT)/plots/

# The committed figures from the committed sweeps (--force: it redraws them). The time-to-N-steps sweeps are
# left out: their model's layer shapes are no GEMM-size sweep, and steps-reference draws their own figure.
PLOT_SWEEPS = $(filter-out %-steps-warm.json %-steps-cold.json %-model-steps-train.json %-model-steps-infer.json,\
	$(wildcard sweeps/*.json))
plots: $(STAMP)
	$(BIN)/mfu-sweep plot $(PLOT_SWEEPS) -o plots/ --force

# Imported published results (another team's measurements), rebuilt offline from the cited copies in
# data/published/ (see the README there); nothing is downloaded.
PUBLISHED := sweeps/published
published: $(STAMP)
	$(BIN)/mfu-sweep import xla-perf-table data/published/xla/openxla-main/default_matmul_perf_table.txtpb \
	  -o $(PUBLISHED) --force
	$(BIN)/mfu-sweep import xla-perf-table data/published/xla/rocm-sol/default_matmul_perf_table.txtpb \
	  --only gfx942 -o $(PUBLISHED) --force
	$(BIN)/mfu-sweep import deepbench data/published/deepbench/DeepBench_*.xlsx -o $(PUBLISHED) --force
	$(BIN)/mfu-sweep validate $(PUBLISHED)/*.json
	$(BIN)/mfu-sweep plot $(PUBLISHED)/sm_100_B200.json $(PUBLISHED)/sm_90.json $(PUBLISHED)/gfx950.json \
	  $(PUBLISHED)/gfx942.json --dtype bf16 --metric tflops --figure vs-flops -o plots/published --force

XLA_NOTE := the XLA tests need $(XLA_VENV) (torch 2.9.0 + torch-xla 2.9.0, a ~7 GB download, once); skip: make test XLA_TESTS=0

test: $(STAMP)
ifeq ($(XLA_TESTS),1)
	@test -f $(XLA_STAMP) || echo "note: after the suite, $(XLA_NOTE)"
endif
	$(BIN)/python -m pytest -q $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS))
ifeq ($(XLA_TESTS),1)
	$(MAKE) test-xla
endif

# Built only when missing (the stamp does not follow pyproject.toml: the project is installed editable).
$(XLA_STAMP):
	@echo "note: now building $(XLA_VENV): $(XLA_NOTE)"
	test -x $(XLA_BIN)/python || $(PYTHON) -m venv $(XLA_VENV)
	$(XLA_BIN)/python -m pip install $(PIP_QUIET) --upgrade pip
	$(XLA_BIN)/python -m pip install $(PIP_QUIET) torch==2.9.0 torch-xla==2.9.0
	$(XLA_BIN)/python -m pip install $(PIP_QUIET) --no-deps -e .
	$(XLA_BIN)/python -m pip install $(PIP_QUIET) numpy scipy click jsonschema-rs orjson tqdm seaborn pytest pytest-timeout
	touch $(XLA_STAMP)

venv-xla: $(XLA_STAMP)

test-xla: $(XLA_STAMP)
	PJRT_DEVICE=CPU $(XLA_BIN)/python -m pytest -q tests/test_xla_backend.py

# Wheels the GPU machine's image (Python 3.12, no registry) lacks, for benchmarks/gpu_check.sh there: the schema
# validator and orjson, cp312 manylinux; the device tool carries .whl/ with the call (carry=[".whl"]).
GPU_WHEELS := jsonschema-rs orjson
gpu-wheels:
	$(PYTHON) -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  -d .whl $(GPU_WHEELS)

# The documentation site (MkDocs, docs/ + mkdocs.yml) into build/site (gitignored), warnings as errors. It needs
# only the analysis install and the docs tools, so it gets a small venv of its own without torch (.venv-docs).
DOCS_VENV ?= .venv-docs
DOCS_STAMP := $(DOCS_VENV)/.installed
$(DOCS_STAMP): pyproject.toml
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install $(PIP_QUIET) --upgrade pip
	$(DOCS_VENV)/bin/python -m pip install $(PIP_QUIET) -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/python -m mkdocs build --strict --site-dir build/site

# The wheel and the sdist as a user gets them (minutes; not part of make test, whose tests/test_packaging.py does
# the quick half): build both, install the wheel without torch into a fresh venv outside the tree with its
# dependencies from the package index, run mfu-sweep --help, mfu-sweep docs and an api.bands call there, then the
# sdist's own tests from the unpacked sdist (SDIST_TESTS: which; default all of them).
SDIST_TESTS ?= tests
package-check: $(STAMP)
	PYTHON=$(PYTHON) SDIST_TESTS="$(SDIST_TESTS)" bash benchmarks/package_check.sh $(BIN)/python

# Not part of CI (tens of minutes): single-line slips in mfu_sweep/analysis/, each against a narrow test
# selection in a copy of the tree; prints the survival table of docs/statistics-calibration.md.
mutants: $(STAMP)
	$(BIN)/python benchmarks/mutants.py

# The full calibration table of docs/statistics-calibration.md (SYNTHETIC; minutes).
calibration: $(STAMP)
	$(BIN)/python benchmarks/calibration.py

# Time to N steps on this CPU (docs/time-to-steps.md): one small model family, eager and compile, with warm
# caches (filled by a first, discarded pass) and cold ones (a fresh cache per shape); tool output only, into
# sweeps/ and plots/. Cold compiles dominate: a fresh worker and inductor's first compile per shape and pass
# (~1 s of first call each, 6.5 min for the whole target on the idle 2-core Zen 4 VM; far longer under load),
# hence two cold passes against three warm ones.
STEPS_FAMILY ?= llm:llama-3-8b:tokens=32:tp=8:lm_head=0
STEPS_REPEATS ?= 3
STEPS_COLD_REPEATS ?= 2
STEPS_ARGS ?= --device cpu --dtype fp32 --mode eager --mode compile --shapes $(STEPS_FAMILY) --budget-s 0.2
STEPS_SWEEPS = sweeps/$(MACHINE)-steps-warm.json sweeps/$(MACHINE)-steps-cold.json
steps-reference: $(STAMP)
	$(BIN)/mfu-sweep sweep $(STEPS_ARGS) --repeats 1 --label $(MACHINE)-warm -o $(OUT)/steps-prime.json --force --quiet
	$(BIN)/mfu-sweep sweep $(STEPS_ARGS) --repeats $(STEPS_REPEATS) --label $(MACHINE)-warm \
	  -o sweeps/$(MACHINE)-steps-warm.json --force --quiet
	$(BIN)/mfu-sweep sweep $(STEPS_ARGS) --repeats $(STEPS_COLD_REPEATS) --cold-compile --label $(MACHINE)-cold \
	  -o sweeps/$(MACHINE)-steps-cold.json --force --quiet
	$(BIN)/mfu-sweep predict $(STEPS_SWEEPS) --model $(STEPS_FAMILY) --dtype fp32 --steps 1-100000
	$(BIN)/mfu-sweep plot $(STEPS_SWEEPS) --figure steps -o plots/ --force

# A real model's steps on this CPU (docs/time-to-steps.md, "Measuring the real step"): the issue-45 decoder (21M
# parameters: hidden 512, ffn 1536, 4 layers, 8 heads, 4 KV heads, vocab 8192, one sequence of 128 tokens), trained
# and run forward, eager and compiled with cold and warm caches, three fresh-process runs each; tool output only,
# into sweeps/. Run it on a quiet machine (tens of minutes: every cold run compiles the whole step).
STEPS_MODEL ?= llm:llama-3-8b:hidden=512:ffn=1536:layers=4:heads=8:kv_heads=4:vocab=8192:seq=128:tokens=128
MODEL_STEPS_ARGS ?= --device cpu --model $(STEPS_MODEL) --mode eager --mode compile --cache cold --cache warm \
	--repeats 3 --timeout 600
model-steps-reference: $(STAMP)
	$(BIN)/mfu-sweep steps $(MODEL_STEPS_ARGS) --kind train -o sweeps/steps/$(MACHINE)-model-steps-train.json --force --quiet
	$(BIN)/mfu-sweep steps $(MODEL_STEPS_ARGS) --kind infer -o sweeps/steps/$(MACHINE)-model-steps-infer.json --force --quiet
	$(BIN)/mfu-sweep validate sweeps/steps/$(MACHINE)-model-steps-train.json sweeps/steps/$(MACHINE)-model-steps-infer.json

# The tool's step measurement against an independent script, and its cost against a cold GEMM sweep
# (benchmarks/steps_accuracy.py; docs/time-to-steps.md gets the figures). Quiet machine; one to two hours.
steps-accuracy: $(STAMP)
	$(BIN)/python benchmarks/steps_accuracy.py --out $(OUT)/steps-accuracy

# The coverage of the break-even interval on SYNTHETIC sweeps with known compile costs and speeds, and of the
# intervals of a measured step on SYNTHETIC step files with known truth (minutes).
steps-calibration: $(STAMP)
	$(BIN)/python benchmarks/steps_calibration.py
	$(BIN)/python benchmarks/step_runs_calibration.py

lint: $(STAMP)
	$(BIN)/ruff check mfu_sweep tests benchmarks

clean:
	rm -rf $(VENV) $(XLA_VENV) $(DOCS_VENV) .pytest_cache
