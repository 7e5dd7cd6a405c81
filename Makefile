# `make demo`: train an MLP on scikit-learn's digits with a compiled training step.
# `make test`: the whole test suite. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.demo: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[demo]"
	touch $@

$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test,demo]"
	touch $@

demo: $(VENV)/.demo
	$(BIN)/python -m models.mlp --compile --backend llvm-cpu

test: $(VENV)/.test
	STAGED_CACHE_DIR=$${STAGED_CACHE_DIR:-$(CURDIR)/.cache/staged} $(BIN)/python -m pytest tests -q

bench: $(VENV)/.test
	$(BIN)/python bench/mlp_step.py

clean:
	rm -rf $(VENV) .cache build *.egg-info
