# `make demo`: train an MLP on scikit-learn's digits with a compiled training step.
# `make test`: the whole test suite. `make bench`: the benchmarks (installs JAX too).
# All create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean vulkan-driver graphviz generated native

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.demo: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[demo]"
	touch $@

$(VENV)/.test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test,demo,distributed]"
	touch $@

$(VENV)/.bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[test,demo,bench,distributed]"
	touch $@

demo: $(VENV)/.demo
	$(BIN)/python -m models.mlp --compile --backend llvm-cpu

# Vulkan tests run on Mesa's software driver (lavapipe); without it they skip, saying why.
vulkan-driver:
	@if ! ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing mesa-vulkan-drivers (lavapipe) for the Vulkan tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      mesa-vulkan-drivers) >/dev/null 2>&1 || echo "could not install mesa-vulkan-drivers"; \
	  else echo "no lavapipe and no root apt-get: the Vulkan tests will skip"; fi; \
	fi

# staged.viz renders SVG with Graphviz's `dot`; without it the SVG tests skip, saying why.
graphviz:
	@if ! command -v dot >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing graphviz (the dot program) for the staged.viz tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends graphviz) >/dev/null 2>&1 || echo "could not install graphviz"; \
	  else echo "no dot and no root apt-get: the SVG tests of staged.viz will skip"; fi; \
	fi

# ruff: its lint rules (and why each ignore is there) and its format are in pyproject.toml;
# mypy: the package's type hints, with [tool.mypy]'s settings there
lint: $(VENV)/.test
	$(BIN)/ruff check staged tests models bench setup.py
	$(BIN)/ruff format --check staged tests models bench setup.py
	$(BIN)/mypy

# the eager hot path compiled by Cython (setup.py): pip install builds it; after an edit the
# edited modules run as Python (Note [native modules]) until this rebuilds them
native: $(VENV)/.test
	$(BIN)/python setup.py -q build_ext --inplace

# tests that failed only because the Vulkan driver lost its device run again, in a fresh
# process (Note [lost devices in CI] in tests/conftest.py)
LOST = .cache/lost-device-tests.txt
test: $(VENV)/.test native vulkan-driver graphviz lint
	STAGED_CACHE_DIR=$${STAGED_CACHE_DIR:-$(CURDIR)/.cache/staged} $(BIN)/python -m pytest tests -q -n auto --dist loadgroup --no-loadscope-reorder --durations=60 \
	|| { test -s $(LOST) && echo "RERUN: these tests failed only because the Vulkan driver lost its device:" && cat $(LOST) \
	  && tr '\n' '\0' < $(LOST) | STAGED_CACHE_DIR=$${STAGED_CACHE_DIR:-$(CURDIR)/.cache/staged} xargs -0 $(BIN)/python -m pytest -q -p no:cacheprovider; }

# the files made from the op table and the op database (their tests fail when they are stale)
generated: $(VENV)/.test
	$(BIN)/python -m tests.ops.coverage
	$(BIN)/python -m tests.ops.stubs
	$(BIN)/python -m tests.ops.aten_schemas

bench: $(VENV)/.bench
	$(BIN)/python bench/targets.py
	$(BIN)/python bench/mlp_step.py
	$(BIN)/python bench/compiled_steps.py
	$(BIN)/python bench/matmul.py
	$(BIN)/python bench/data_tiling.py
	$(BIN)/python bench/op_overhead.py
	$(BIN)/python bench/vmap.py
	$(BIN)/python bench/first_step.py
	$(BIN)/python bench/index_checks.py
	$(BIN)/python bench/ddp.py

clean:
	rm -rf $(VENV) .cache build *.egg-info staged/_native.json
	find staged -name '*.so' -delete
