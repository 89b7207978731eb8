# Two entry points, both from a fresh clone with no internet access beyond PyPI and no API key:
#   make demo   set up, build the example pack from sources/example, and ask it a question
#   make test   set up with the test extras and run the test suite (what CI runs)
# Installs are pinned by requirements.lock (every package, as constraints) and use the pip
# the venv ships (23.2 with Python 3.11): no pip upgrade, so what CI tests is what a user
# gets. Refresh the lock after changing dependencies in pyproject.toml: make lock
PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
# The query runtime alone (pip install knowledge-packs, no extras), as a downstream app
# installs it; `make test` rebuilds it and tests packs built by the full install with it.
RUNTIME_VENV ?= .venv-runtime
LOCK = requirements.lock
PIP_INSTALL = pip install --quiet -c $(LOCK)
# Test processes (pytest-xdist; each file runs whole on one, so its module fixtures are
# built once): two halve CI's time on a 2-core machine; each holds ~3 GB at its peak.
# Files are handed out in collection order (--no-loadscope-reorder; xdist otherwise sorts
# them by size): the browser tests' file must come last (tests/conftest.py says why).
PYTEST_WORKERS ?= 2
QUESTION ?= How do I choose an embedding model when I have no internet?
export HF_HUB_OFFLINE = 1
export PREFECT_SERVER_ANALYTICS_ENABLED = false
export DO_NOT_TRACK = 1

.PHONY: demo test lint setup setup-dev setup-runtime lock dist bench book

$(BIN)/python:
	$(PY) -m venv $(VENV)

# --no-compile for the quickstart: byte-compiling every installed file (torch, Prefect,
# ...) costs more than it saves there; Python compiles what it imports on first use.
# Tests and the runtime compile everything, as pip's default does (with
# PYTHONDONTWRITEBYTECODE set, as in some CI shells, every process would otherwise compile
# its imports again), but on every core: pip compiles one file at a time (setup-dev took
# 257 s, against 115 s to install plus 64 s to compile on 2 cores). compileall's exit code
# is not checked, as pip ignores files that do not compile (templates some packages ship).
COMPILE = python -m compileall -q -j 0
setup: $(BIN)/python
	$(BIN)/$(PIP_INSTALL) --no-compile -e '.[build,offline]'

setup-dev: $(BIN)/python
	$(BIN)/$(PIP_INSTALL) --no-compile -e '.[dev]'
	-$(BIN)/$(COMPILE) $(VENV)/lib >/dev/null

setup-runtime:
	rm -rf $(RUNTIME_VENV)
	$(PY) -m venv $(RUNTIME_VENV)
	$(RUNTIME_VENV)/bin/$(PIP_INSTALL) --no-compile .
	-$(RUNTIME_VENV)/bin/$(COMPILE) $(RUNTIME_VENV)/lib >/dev/null
	rm -rf build  # setuptools' in-tree build folder: a stale copy of the sources

demo: setup
	$(BIN)/kpack build sources/example --out out
	$(BIN)/kpack query out/example "$(QUESTION)"

# The import contracts ([tool.importlinter]) and ruff ([tool.ruff]) of pyproject.toml.
lint: setup-dev
	$(BIN)/lint-imports
	$(BIN)/ruff check .

test: setup-dev setup-runtime lint
	KPACK_RUNTIME_PYTHON=$(abspath $(RUNTIME_VENV))/bin/python $(BIN)/python -m pytest -q \
		-n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The package as a wheel, for installing where this checkout is not (knowledge-packs is
# not on PyPI yet): dist/knowledge_packs-<version>-py3-none-any.whl, then
# `pip install dist/knowledge_packs-*.whl` (add [build], [offline], ... as needed).
dist: $(BIN)/python
	rm -rf dist
	$(BIN)/pip wheel --quiet --no-deps --wheel-dir dist .
	rm -rf build  # setuptools' in-tree build folder: a stale copy of the sources
	@ls dist/*.whl

# Re-resolve every dependency from pyproject.toml in a fresh venv and pin the result.
lock:
	rm -rf .venv-lock
	$(PY) -m venv .venv-lock
	.venv-lock/bin/pip install --quiet --no-compile '.[dev]'
	{ echo "# Every package of knowledge-packs[dev], pinned: pip install -c $(LOCK) ..."; \
	  echo "# Made by 'make lock' (Python 3.11, Linux x86_64); edit pyproject.toml, not this."; \
	  .venv-lock/bin/pip freeze --exclude knowledge-packs | sed 's/+cpu$$//'; } > $(LOCK)
	rm -rf .venv-lock

# BENCHMARKS.md, one page of current tables (benchmarks/book.py). `make book` rewrites it from
# the results already in benchmarks/results/ and benchmarks/ledger.jsonl (seconds);
# `make bench` first reruns the standing suite on the dev splits (long: it builds the
# benchmark packs from ../shared/data; SLOW=1 adds the big builds, ONLY="gate answers-docs"
# picks targets). Never a blind test split: those are run by hand, once, and recorded in
# the ledger (see each target's blind command in the book).
SLOW ?=
ONLY ?=
bench: setup-dev
	$(BIN)/python benchmarks/book.py run $(if $(SLOW),--slow) $(foreach t,$(ONLY),--only $(t))

book:
	$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PY)) benchmarks/book.py
