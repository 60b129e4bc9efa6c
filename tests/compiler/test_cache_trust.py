"""A cache directory is code: who may write it, and ``symtriton cache verify --rebuild``.

* the loader refuses kernel files and program entries that someone else could have
  written (group- or world-writable, or another user's), naming the path and the fix;
* the directories and files symtriton creates pass, even under ``umask 002``;
* a kernel is imported from its checked bytes only (a planted ``.pyc`` never runs);
* ``verify`` never reads a manifest path that leads outside the directory;
* ``verify --rebuild`` regenerates everything from the recorded compile inputs and
  reports planted, changed and missing files, even when every checksum agrees.
"""
import builtins
import hashlib
import importlib.util
import json
import marshal
import os
import shutil
import stat
import subprocess
import sys

import pytest

from compiler.artifacts import aot, cache, cache_trust
from compiler import cli
from compiler.artifacts.cache_trust import UntrustedCacheError
from compiler.artifacts.compile import compile_symbol
from runtime import launcher
from tests.models import mlp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHAPES = [("data", [4, 6]), ("softmax_label", [4])]
POSIX_MODES = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and modes")


@pytest.fixture(autouse=True)
def _fresh_checks():
    cache_trust.forget_checks()      # tests change permissions after a first check
    yield
    cache_trust.forget_checks()


def _compile_dir(out, targets=("cpu", "interpret")):
    aot.compile_aot(symbol=mlp(hidden=(8,)), shapes=SHAPES, train=True, optimizer="sgd",
                    optimizer_params={"momentum": 0.9}, targets=targets, out=out,
                    progress=False)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A clean AOT directory (cpu and interpret, training, SGD momentum)."""
    return _compile_dir(tmp_path_factory.mktemp("trust") / "aot")


@pytest.fixture
def clean(built, tmp_path):
    """A private copy of the clean AOT directory (modes kept)."""
    return shutil.copytree(built, tmp_path / "aot", symlinks=True)


def _verify(capsys, path, rebuild=True):
    capsys.readouterr()
    rc = cli.main(["cache", "verify"] + (["--rebuild"] if rebuild else []) + [str(path)])
    out = capsys.readouterr()
    return rc, out.out + out.err


def _plant_kernel(kernels, marker, mode=0o644):
    """A kernel file that hashes to its own name and, when imported, writes ``marker``."""
    source = (f"import pathlib\npathlib.Path({str(marker)!r}).write_text('planted code ran')\n"
              f"def bind(*flat):\n    return lambda: None\n")
    h = hashlib.sha256(source.encode()).hexdigest()[:24]
    path = kernels / f"k_{h}.py"
    path.write_text(source)
    os.chmod(path, mode)
    return h, path


@pytest.fixture
def use_cache(monkeypatch):
    def use(path):
        monkeypatch.setenv("SYMTRITON_CACHE_DIR", str(path))
        cache.clear_memory_cache()
    yield use
    cache.clear_memory_cache()


# ----------------------------------------------------------------- planted files

@POSIX_MODES
def test_planted_kernel_is_refused_by_the_loader_and_reported_by_rebuild(
        clean, tmp_path, use_cache, capsys):
    marker = tmp_path / "ran"
    # someone in the group got in: the directory and the file they wrote are group-writable
    os.chmod(clean / "kernels", 0o775)
    h, path = _plant_kernel(clean / "kernels", marker, mode=0o664)
    use_cache(clean)
    with pytest.raises(UntrustedCacheError) as err:
        launcher.load_module(h)
    msg = str(err.value)
    assert str(path) in msg and "group-writable" in msg and "mode 0o664" in msg
    assert f"chmod go-w {path}" in msg and "SYMTRITON_CACHE_DIR" in msg
    assert not marker.exists()
    if os.getuid() == 0:     # planted by another user: refused for its owner alone
        os.chmod(path, 0o644)
        os.chown(path, 65534, 65534)
        with pytest.raises(UntrustedCacheError, match="owned by uid 65534"):
            launcher.load_module(h)
        assert not marker.exists()
    rc, out = _verify(capsys, clean)
    assert rc == 1
    assert f"BAD kernels/k_{h}.py: not produced by the rebuild" in out
    assert "BAD kernels: group-writable" in out


def test_planted_kernel_with_our_permissions_is_reported_by_rebuild(clean, tmp_path, capsys):
    # the loader cannot tell it from ours (whoever can write the directory can run
    # code); the rebuild can
    h, _ = _plant_kernel(clean / "kernels", tmp_path / "ran")
    rc, out = _verify(capsys, clean, rebuild=False)
    assert rc == 0, out
    rc, out = _verify(capsys, clean)
    assert rc == 1 and f"BAD kernels/k_{h}.py: not produced by the rebuild" in out
    assert "1 bad entry" in out


def test_swapped_kernel_with_consistent_checksums_is_caught_only_by_rebuild(clean, capsys):
    """Replace a kernel and fix every checksum (entry manifests, the AOT manifest):
    ``verify`` passes, ``verify --rebuild`` names every changed file."""
    m = json.loads((clean / aot.MANIFEST).read_text())
    old = next(h for p in m["programs"] if p["target"] == "cpu" for h in p["kernels"])
    source = (clean / "kernels" / f"k_{old}.py").read_text() + "# changed\n"
    new = hashlib.sha256(source.encode()).hexdigest()[:24]
    (clean / "kernels" / f"k_{new}.py").write_text(source)
    os.unlink(clean / "kernels" / f"k_{old}.py")
    del m["files"][f"kernels/k_{old}.py"]
    m["files"][f"kernels/k_{new}.py"] = hashlib.sha256(source.encode()).hexdigest()
    changed = []
    for p in m["programs"]:
        if old not in p["kernels"]:
            continue
        entry = clean / "programs" / p["key"]
        body = (entry / "program.json").read_text().replace(old, new)
        (entry / "program.json").write_text(body)
        em = json.loads((entry / "manifest.json").read_text())
        em["files"]["program.json"] = hashlib.sha256(body.encode()).hexdigest()
        del em["files"][f"kernel:{old}"]
        em["files"][f"kernel:{new}"] = hashlib.sha256(source.encode()).hexdigest()
        (entry / "manifest.json").write_text(json.dumps(em, sort_keys=True))
        for name in ("program.json", "manifest.json"):
            rel = f"programs/{p['key']}/{name}"
            m["files"][rel] = hashlib.sha256((entry / name).read_bytes()).hexdigest()
            changed.append(rel)
    (clean / aot.MANIFEST).write_text(json.dumps(m))
    rc, out = _verify(capsys, clean, rebuild=False)
    assert rc == 0, out
    rc, out = _verify(capsys, clean)
    assert rc == 1
    assert f"BAD kernels/k_{new}.py: not produced by the rebuild" in out
    assert f"BAD kernels/k_{old}.py: missing (the rebuild produces it)" in out
    for rel in changed:
        assert f"BAD {rel}: differs from the rebuild" in out


# ----------------------------------------------------------------- clean directories

def test_clean_aot_directory_passes_rebuild(clean, capsys):
    rc, out = _verify(capsys, clean)
    assert rc == 0, out
    assert "a rebuild from the recorded compile inputs gives every file byte for byte" in out
    m = json.loads((clean / aot.MANIFEST).read_text())
    assert m["format"] == aot.FORMAT == 2
    for p in m["programs"]:      # what the rebuild reads: the compile_symbol arguments
        rec = p["compile"]
        assert rec["symbol"] in m["files"] and rec["target"] == p["target"]
        assert rec["for_training"] and rec["grad_req"]["fc1_weight"] == "write"
        assert rec["grad_req"]["data"] == "null" and rec["shapes"]["data"] == [4, 6]


def test_clean_cuda90_directory_passes_rebuild_in_a_fresh_process(tmp_path):
    """cubins too, rebuilt by a process that compiled nothing before (no in-process memo)."""
    out = _compile_dir(tmp_path / "aot", targets=("cuda:90",))
    assert list((out / "cubin" / "cuda_90").glob("*.cubin"))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "compiler", "cache", "verify", "--rebuild",
                        str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]


def test_old_manifest_without_compile_inputs_is_reported(clean, capsys):
    m = json.loads((clean / aot.MANIFEST).read_text())
    m["format"] = 1
    for p in m["programs"]:
        del p["compile"]
    (clean / aot.MANIFEST).write_text(json.dumps(m))
    rc, out = _verify(capsys, clean)
    assert rc == 1 and "does not record the compile inputs" in out


# ----------------------------------------------------------------- who may write

@POSIX_MODES
def test_group_writable_cache_directory_or_entry_is_refused(tmp_path, use_cache):
    root = tmp_path / "cache"
    use_cache(root)
    s = mlp(hidden=(8,))

    def compile_it():
        return compile_symbol(s, {"data": (4, 6), "softmax_label": (4,)}, target="cpu")

    prog = compile_it()
    cache.clear_memory_cache()
    os.chmod(root, 0o775)
    cache_trust.forget_checks()
    with pytest.raises(UntrustedCacheError) as err:
        compile_it()
    assert f"{root} is group-writable (mode 0o775)" in str(err.value)
    assert f"chmod go-w {root}" in str(err.value)
    os.chmod(root, 0o755)
    cache_trust.forget_checks()
    entry = root / "programs" / next(n for n in os.listdir(root / "programs"))
    os.chmod(entry / "program.json", 0o666)
    with pytest.raises(UntrustedCacheError, match="group- and world-writable"):
        compile_it()
    os.chmod(entry / "program.json", 0o644)
    assert compile_it().launches == prog.launches          # trusted again: a disk hit
    os.chmod(root / "kernels", 0o777)
    cache_trust.forget_checks()
    h, _ = _plant_kernel(root / "kernels", tmp_path / "ran")
    with pytest.raises(UntrustedCacheError, match=str(root / "kernels")):
        launcher.load_module(h)
    assert not (tmp_path / "ran").exists()


@POSIX_MODES
def test_what_symtriton_creates_passes_under_umask_002(tmp_path, use_cache, capsys):
    old = os.umask(0o002)
    try:
        use_cache(tmp_path / "a" / "cache")       # missing parents are created too
        compile_symbol(mlp(hidden=(8,)), {"data": (4, 6), "softmax_label": (4,)},
                       target="cpu")
        out = _compile_dir(tmp_path / "b" / "aot")
    finally:
        os.umask(old)
    for top in (tmp_path / "a", tmp_path / "b"):
        for folder, dirs, files in os.walk(top):
            for name in [""] + dirs + files:
                mode = os.lstat(os.path.join(folder, name)).st_mode
                assert not mode & 0o022, (os.path.join(folder, name), oct(mode))
    cache.clear_memory_cache()
    prog = compile_symbol(mlp(hidden=(8,)), {"data": (4, 6), "softmax_label": (4,)},
                          target="cpu")
    launcher.load_module(prog.launches[0].kernel)
    rc, text = _verify(capsys, out)
    assert rc == 0, text


def test_a_kernel_runs_its_checked_source_never_a_planted_pyc(tmp_path, use_cache):
    root = tmp_path / "cache"
    cache_trust.make_dirs(root / "kernels")
    source = f"RAN = 'checked source'  # {tmp_path}\ndef bind(*flat):\n    return None\n"
    h = hashlib.sha256(source.encode()).hexdigest()[:24]
    path = root / "kernels" / f"k_{h}.py"
    path.write_text(source)
    # a pyc whose header matches the source's mtime and size: a plain import runs it
    st = os.stat(path)
    code = compile("RAN = 'planted pyc'\ndef bind(*flat):\n    return None\n", str(path), "exec")
    pyc = importlib.util.cache_from_source(str(path))
    os.makedirs(os.path.dirname(pyc))
    with open(pyc, "wb") as f:
        f.write(importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
                + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little") + marshal.dumps(code))
    use_cache(root)
    assert launcher.load_module(h).RAN == "checked source"
    assert os.listdir(os.path.dirname(pyc)) == [os.path.basename(pyc)]   # none written


def test_make_dirs_never_loosens_existing_directories(tmp_path):
    os.mkdir(tmp_path / "mine", 0o700)
    cache_trust.make_dirs(tmp_path / "mine" / "x" / "y")
    assert stat.S_IMODE(os.stat(tmp_path / "mine").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "mine" / "x").st_mode) & 0o022 == 0


# ----------------------------------------------------------------- paths leading out

def test_manifest_paths_outside_the_directory_are_reported_and_never_read(
        clean, tmp_path, monkeypatch, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("not yours")
    digest = hashlib.sha256(b"not yours").hexdigest()
    os.symlink(secret, clean / "kernels" / "k_escape.py")
    fake_key = "f" * 32                   # an entry that is a symlink out of the directory
    (outside / "entry").mkdir()
    (outside / "entry" / "manifest.json").write_text("{}")
    os.symlink(outside / "entry", clean / "programs" / fake_key)
    m = json.loads((clean / aot.MANIFEST).read_text())
    m["files"].update({"../outside/secret.txt": digest, str(secret): digest,
                       "kernels/k_escape.py": digest, "kernels/../../outside/secret.txt": digest})
    m["programs"][0]["compile"]["symbol"] = "symbols/../../outside/secret.txt"
    (clean / aot.MANIFEST).write_text(json.dumps(m))

    opened = []
    real_open = builtins.open

    def spy(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)):
            opened.append(os.path.realpath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    rc, out = _verify(capsys, clean)
    monkeypatch.setattr(builtins, "open", real_open)
    assert rc == 1
    assert "BAD ../outside/secret.txt: a path with '..'; not read" in out
    assert f"BAD {secret}: an absolute path; not read" in out
    assert "BAD kernels/../../outside/secret.txt: a path with '..'; not read" in out
    assert f"BAD kernels/k_escape.py: resolves to {secret}, outside" in out
    assert f"BAD programs/{fake_key}: resolves to {outside / 'entry'}, outside" in out
    assert f"BAD programs/{m['programs'][0]['key']}: its recorded compile inputs are " \
           f"unusable" in out
    assert not [p for p in opened if p.startswith(str(outside))], opened


# ----------------------------------------------------------------- a directory filled at run time

def _fill_at_run_time(root, use_cache):
    """Programs compiled by a process using ``root`` as SYMTRITON_CACHE_DIR (training on
    both cpu targets, inference on cpu)."""
    use_cache(root)
    s = mlp(hidden=(8,))
    shapes = {"data": (4, 6), "softmax_label": (4,)}
    grad_req = {n: ("null" if n in shapes else "write") for n in s.list_arguments()}
    for target in ("cpu", "interpret"):
        compile_symbol(s, shapes, for_training=True, grad_req=grad_req, target=target)
    compile_symbol(s, shapes, target="cpu")
    cache.clear_memory_cache()
    return s, shapes, grad_req


def test_verify_rebuild_passes_on_a_directory_filled_at_run_time(tmp_path, use_cache, capsys):
    root = tmp_path / "rc"
    _fill_at_run_time(root, use_cache)
    assert not (root / aot.MANIFEST).exists()
    entries = sorted((root / "programs").iterdir())
    assert len(entries) == 3
    for entry in entries:      # each entry records what it was compiled from
        rec = json.loads((entry / "manifest.json").read_text())["compile"]
        assert (root / rec["symbol"]).is_file()
        assert rec["shapes"]["fc1_weight"] == [8, 6]     # every argument's shape
    rc, out = _verify(capsys, root, rebuild=False)
    assert rc == 0, out
    rc, out = _verify(capsys, root)
    assert rc == 0, out
    assert "a rebuild of every entry from its recorded compile inputs" in out
    # a changed program is caught by the rebuild even with consistent checksums
    entry = entries[0]
    body = (entry / "program.json").read_text().replace('"forward_launches": ',
                                                        '"forward_launches": 1', 1)
    (entry / "program.json").write_text(body)
    em = json.loads((entry / "manifest.json").read_text())
    em["files"]["program.json"] = hashlib.sha256(body.encode()).hexdigest()
    (entry / "manifest.json").write_text(json.dumps(em, sort_keys=True))
    rc, out = _verify(capsys, root, rebuild=False)
    assert rc == 0, out
    rc, out = _verify(capsys, root)
    assert rc == 1 and f"BAD programs/{entry.name}/program.json: differs from the rebuild" in out


def _tamper_a_kernel(root):
    entry = sorted((root / "programs").iterdir())[0]
    h = next(k.split(":", 1)[1] for k in json.loads((entry / "manifest.json").read_text())
             ["files"] if k.startswith("kernel:"))
    path = root / "kernels" / f"k_{h}.py"
    original = path.read_text()
    path.write_text(original + "# changed\n")
    return entry, h, path, original


def test_a_changed_kernel_is_rebuilt_in_your_directory(tmp_path, use_cache, capsys):
    root = tmp_path / "rc"
    s, shapes, grad_req = _fill_at_run_time(root, use_cache)
    entry, h, path, original = _tamper_a_kernel(root)
    rc, out = _verify(capsys, root, rebuild=False)
    assert rc == 1
    assert f"BAD programs/{entry.name}: kernel {h} checksum mismatch" in out
    assert f"symtriton cache verify --rebuild --repair {root}" in out
    # the next run that needs it rebuilds it: the directory is yours
    for target in ("cpu", "interpret"):
        compile_symbol(s, shapes, for_training=True, grad_req=grad_req, target=target)
    compile_symbol(s, shapes, target="cpu")
    assert path.read_text() == original
    rc, out = _verify(capsys, root)
    assert rc == 0, out


def test_a_changed_kernel_in_someone_elses_directory_is_refused_with_the_repair(
        tmp_path, use_cache, capsys, monkeypatch):
    root = tmp_path / "rc"
    s, shapes, grad_req = _fill_at_run_time(root, use_cache)
    entry, h, path, original = _tamper_a_kernel(root)
    monkeypatch.setattr(cache_trust, "owned_by_user", lambda p: False)
    with pytest.raises(cache.MXNetError) as err:
        for target in ("cpu", "interpret"):
            compile_symbol(s, shapes, for_training=True, grad_req=grad_req, target=target)
    msg = str(err.value)
    assert f"kernel {h} checksum mismatch" in msg and "not rewritten" in msg
    assert f"symtriton cache verify --rebuild --repair {root}" in msg
    assert path.read_text() != original            # not rewritten
    rc, out = _verify(capsys, root)
    assert rc == 1
    capsys.readouterr()
    assert cli.main(["cache", "verify", "--repair", str(root)]) == 1
    assert "not to you: not repaired" in capsys.readouterr().out
    monkeypatch.undo()
    capsys.readouterr()
    assert cli.main(["cache", "verify", "--repair", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"REPAIRED kernels/k_{h}.py: differs from the rebuild" in out
    assert path.read_text() == original
    rc, out = _verify(capsys, root)
    assert rc == 0, out


def test_repair_replaces_a_changed_aot_entry_and_keeps_the_manifest_consistent(clean, capsys):
    m = json.loads((clean / aot.MANIFEST).read_text())
    key = m["programs"][0]["key"]
    (clean / "programs" / key / "program.json").write_text("{}")
    rc, out = _verify(capsys, clean, rebuild=False)
    assert rc == 1 and f"programs/{key}" in out
    capsys.readouterr()
    assert cli.main(["cache", "verify", "--repair", str(clean)]) == 0
    out = capsys.readouterr().out
    assert f"REPAIRED programs/{key}/program.json" in out
    rc, out = _verify(capsys, clean)
    assert rc == 0, out


# ----------------------------------------------------------------- locks/

@POSIX_MODES
def test_a_planted_symlink_under_locks_is_refused(tmp_path, use_cache):
    root = tmp_path / "rc"
    use_cache(root)
    s = mlp(hidden=(8,))
    shapes = {"data": (4, 6), "softmax_label": (4,)}
    key = aot.program_key(s, shapes, False, {}, False, "cpu")[0]
    cache_trust.make_dirs(root / "locks")
    victim = tmp_path / "outside" / "victim"
    victim.parent.mkdir()
    os.symlink(victim, root / "locks" / f"{key}.lock")
    with pytest.raises(UntrustedCacheError) as err:
        compile_symbol(s, shapes, target="cpu")
    assert "a symbolic link" in str(err.value) and f"{key}.lock" in str(err.value)
    assert not victim.exists()
    os.unlink(root / "locks" / f"{key}.lock")
    os.chmod(root / "locks", 0o777)
    cache_trust.forget_checks()
    with pytest.raises(UntrustedCacheError, match=r"locks is group- and world-writable"):
        compile_symbol(s, shapes, target="cpu")
    os.chmod(root / "locks", 0o755)
    cache_trust.forget_checks()
    compile_symbol(s, shapes, target="cpu")
    assert (root / "locks" / f"{key}.lock").is_file()
