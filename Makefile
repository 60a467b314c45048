# Two entry points, both self-contained on a machine with only Python:
#   make sweep  - create .venv, install, run the default CPU sweep, write JSON and plots
#   make test   - create the same .venv and run the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch==2.13.0 has a CPU-only wheel; override for a CUDA machine: make sweep TORCH_SPEC=torch
TORCH_SPEC ?= torch==2.13.0
SWEEP_ARGS ?= --device cpu --dtype fp32 --dtype bf16
STAMP := $(VENV)/.installed

.PHONY: venv sweep test plots lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

venv: $(STAMP)

sweep: $(STAMP)
	$(BIN)/mfu-sweep sweep $(SWEEP_ARGS) --force
	$(MAKE) plots

plots: $(STAMP)
	$(BIN)/mfu-sweep plot sweeps/*.json -o plots/

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check mfu_sweep tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache
