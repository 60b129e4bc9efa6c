# Two commands on a fresh machine: `make demo` (the main job) and `make test`.
PY := .venv/bin/python
export SYMTRITON_CACHE_DIR ?= $(CURDIR)/.venv/symtriton-cache

.PHONY: venv demo demo-mlp test bench clean

.venv/.installed: pyproject.toml
	python3 -m venv .venv
	# The CPU wheel of torch is pinned: plain `pip install torch` pulls CUDA packages.
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q triton
	$(PY) -m pip install -q -e ".[dev,examples]"
	touch $@

venv: .venv/.installed

# The main job: the bucketed LSTM language model (a few minutes on 2 CPU cores).
demo: venv
	$(PY) examples/lstm_bucketing.py

demo-mlp: venv
	$(PY) examples/train_mlp.py

test: venv
	$(PY) -m pytest -q tests

bench: venv
	$(PY) benchmarks/compiled_vs_eager.py

clean:
	rm -rf .venv
