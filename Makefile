# Two commands on a fresh machine: `make demo` (the main job) and `make test`.
PY := .venv/bin/python
export SYMTRITON_CACHE_DIR ?= $(CURDIR)/.venv/symtriton-cache
# The mxnet 1.9.1 peer of the benchmarks (`make mxnet-venv` creates it); its column is
# skipped when this interpreter does not exist.
MXNET_PYTHON ?= $(CURDIR)/.mxnet-venv/bin/python
MXNET_FLAG = $(if $(wildcard $(MXNET_PYTHON)),--mxnet-python $(MXNET_PYTHON),)

.PHONY: venv demo demo-mlp demo-mnist test test-gpu test-mxnet bench mxnet-venv clean

.venv/.installed: pyproject.toml
	python3 -m venv .venv
	# The CPU wheel of torch is pinned: plain `pip install torch` pulls CUDA packages.
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q triton
	$(PY) -m pip install -q -e ".[dev,examples]"
	touch $@

venv: .venv/.installed

# The main job: mxnet's lstm_bucketing example on the Sherlock Holmes corpus
# (about five minutes on 2 CPU cores).
demo: venv
	$(PY) examples/lstm_bucketing.py

demo-mlp: venv
	$(PY) examples/train_mlp.py

# LeNet on the MNIST split (examples/data/mnist), mxnet's train_mnist.py
demo-mnist: venv
	$(PY) examples/train_mnist.py --network lenet --num-epochs 3

# One pytest process per core (pytest-xdist); they share the kernel cache, which is
# made for concurrent processes. `$(PY) -m pytest tests/...` runs a part in one process.
test: venv
	$(PY) -m pytest -q -n auto tests

# On a machine with a CUDA device and a CUDA build of torch (the venv pins the CPU
# wheel: reinstall torch==2.13.0 from PyTorch's CUDA index first): the operator
# table, Executor, Module, BucketingModule, Dropout and AOT on gpu(0) against cpu().
test-gpu: venv
	SYMTRITON_TEST_GPU=1 $(PY) -m pytest -q tests/gpu

# mxnet 1.9.1's own test_module.py and test_model_parallel.py, run from an apache/mxnet
# source checkout at tag 1.9.1 with `mxnet` aliased to module_api (tests/mxnet_unittest):
#   git clone --branch 1.9.1 --depth 1 https://github.com/apache/mxnet /tmp/mxnet-src
#   MXNET_SOURCE=/tmp/mxnet-src make test-mxnet
test-mxnet: venv
	@test -n "$(MXNET_SOURCE)" || { echo "test-mxnet: set MXNET_SOURCE to an apache/mxnet source checkout at tag 1.9.1" >&2; exit 2; }
	MXNET_SOURCE="$(MXNET_SOURCE)" $(PY) -m pytest -q -s -rs tests/mxnet_unittest

# The benchmark tables (benchmarks/README.md explains them).
bench: venv
	$(PY) benchmarks/compiled_vs_eager.py
	$(PY) benchmarks/module_fit.py $(MXNET_FLAG)
	$(PY) benchmarks/lstm_bucketing.py $(MXNET_FLAG)
	$(PY) benchmarks/lenet.py $(MXNET_FLAG)
	$(PY) benchmarks/dtypes.py $(MXNET_FLAG)
	$(PY) benchmarks/cold_start.py $(MXNET_FLAG)
	$(PY) benchmarks/nd_call_cost.py $(MXNET_FLAG)

# mxnet 1.9.1 in its own venv, for the benchmarks' peer column (never imported here).
mxnet-venv:
	python3 -m venv .mxnet-venv
	.mxnet-venv/bin/python -m pip install -q mxnet==1.9.1 "numpy<1.24" "scipy<1.12" graphviz

clean:
	rm -rf .venv .mxnet-venv
