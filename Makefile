# Two entry points, both from a fresh clone with no internet access beyond PyPI and no API key:
#   make demo   set up, build the example pack from sources/example, and ask it a question
#   make test   set up with the test extras and run the test suite
PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
QUESTION ?= How do I choose an embedding model when I have no internet?
export HF_HUB_OFFLINE = 1
export PREFECT_SERVER_ANALYTICS_ENABLED = false
export DO_NOT_TRACK = 1

.PHONY: demo test setup setup-dev

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

setup: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[offline]'

setup-dev: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'

demo: setup
	$(BIN)/kpack build sources/example --out out
	$(BIN)/kpack query out/example "$(QUESTION)"

test: setup-dev
	$(BIN)/python -m pytest -q
