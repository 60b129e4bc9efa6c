"""A checkpoint epoch is one unit: ``.params`` and ``.states`` appear together or not at all.

Interruptions are simulated two ways: ``os.replace`` monkeypatched to fail when it
publishes one file of the unit, and a real ``SIGKILL`` of a process stopped at each
stage of the publication (the ``SYMTRITON_TEST_PAUSE_AT`` hook of
``compiler/artifacts/atomic.py``). Afterwards every epoch either loads with its
states or is cleanly absent (its ``.params`` missing, and ``Module.load`` says so),
and the next save removes the temp files a killed save left.
"""
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import module_api as mx
from compiler.artifacts import atomic
from compiler.errors import MXNetError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _trained_module():
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3, name="fc")
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(net, name="softmax"))
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    mod.init_params(mx.init.Uniform(0.5))
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1,
                                                          "momentum": 0.9})
    batch = mx.io.DataBatch([mx.nd.ones((4, 5))], [mx.nd.array([0, 1, 2, 0])])
    mod.forward_backward(batch)
    mod.update()
    return mod


def _temps(folder):
    return sorted(n for n in os.listdir(folder) if n.startswith(".symtriton-tmp."))


def _load_with_states(prefix, epoch):
    mod = mx.mod.Module.load(prefix, epoch, load_optimizer_states=True)
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1,
                                                          "momentum": 0.9})
    return mod


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_params_and_states_get_the_same_umask_mode(tmp_path, umask):
    mod = _trained_module()
    old = os.umask(umask)
    try:
        mod.save_checkpoint(str(tmp_path / "m"), 1, save_optimizer_states=True)
    finally:
        os.umask(old)
    modes = {p.suffix: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {".json": 0o666 & ~umask, ".params": 0o666 & ~umask,
                     ".states": 0o666 & ~umask}


@pytest.mark.parametrize("fail_on", [".states", ".params"])
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_failed_publication_leaves_no_params_without_its_states(tmp_path, monkeypatch,
                                                                  fail_on, overwrite):
    mod = _trained_module()
    prefix = str(tmp_path / "m")
    if overwrite:
        mod.save_checkpoint(prefix, 2, save_optimizer_states=True)
    real_replace = os.replace

    def replace(src, dst):
        if os.path.basename(dst) == "m-0002" + fail_on:      # the unit's file, no temp
            raise OSError(28, "No space left on device (simulated)")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="simulated"):
        mod.save_checkpoint(prefix, 2, save_optimizer_states=True)
    monkeypatch.setattr(os, "replace", real_replace)
    # nothing of the failed unit stands, and no temp file is left
    assert not os.path.exists(prefix + "-0002.params")
    assert not os.path.exists(prefix + "-0002.states")
    assert _temps(tmp_path) == []
    with pytest.raises(MXNetError, match=r"m-0002\.params'.* missing") as err:
        _load_with_states(prefix, 2)
    assert "no checkpoint was saved for this epoch" in str(err.value)
    # and the next save of that epoch makes a whole checkpoint
    mod.save_checkpoint(prefix, 2, save_optimizer_states=True)
    assert _load_with_states(prefix, 2)._updater.states


def test_load_names_the_missing_states_file(tmp_path):
    mod = _trained_module()
    prefix = str(tmp_path / "m")
    mod.save_checkpoint(prefix, 1)          # no states
    with pytest.raises(MXNetError) as err:
        mx.mod.Module.load(prefix, 1, load_optimizer_states=True)
    msg = str(err.value)
    assert repr(prefix + "-0001.states") in msg and "is missing" in msg
    assert "load_optimizer_states=False" in msg
    mx.mod.Module.load(prefix, 1)           # without states it loads
    # a .states without its .params: an interrupted save
    mod.save_checkpoint(prefix, 3, save_optimizer_states=True)
    os.unlink(prefix + "-0003.params")
    with pytest.raises(MXNetError, match="interrupted"):
        mx.mod.Module.load(prefix, 3, load_optimizer_states=True)
    os.unlink(prefix + "-symbol.json")
    with pytest.raises(MXNetError, match=r"m-symbol\.json' is missing"):
        mx.mod.Module.load(prefix, 1)


def test_a_checkpoint_without_states_removes_an_older_states_file(tmp_path):
    mod = _trained_module()
    prefix = str(tmp_path / "m")
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    mod.save_checkpoint(prefix, 1)
    assert not os.path.exists(prefix + "-0001.states")
    assert os.path.exists(prefix + "-0001.params")


def test_temp_files_of_dead_processes_are_swept_and_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    name = os.path.basename(atomic.temp_path(str(tmp_path / "m-0001.params")))
    mine = tmp_path / name
    theirs = tmp_path / name.replace(f".{os.getpid()}.", f".{pid}.", 1)
    alive = tmp_path / name.replace(f".{os.getpid()}.", ".1.", 1)       # init is alive
    other_host = tmp_path / name.replace(atomic._host_tag(), "0" * 8).replace(
        f".{os.getpid()}.", f".{pid}.", 1)
    unrelated = tmp_path / ".tmp-something-else"
    for p in (mine, theirs, alive, other_host, unrelated):
        p.write_bytes(b"x" * 100)
    assert atomic.sweep_temps(str(tmp_path)) == [str(theirs)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (mine, alive, other_host, unrelated))


_WORKER = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, {root!r})
    import module_api as mx
    net = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3, name="fc")
    mod = mx.mod.Module(mx.sym.SoftmaxOutput(net, name="softmax"))
    mod.bind([("data", (4, 5))], [("softmax_label", (4,))])
    mod.init_params(mx.init.Uniform(0.5))
    mod.init_optimizer(optimizer="sgd", optimizer_params={{"learning_rate": 0.1,
                                                           "momentum": 0.9}})
    mod.forward_backward(mx.io.DataBatch([mx.nd.ones((4, 5))], [mx.nd.array([0, 1, 2, 0])]))
    mod.update()
    prefix = {prefix!r}
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    mod.save_checkpoint(prefix, 2, save_optimizer_states=True)
    os.environ["SYMTRITON_TEST_PAUSE_AT"] = {stage!r}
    mod.save_checkpoint(prefix, 2, save_optimizer_states=True)     # killed in here
    print("not killed", flush=True)
""")


def _kill_at(stage, prefix, timeout=240):
    """Run a process that saves epochs 1 and 2, then saves epoch 2 again and is killed
    with SIGKILL at ``stage`` of that save; returns its output."""
    env = dict(os.environ, PYTHONPATH=ROOT, SYMTRITON_TEST_PAUSE_SECONDS="120")
    proc = subprocess.Popen([sys.executable, "-c", _WORKER.format(root=ROOT, prefix=prefix,
                                                                   stage=stage)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines, deadline = [], time.monotonic() + timeout
    try:
        for line in proc.stdout:
            lines.append(line)
            if f"symtriton-test: paused at {stage}" in line:
                proc.send_signal(signal.SIGKILL)
                break
            if time.monotonic() > deadline:
                break
    finally:
        if proc.poll() is None and proc.returncode is None:
            proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "".join(lines)[-3000:]
    return "".join(lines)


@pytest.mark.slow
@pytest.mark.parametrize("stage", atomic.PAUSE_STAGES)
def test_sigkill_during_save_checkpoint_leaves_whole_epochs_or_none(tmp_path, stage):
    prefix = str(tmp_path / "m")
    _kill_at(stage, prefix)
    left = _temps(tmp_path)
    # the temp files not yet renamed stay behind: what the next save must sweep
    assert len(left) == (1 if stage == "published-1" else 2), left
    # epoch 1 was complete before: it loads with its states
    assert _load_with_states(prefix, 1)._updater.states
    # epoch 2 was being rewritten: still whole (killed before the old files went) or
    # cleanly absent (no .params, and load says why)
    if stage == "written":
        assert _load_with_states(prefix, 2)._updater.states
    else:
        assert not os.path.exists(prefix + "-0002.params")
        with pytest.raises(MXNetError, match=r"m-0002\.params'.* missing"):
            _load_with_states(prefix, 2)
    # the next save sweeps what the killed process left
    _trained_module().save_checkpoint(prefix, 3, save_optimizer_states=True)
    assert _temps(tmp_path) == []
    epochs = {int(p.stem.rsplit("-", 1)[1]) for p in tmp_path.glob("m-*.params")}
    for epoch in epochs:
        mod = _load_with_states(prefix, epoch)
        assert sorted(mod._updater.states) == [0, 1]
        np.testing.assert_equal(mod._updater.states[0].shape, (3, 5))


def test_temp_files_of_earlier_versions_are_swept_by_the_next_save(tmp_path):
    """Before this version a killed save left ``.tmp-XXXXXXXX-m-0001.params`` (mkstemp)
    and ``m-0001.states.tmp.<pid>``: the next save removes those of this prefix that
    are an hour old, or whose process is gone."""
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout)
    old = tmp_path / ".tmp-ab12CD_9-m-0001.params"
    fresh = tmp_path / ".tmp-zz12CD_9-m-0002.params"
    orphan = tmp_path / f"m-0001.states.tmp.{dead}"
    other = tmp_path / ".tmp-ab12CD_9-other-0001.params"
    for p in (old, fresh, orphan, other):
        p.write_bytes(b"x" * 1000)
    hour_ago = time.time() - 3700
    os.utime(old, (hour_ago, hour_ago))
    os.utime(other, (hour_ago, hour_ago))
    _trained_module().save_checkpoint(str(tmp_path / "m"), 3, save_optimizer_states=True)
    assert not old.exists() and not orphan.exists()
    assert fresh.exists() and other.exists()      # too young; another prefix
