"""``tests/conftest.py``'s end-of-session cubin sweep (``pytest_sessionfinish``), run in a
pytest session of its own: after a first sweep recorded (``tests/cubin_sweep.py``), a
failure of the last sweep fails the run with its message, and the session's record is
removed either way; without a record there is no last sweep."""
import os

import pytest

from tests import cubin_sweep

pytest_plugins = ["pytester"]

# the inner session's conftest: the hook under test, nothing else of tests/conftest.py
_CONFTEST = "from tests.conftest import pytest_sessionfinish  # noqa: F401\n"
_FIRST_SWEEP = ("from tests import cubin_sweep\n\n"
                "def test_first_sweep():\n"
                "    open(cubin_sweep.record_path(), 'w').close()\n")


@pytest.fixture
def inner(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("SYMTRITON_TEST_SESSION", "inner")
    monkeypatch.setenv("SYMTRITON_CUBIN_SWEEP", "1")
    pytester.makeconftest(_CONFTEST)
    titles = []
    return pytester, titles, os.path.join(str(tmp_path), "cubin-swept-inner")


@pytest.mark.parametrize("failures", [[], ["kernel k0 spills 8 bytes a thread"]])
def test_last_sweep_runs_fails_the_run_and_removes_the_record(inner, monkeypatch, failures):
    pytester, titles, record = inner
    monkeypatch.setattr(cubin_sweep, "sweep", lambda title: titles.append(title) or failures)
    pytester.makepyfile(_FIRST_SWEEP)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert [t.endswith("at session end") for t in titles] == [True]
    assert result.ret == (1 if failures else 0)
    if failures:
        result.stdout.fnmatch_lines(["*do not compile to cubin*", "*k0 spills 8 bytes*"])
    assert not os.path.exists(record)


def test_no_last_sweep_without_a_first(inner, monkeypatch):
    pytester, titles, record = inner
    monkeypatch.setattr(cubin_sweep, "sweep", lambda title: titles.append(title) or [])
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == 0 and titles == []
