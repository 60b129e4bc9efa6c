"""``symtriton cache verify [--rebuild [--repair]] DIR``: check a cache directory without
trusting it.

It works on a directory ``symtriton compile`` wrote (with its ``symtriton-manifest.json``)
and on one filled at run time through ``SYMTRITON_CACHE_DIR``: every program entry
records its compile inputs in its own ``manifest.json`` (``compile``), and the symbol
under ``symbols/``.

A cache directory is code (``compiler.artifacts.cache_trust``): copying one from another
machine means running what it holds. ``verify`` checks what can be checked cheaply,
``verify --rebuild`` proves the directory holds only what this compiler generates
from the symbols it lists.

``verify``:

* every path the manifest names must be relative, free of ``..`` and resolve (after
  symlinks) inside DIR; any other path is a problem and is never opened;
* the sha256 of every file the manifest lists, then every program entry
  (``cache_entries.verify_cache``: checksums, versions; nothing outside DIR is read);
* anything the runtime would refuse to load (``cache_trust.audit``: not owned by
  you or root, group- or world-writable, symlinks leading out of DIR).

``--rebuild`` also regenerates, in a private temporary directory, everything
``symtriton compile`` wrote, from the compile inputs the manifest records (format 2:
each program's symbol file under ``symbols/``, shapes, grad_req, mode and target;
the targets; the optimizer and its parameters), with the same code
(:func:`compiler.artifacts.aot.build_outputs`), and compares the two trees byte for byte.
Every file that differs, is missing, or is present but not produced by the rebuild
(a planted file, or one left by another compile) is a problem. Nothing from DIR is
imported or run: symbols are JSON read by ``symbol.load_json``, and a ``sym_gen``
the manifest names is never imported. One exception to byte for byte: a
``program.json`` records how long its compile took (``stats.pass_seconds``,
``stats.total_seconds``); the comparison takes those numbers from the stored file
(after checking that they are numbers under the same pass names) and compares every
other byte, and the entry's ``manifest.json`` against that file's checksum.

A directory filled at run time has no directory manifest: ``verify`` checks every
entry's checksums and versions, that every kernel and symbol file hashes to its own
name, and who may write the files; ``--rebuild`` compiles every entry again from the
compile inputs it records and compares the files the rebuild produces (other files,
such as kernels a process wrote for its optimizer, are checked by their names' hashes).

``--repair`` (with ``--rebuild``, in a directory that belongs to you): every file that
differs from the rebuild or is missing is replaced by the rebuilt one (a program entry
as a whole, by one rename), and the directory manifest's checksums follow. Files the
rebuild does not produce are reported, never removed (``symtriton cache prune``).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
from contextlib import contextmanager

from . import aot, cache_entries, cache_keys, cache_trust
from .atomic import atomic_write_bytes, atomic_write_text
from ..errors import MXNetError

_KEY = re.compile(r"[0-9a-f]{32}")
_SYMBOL_FILE = re.compile(re.escape(aot.SYMBOLS) + r"/[0-9a-f]{24}\.json")
_GRAD_REQS = ("write", "add", "null")


def safe_path(root, rel):
    """``(path, '')`` for a manifest path that stays inside ``root``, else ``(None, why)``.

    Refused: anything but a non-empty relative path, any ``..`` component, and a path
    that resolves (after symlinks) outside ``root``. Nothing is opened here.
    """
    if not isinstance(rel, str) or not rel:
        return None, "not a path"
    parts = rel.replace("\\", "/").split("/")
    if os.path.isabs(rel) or rel.startswith(("/", "\\")) or os.path.splitdrive(rel)[0]:
        return None, "an absolute path; not read"
    if ".." in parts:
        return None, "a path with '..'; not read"
    path = os.path.join(root, *parts)
    if not cache_trust.inside(path, root):
        return None, f"resolves to {os.path.realpath(path)}, outside {root}; not read"
    return path, ""


def verify_dir(root, rebuild: bool = False, repair: bool = False, repaired=None) -> list:
    """Problems in ``root`` as ``"relative path: what is wrong"`` strings (``[]``: none).

    Parameters
    ----------
    root : str
        A cache directory: written by ``symtriton compile``, or filled at run time.
    rebuild : bool
        Also regenerate everything from the recorded compile inputs and compare.
    repair : bool
        With ``rebuild``: replace every file that differs from the rebuild or is missing
        (only in a directory that belongs to the current user).
    repaired : list, optional
        Receives ``"relative path: what was wrong"`` for every file replaced.
    """
    repaired = repaired if repaired is not None else []
    if not os.path.lexists(os.path.join(root, aot.MANIFEST)):
        return _verify_runtime_dir(root, rebuild or repair, repair, repaired)
    path, why = safe_path(root, aot.MANIFEST)
    if path is None:
        return [f"{aot.MANIFEST}: {why}"]
    m = aot.read_manifest(root)
    if not isinstance(m, dict):
        return [f"{aot.MANIFEST}: not a JSON object"]
    problems = _check_files(root, m.get("files"))
    programs = m.get("programs")
    if not isinstance(programs, list) or not all(isinstance(p, dict) for p in programs):
        problems.append(f"{aot.MANIFEST}: 'programs' is not a list of objects")
        programs = []
    for p in programs:
        key = p.get("key")
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            problems.append(f"{aot.MANIFEST}: program key {key!r} is not 32 hex digits")
        elif not os.path.isdir(os.path.join(root, "programs", key)):
            problems.append(f"programs/{key}: missing")
    seen = {x.split(":", 1)[0] for x in problems}
    for pr in cache_entries.verify_cache(root):
        if f"programs/{pr.split(':', 1)[0]}" not in seen:
            problems.append(f"programs/{pr}")
    problems += [f"{rel}: {why}" for rel, why in cache_trust.audit(root)]
    if rebuild or repair:
        problems += rebuild_problems(root, m, programs, repair, repaired)
    return _unrepaired(problems, repaired)


def _unrepaired(problems, repaired) -> list:
    """``problems`` without those of the files that were repaired (and without repeats)."""
    fixed = {r.split(":", 1)[0] for r in repaired}
    fixed_entries = {"/".join(r.split("/")[:2]) for r in fixed if r.startswith("programs/")}
    fixed_kernels = {r[len("kernels/k_"):-3] for r in fixed if r.startswith("kernels/k_")}
    out = []
    for pr in dict.fromkeys(problems):
        rel = pr.split(":", 1)[0]
        kernel_fixed = rel.startswith("programs/") and \
            any(f"kernel {h} " in pr for h in fixed_kernels)
        if rel in fixed or rel in fixed_entries or kernel_fixed:
            continue
        out.append(pr)
    return out


# ----------------------------------------------------------------- a run-time directory

def _verify_runtime_dir(root, rebuild, repair, repaired) -> list:
    """:func:`verify_dir` of a directory without a directory manifest (run-time cache)."""
    problems = [f"programs/{pr}" for pr in cache_entries.verify_cache(root)]
    problems += _misnamed(root)
    problems += [f"{rel}: {why}" for rel, why in cache_trust.audit(root)]
    if rebuild:
        programs = _entry_records(root, problems)
        jobs = _jobs(root, programs, problems)
        problems += _rebuild_and_compare(root, jobs, None, [], repair, repaired,
                                         only_rebuilt=True)
    return _unrepaired(problems, repaired)


def _misnamed(root) -> list:
    """Kernel and symbol files whose content does not hash to their name."""
    problems = []
    for folder, pattern in (("kernels", re.compile(r"k_([0-9a-f]{24})\.py")),
                            (cache_entries.SYMBOLS, re.compile(r"([0-9a-f]{24})\.json"))):
        path = os.path.join(root, folder)
        if not os.path.isdir(path) or not cache_trust.inside(path, root):
            continue
        for name in sorted(os.listdir(path)):
            m = pattern.fullmatch(name)
            rel = f"{folder}/{name}"
            full = os.path.join(path, name)
            if m is None or not cache_trust.inside(full, root) or not os.path.isfile(full):
                continue        # not symtriton's, or a link out: the audit reports it
            if aot.sha_file(full)[:24] != m.group(1):
                problems.append(f"{rel}: its content does not hash to its name (changed "
                                f"after it was written)")
    return problems


def _entry_records(root, problems) -> list:
    """``[{"key", "compile"}]`` of the program entries that record their compile inputs."""
    programs = os.path.join(root, "programs")
    out = []
    for key in sorted(os.listdir(programs)) if os.path.isdir(programs) else []:
        if key.startswith(".") or not _KEY.fullmatch(key):
            continue
        path, why = safe_path(root, f"programs/{key}/manifest.json")
        if path is None:
            continue            # reported by cache_entries.verify_cache
        try:
            with open(path, encoding="utf-8") as f:
                rec = json.load(f).get("compile")
        except (OSError, ValueError, AttributeError):
            continue            # reported by cache_entries.verify_cache
        if not isinstance(rec, dict):
            problems.append(f"programs/{key}: records no compile inputs (written by an older "
                            f"symtriton), so it cannot be rebuilt; remove it (the next run "
                            f"that needs it compiles it again)")
            continue
        out.append({"key": key, "compile": rec})
    return out


def _check_files(root, files) -> list:
    if not isinstance(files, dict):
        return [f"{aot.MANIFEST}: 'files' is not an object"]
    problems = []
    for rel, digest in sorted(files.items()):
        path, why = safe_path(root, rel)
        if path is None:
            problems.append(f"{rel}: {why}")
            continue
        try:
            if aot.sha_file(path) != digest:
                problems.append(f"{rel}: checksum mismatch")
        except OSError as exc:
            problems.append(f"{rel}: {exc.strerror or exc}")
    return problems


# ----------------------------------------------------------------- --rebuild

def rebuild_problems(root, m, programs, repair=False, repaired=None) -> list:
    """Regenerate everything ``m`` records into a temporary directory; compare with ``root``
    (and, with ``repair``, replace what differs)."""
    if m.get("format") != aot.FORMAT or any("compile" not in p for p in programs):
        return [f"{aot.MANIFEST}: format {m.get('format')!r} does not record the compile "
                f"inputs (format {aot.FORMAT} does); recompile the directory with "
                f"'symtriton compile' to make it checkable"]
    built = (m.get("versions") or {}).get("cache") if isinstance(m.get("versions"), dict) \
        else None
    ours = cache_keys._versions()
    if built != ours:
        diff = ", ".join(f"{k} {(built or {}).get(k)!r} != {v!r}" for k, v in sorted(ours.items())
                         if (built or {}).get(k) != v)
        return [f"{aot.MANIFEST}: built with other versions ({diff}); a rebuild needs the "
                f"symtriton checkout, templates and triton it was built with"]
    problems = []
    jobs = _jobs(root, programs, problems)
    targets, optimizer = _targets(m, problems), m.get("optimizer")
    if optimizer is not None and not (isinstance(optimizer, dict)
                                      and isinstance(optimizer.get("name"), str)
                                      and isinstance(optimizer.get("params"), dict)):
        problems.append(f"{aot.MANIFEST}: 'optimizer' is not {{name, params}}")
        optimizer = None
    problems += _rebuild_and_compare(root, jobs, optimizer, targets, repair,
                                     repaired if repaired is not None else [], manifest=m)
    return problems


def _rebuild_and_compare(root, jobs, optimizer, targets, repair, repaired, manifest=None,
                         only_rebuilt=False) -> list:
    """Build ``jobs`` (and the optimizer's kernels, the cubins of ``targets``) into a
    temporary directory, compare with ``root``; with ``repair`` replace what differs."""
    problems = []
    tmp = tempfile.mkdtemp(prefix="symtriton-rebuild-")
    try:
        with _building_in(tmp):
            aot.build_outputs(tmp, jobs, (optimizer or {}).get("name"),
                              (optimizer or {}).get("params"), targets)
        found = compare_trees(root, tmp, only_rebuilt=only_rebuilt)
        if repair:
            found = _repair(root, tmp, found, repaired, manifest)
        problems += found
    except MXNetError as exc:
        problems.append(f"{aot.MANIFEST if manifest is not None else 'programs'}: the rebuild "
                        f"failed: {' '.join(str(exc).split())}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return problems


_REPAIRABLE = (": differs from the rebuild", ": missing (the rebuild produces it)")


def _repair(root, rebuilt, problems, repaired, manifest) -> list:
    """Replace the files of ``problems`` that differ from ``rebuilt`` or are missing;
    return the problems left. Only in a directory that belongs to this user."""
    fixable = [p for p in problems if p.endswith(_REPAIRABLE)]
    if not fixable:
        return problems
    if not cache_trust.owned_by_user(root):
        return problems + [f".: belongs to {cache_trust.owner_of(root)}, not to you: not "
                           f"repaired; its owner repairs it with 'symtriton cache verify "
                           f"--rebuild --repair {root}'"]
    real = os.path.realpath(root)
    entries, files = set(), []
    for pr in fixable:
        rel = pr.split(":", 1)[0]
        parts = rel.split("/")
        if parts[0] == "programs" and len(parts) == 3:
            entries.add(parts[1])
        else:
            files.append(rel)
    done = []
    for rel in files:
        with open(os.path.join(rebuilt, *rel.split("/")), "rb") as f:
            data = f.read()
        cache_trust.make_dirs(os.path.dirname(os.path.join(real, *rel.split("/"))))
        atomic_write_bytes(os.path.join(real, *rel.split("/")), data, cache_trust.FILE_MODE)
        done.append(rel)
    for key in sorted(entries):
        _replace_entry(real, rebuilt, key)
        done += [f"programs/{key}/{name}" for name in
                 sorted(os.listdir(os.path.join(rebuilt, "programs", key)))]
    if manifest is not None:
        files_map = manifest.get("files") if isinstance(manifest.get("files"), dict) else {}
        for rel in done:
            if rel in files_map:
                files_map[rel] = aot.sha_file(os.path.join(real, *rel.split("/")))
        atomic_write_text(os.path.join(real, aot.MANIFEST),
                          json.dumps(manifest, indent=1, sort_keys=True) + "\n",
                          cache_trust.FILE_MODE)
    why = {p.split(":", 1)[0]: p.split(":", 1)[1].strip() for p in fixable}
    repaired += [f"{rel}: {why.get(rel, 'replaced with its entry')}" for rel in done]
    done_set = set(done)
    return [p for p in problems if p.split(":", 1)[0] not in done_set]


def _replace_entry(real_root, rebuilt, key):
    """Put the rebuilt entry ``key`` in place by one rename (the old one set aside)."""
    parent = os.path.join(real_root, "programs")
    cache_trust.make_dirs(parent)
    tmp = tempfile.mkdtemp(dir=parent, prefix=f".tmp-{key}-repair-")
    os.chmod(tmp, cache_trust.DIR_MODE)
    src = os.path.join(rebuilt, "programs", key)
    for name in sorted(os.listdir(src)):
        with open(os.path.join(src, name), "rb") as f:
            data = f.read()
        atomic_write_bytes(os.path.join(tmp, name), data, cache_trust.FILE_MODE)
    entry = os.path.join(parent, key)
    aside = None
    if os.path.lexists(entry):
        aside = f"{tmp}-old"
        os.rename(entry, aside)
    os.rename(tmp, entry)
    if aside is None:
        return
    if os.path.islink(aside) or not os.path.isdir(aside):
        os.unlink(aside)
    else:
        shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def _building_in(tmp):
    """This process compiles into ``tmp``: every program is built (never read from a
    cache, in memory or on disk), and ``SYMTRITON_OFFLINE`` does not apply to it."""
    names = ("SYMTRITON_CACHE_DIR", "SYMTRITON_FORCE_RECOMPILE", "SYMTRITON_OFFLINE")
    saved = {n: os.environ.get(n) for n in names}
    os.environ.update(SYMTRITON_CACHE_DIR=tmp, SYMTRITON_FORCE_RECOMPILE="1")
    os.environ.pop("SYMTRITON_OFFLINE", None)
    try:
        yield
    finally:
        for n, v in saved.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


def _targets(m, problems) -> list:
    from .compile import check_target
    out = []
    for t in m.get("targets") if isinstance(m.get("targets"), list) else []:
        try:
            out.append(check_target(t))
        except (MXNetError, AttributeError, TypeError):
            problems.append(f"{aot.MANIFEST}: target {t!r} is not one symtriton compiles for")
    return out


def _jobs(root, programs, problems) -> list:
    """The :func:`aot.build_outputs` jobs of the recorded programs whose inputs are sound
    and give their recorded key; each other program is a problem."""
    symbols, jobs = {}, []
    for p in programs:
        key = p.get("key")
        try:
            call = _call(root, p["compile"], symbols)
            got = aot.program_key(*call)[0]
        except (MXNetError, OSError, KeyError, TypeError, ValueError, AttributeError) as exc:
            problems.append(f"programs/{key}: its recorded compile inputs are unusable "
                            f"({' '.join(str(exc).split())}); not rebuilt")
            continue
        if got != key:
            problems.append(f"programs/{key}: its recorded compile inputs give key {got}, "
                            f"so this entry is not what they compile to")
            continue
        jobs.append({"key": key, "target": call[5], "compile": p["compile"], "_call": call})
    return jobs


def _call(root, rec, symbols) -> tuple:
    """``compile_symbol`` arguments from a manifest ``compile`` record (checked)."""
    from .. import symbol as sym_mod
    from .compile import check_target
    from ..ir.dtypes import check_dtype
    rel = rec["symbol"]
    if not isinstance(rel, str) or not _SYMBOL_FILE.fullmatch(rel):
        raise ValueError(f"symbol file {rel!r} is not {aot.SYMBOLS}/<24 hex digits>.json")
    if rel not in symbols:
        path, why = safe_path(root, rel)
        if path is None:
            raise ValueError(f"{rel}: {why}")
        with open(path, encoding="utf-8") as f:
            symbols[rel] = sym_mod.load_json(f.read())
    shapes = {str(k): tuple(_dim(d) for d in v) for k, v in rec["shapes"].items()}
    grad_req = {str(k): v for k, v in rec["grad_req"].items()}
    if any(v not in _GRAD_REQS for v in grad_req.values()):
        raise ValueError(f"grad_req values must be {', '.join(_GRAD_REQS)}")
    flags = (rec["for_training"], rec["is_train"])
    if not all(isinstance(f, bool) for f in flags):
        raise ValueError("for_training and is_train must be true or false")
    dtypes = {str(k): check_dtype(str(k), v, "dtypes") for k, v in rec.get("dtypes", {}).items()}
    loss_scale = rec.get("loss_scale", False)
    if rec.get("np_shape"):
        raise ValueError("it was compiled under NumPy shape semantics, which a rebuild "
                         "does not take")
    if not isinstance(loss_scale, bool):
        raise ValueError("loss_scale must be true or false")
    return (symbols[rel], shapes, flags[0], grad_req, flags[1], check_target(rec["target"]),
            dtypes, loss_scale)


def _dim(d) -> int:
    if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
        raise ValueError(f"shape dimension {d!r} is not a positive integer")
    return d


# ----------------------------------------------------------------- comparing

def _files(root) -> dict:
    """``{relative path: lstat}`` of everything under ``root`` but the AOT manifest, lock
    files and builders' markers (empty; a missing one is made again; their trust is the
    audit's) and directories; symlinks are listed, never followed."""
    out = {}
    real = os.path.realpath(root)
    for folder, dirs, files in os.walk(real):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                continue
            rel = os.path.relpath(path, real).replace(os.sep, "/")
            if rel != aot.MANIFEST and not (rel.startswith("locks/")
                                            and rel.endswith((".lock", ".building"))
                                            and stat.S_ISREG(st.st_mode)):
                out[rel] = st
    return out


def compare_trees(root, rebuilt, only_rebuilt=False) -> list:
    """Every file of ``root`` that differs from ``rebuilt``, is missing, or (unless
    ``only_rebuilt``) is not in it."""
    stored, made = _files(root), _files(rebuilt)
    if only_rebuilt:
        stored = {rel: st for rel, st in stored.items() if rel in made}
    real = os.path.realpath(root)
    problems, expected_program = [], {}
    # program.json before manifest.json: the entry manifest holds the program's checksum
    for rel in sorted(set(stored) | set(made), key=lambda r: (r.endswith("manifest.json"), r)):
        if rel not in made:
            problems.append(f"{rel}: not produced by the rebuild (planted, or left by another "
                            f"compile); remove it, e.g. with 'symtriton cache prune'")
            continue
        if rel not in stored:
            problems.append(f"{rel}: missing (the rebuild produces it)")
            continue
        if not stat.S_ISREG(stored[rel].st_mode):
            problems.append(f"{rel}: not a regular file (symtriton writes none); not read")
            continue
        with open(os.path.join(real, rel), "rb") as f:
            have = f.read()
        with open(os.path.join(rebuilt, rel), "rb") as f:
            want = f.read()
        entry, _, name = rel.rpartition("/")
        if entry.startswith("programs/") and name == "program.json":
            want = _with_stored_timings(want, have)
            expected_program[entry] = want
        elif entry.startswith("programs/") and name == "manifest.json" \
                and entry in expected_program:
            want = _with_program_checksum(want, expected_program[entry])
        if have != want:
            problems.append(f"{rel}: differs from the rebuild")
    return problems


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _with_stored_timings(built: bytes, stored: bytes) -> bytes:
    """The rebuilt ``program.json`` carrying the stored compile-time measurements, when
    the stored ones are numbers under the same pass names (else the rebuilt bytes)."""
    try:
        doc, old = json.loads(built), json.loads(stored)
        st, old_st = doc["stats"], old["stats"]
        passes = old_st["pass_seconds"]
        if not (_number(old_st["total_seconds"]) and isinstance(passes, dict)
                and set(passes) == set(st["pass_seconds"])
                and all(_number(v) for v in passes.values())):
            return built
    except (ValueError, KeyError, TypeError):
        return built
    st["pass_seconds"], st["total_seconds"] = passes, old_st["total_seconds"]
    return json.dumps(doc, sort_keys=True).encode()     # as Program.to_json writes it


def _with_program_checksum(built: bytes, program: bytes) -> bytes:
    doc = json.loads(built)
    doc["files"]["program.json"] = hashlib.sha256(program).hexdigest()
    return json.dumps(doc, sort_keys=True).encode()     # as cache_entries._write_entry writes it
