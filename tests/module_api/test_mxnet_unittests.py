"""mxnet 1.9.1's own ``tests/python/unittest/test_module.py`` and
``test_model_parallel.py``, unchanged, with ``mxnet`` only aliased to
``module_api`` (tests/mxnet_unittest/shim).

Every test not listed in ``EXPECTED_FAILURES`` must pass, and every listed one
must still fail: a fix that makes one pass moves it out of the list (and out
of the README's table)."""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.path.join(ROOT, "tests", "mxnet_unittest")
UNITTEST = os.path.join(HARNESS, "python", "unittest")

# test -> why it fails here (the README's table says the same)
EXPECTED_FAILURES = {
    "test_module_dtype": "the float16 Module runs; its check `x.dtype == np.float16` fails "
                         "because NDArray.dtype is torch's dtype (NDArray is a torch.Tensor "
                         "subclass, as the public contract says)",
    "test_executor_group": "sparse storage (row_sparse weights, contrib.SparseEmbedding)",
    "test_factorization_machine_module": "sparse storage (csr data, row_sparse weights)",
    "test_module_initializer": "sparse storage (csr / row_sparse arrays)",
}


def _run(tmp_path, test_file):
    report = tmp_path / "report.xml"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(HARNESS, "shim"),
                                         os.path.join(HARNESS, "harness"), ROOT])
    env.update(MXNET_TEST_SEED="1234", MXNET_MODULE_SEED="1234")   # fixed seeds
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-c", os.path.join(UNITTEST, "pytest.ini"), "--rootdir", UNITTEST,
           "--confcutdir", UNITTEST, f"--junitxml={report}", os.path.join(UNITTEST, test_file)]
    # mxnet's tests write checkpoints into the working directory: a temporary one
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert report.exists(), (proc.stdout + proc.stderr)[-4000:]
    results = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        skipped = case.find("skipped") is not None
        results[case.get("name")] = "failed" if failed else "skipped" if skipped else "passed"
    return results, proc


def _check(results, proc, count):
    out = (proc.stdout + proc.stderr)[-6000:]
    assert len(results) == count, out            # every test in the file was collected
    unexpected = sorted(t for t, r in results.items()
                        if r != "passed" and t not in EXPECTED_FAILURES)
    assert not unexpected, f"newly failing: {unexpected}\n{out}"
    now_passing = sorted(t for t in EXPECTED_FAILURES if results.get(t) == "passed")
    assert not now_passing, (f"{now_passing} pass now: remove them from EXPECTED_FAILURES "
                             f"and from the README's table")


@pytest.mark.slow
def test_mxnet_test_module_runs_through_the_alias(tmp_path):
    _check(*_run(tmp_path, "test_module.py"), 22)


def test_mxnet_test_model_parallel_runs_through_the_alias(tmp_path):
    """group2ctx over cpu(0) / cpu(1): mxnet's chain test, values and gradients."""
    results, proc = _run(tmp_path, "test_model_parallel.py")
    _check(results, proc, 2)
    assert results["test_chain"] == "passed"
