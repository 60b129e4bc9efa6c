"""``mx.profiler``: mxnet 1.9.1's profiler API.

While the profiler runs (``set_state('run')``, not paused), every generated
kernel launch an executor makes is recorded as its launch id, start and end
(``time.perf_counter_ns``) and thread (``runtime.launcher.RECORD``; the id
names the launch, ``fwd matmul over domain (32, 64) #f92c14ac``: phase, what
the kernel computes, its source hash; see
:func:`runtime.launcher.launch_name`). Tasks, frames, events, counters and
markers are recorded the same way. Nothing more happens while recording: the
trace and the statistics are built from the records when they are asked for.
``dump()`` writes everything recorded so far as a Chrome trace
(``chrome://tracing``, Perfetto) to the ``filename`` of :func:`set_config`
(default ``profile.json``): the kernel ranges have category ``operator`` as
mxnet's operators do; an ``mx.nd`` call (an operator, NDArray arithmetic, ``zeros`` /
``ones`` / ``full``) is one ``operator`` range named by mxnet's operator (``sqrt``,
``_plus_scalar``, ``_zeros``), and within a Python CustomOp's ``forward`` / ``backward``
mxnet's ``Custom Operator`` ranges are kept (``<op_type>::pure_python``,
``_backward_<op_type>::pure_python``, and ``<op_type>::<operator>`` for its mx.nd calls); a :class:`Task` / :class:`Frame` has its domain's name
as category, a :class:`Counter` writes counter (``"ph": "C"``) events and a
:class:`Marker` instant (``"ph": "i"``) events. ``dumps()`` returns mxnet's
aggregate table (count, total / min / max / average time per name and
category; value statistics for counters).

As mxnet, a process that ran the profiler (``set_state('run')``) and did not
``dump()`` after writes the trace to ``filename`` when it exits; a session
still running at exit is stopped first, so the exit is clean.

Differences from mxnet, by design:

* Aggregate statistics are always kept (``aggregate_stats`` is accepted).
* ``continuous_dump`` / ``dump_period`` are accepted and ignored: call
  ``dump(finished=False)`` to write the file while running.
* ``profile_process='server'`` raises: there are no kvstore server
  processes here (dist kvstores run in the workers).
* Optimizer updates are not wrapped in ranges; their ATen calls appear
  unnamed.
* On a GPU, kernel ranges time the host side of the launch (launches are
  asynchronous).
* ``profile_memory`` is accepted; allocations are not recorded, so the JSON's
  ``Memory`` section is empty.
"""
from __future__ import annotations

import atexit
import json
import os
import tempfile
import threading
import time
import warnings

from compiler.errors import MXNetError
from runtime import launcher as _launcher

_CONFIG_KEYS = ("filename", "profile_all", "profile_symbolic", "profile_imperative",
                "profile_memory", "profile_api", "continuous_dump",
                "dump_period", "aggregate_stats", "profile_process")
_lock = threading.RLock()
_config = {"filename": "profile.json"}
# "output": a trace is owed (set by set_state('run'), cleared by dump), as mxnet's
# enable_output_: the process writes it at exit when no dump() came after the last run
_state = {"run": False, "paused": False, "origin_ns": None,
          "output": False, "atexit": False}
_events: list = []              # trace events (ts in us from the first run's start)
_meta: dict = {}                # (name, pid) -> metadata event
_stats: dict = {}               # category -> name -> [count, total, min, max]
# tasks, frames, events, counters and markers as recorded: (kind "X" | "C" | "i", category,
# name, start ns, end ns, thread id, value); built into _events with the launches on dump
_ranges: list = []
_kvstore_handle = None


def set_kvstore_handle(handle):
    """Remember the kvstore (mxnet profiles its server through it; nothing to do here)."""
    global _kvstore_handle
    _kvstore_handle = handle


def _worker_only(profile_process):
    if profile_process != "worker":
        raise MXNetError(f"profile_process={profile_process!r}: symtriton has no kvstore "
                         f"server processes to profile; use 'worker'")


def set_config(**kwargs):
    """Configure the profiler (keyword arguments only, as mxnet).

    Parameters
    ----------
    filename : str
        The trace file :func:`dump` writes (default ``profile.json``).
    profile_all, profile_symbolic, profile_imperative, profile_memory, profile_api : bool
        Accepted; kernel launches are recorded in every case (allocations
        are not recorded).
    continuous_dump, dump_period, aggregate_stats : optional
        Accepted (see the module docstring).
    profile_process : str
        ``'worker'`` only.
    """
    unknown = sorted(set(kwargs) - set(_CONFIG_KEYS))
    if unknown:
        raise MXNetError(f"profiler.set_config: unknown option(s) {unknown}; known options are "
                         f"{list(_CONFIG_KEYS)}")
    _worker_only(kwargs.get("profile_process", "worker"))
    with _lock:
        for key, value in kwargs.items():
            if key != "filename" and isinstance(value, str):
                value = value.lower() in ("1", "true")
            _config[key] = value
        _config["filename"] = str(_config["filename"])


def profiler_set_config(mode="symbolic", filename="profile.json"):
    """Deprecated form of :func:`set_config`."""
    warnings.warn("profiler.profiler_set_config() is deprecated. Please use "
                  "profiler.set_config() instead")
    set_config(**{"profile_" + mode: True, "filename": filename})


def set_state(state="stop", profile_process="worker"):
    """Start (``'run'``) or stop (``'stop'``) recording.

    Parameters
    ----------
    state : str
        ``'run'`` or ``'stop'``.
    profile_process : str
        ``'worker'`` only.
    """
    if state not in ("run", "stop"):
        raise MXNetError(f"profiler.set_state: state must be 'run' or 'stop', got {state!r}")
    _worker_only(profile_process)
    with _lock:
        if state == "run":
            _state["output"] = True
            _register_exit()
        if state == "run" and not _state["run"]:
            _state["run"], _state["paused"] = True, False
            _start_session()
        elif state == "stop" and _state["run"]:
            _state["run"] = False
            _stop_session()


def profiler_set_state(state="stop"):
    """Deprecated form of :func:`set_state`."""
    warnings.warn("profiler.profiler_set_state() is deprecated. Please use "
                  "profiler.set_state() instead")
    set_state(state)


def pause(profile_process="worker"):
    """Stop recording until :func:`resume` (what was recorded is kept)."""
    _worker_only(profile_process)
    with _lock:
        if _state["run"] and not _state["paused"]:
            _state["paused"] = True
            _stop_session()


def resume(profile_process="worker"):
    """Resume recording after :func:`pause`."""
    _worker_only(profile_process)
    with _lock:
        if _state["run"] and _state["paused"]:
            _state["paused"] = False
            _start_session()


def state():
    """``'run'`` while recording (paused included), else ``'stop'``."""
    return "run" if _state["run"] else "stop"


def dump(finished=True, profile_process="worker"):
    """Write the trace recorded so far to the configured ``filename``.

    Parameters
    ----------
    finished : bool
        ``True`` (default): stop the profiler first, as mxnet does. ``False``:
        keep recording (the file is rewritten with everything on the next dump).
    profile_process : str
        ``'worker'`` only.
    """
    _worker_only(profile_process)
    with _lock:
        if finished:
            set_state("stop")
        _write_trace()


def _write_trace():
    """Build the trace from what was recorded and write it to the configured file
    (atomically); no trace is owed after."""
    _flush()
    doc = {"traceEvents": list(_meta.values()) + sorted(_events, key=lambda e: e["ts"]),
           "displayTimeUnit": "ms"}
    path = _config["filename"]
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".profile-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)        # mkstemp's 0600 is no file mode a trace needs
    os.replace(tmp, path)
    _state["output"] = False


def _register_exit():
    """Register :func:`_at_exit` once, on the first run."""
    if not _state["atexit"]:
        _state["atexit"] = True
        atexit.register(_at_exit)


def _at_exit():
    """At interpreter exit, as mxnet's profiler destructor: stop recording and write the
    trace if the profiler ran since the last :func:`dump`."""
    with _lock:
        try:
            set_state("stop")
            if _state["output"]:
                _write_trace()
        except Exception as err:  # noqa: BLE001  (exit must stay clean; say what was lost)
            warnings.warn(f"mx.profiler: the trace could not be written at exit to "
                          f"{_config['filename']!r}: {err}")


def dump_profile():
    """Deprecated form of :func:`dump`."""
    warnings.warn("profiler.dump_profile() is deprecated. Please use profiler.dump() instead")
    dump(True)


def dumps(reset=False, format="table", sort_by="total", ascending=False):  # noqa: A002
    """The aggregate statistics recorded so far, as a table (or JSON) string.

    Parameters
    ----------
    reset : bool
        Clear the statistics afterwards.
    format : str
        ``'table'`` or ``'json'``.
    sort_by : str
        ``'total'``, ``'avg'``, ``'min'``, ``'max'`` or ``'count'``.
    ascending : bool
    """
    assert format in ("table", "json"), \
        "Invalid value provided for format: {0}. Support: 'table', 'json'".format(format)
    keys = {"total": 1, "avg": None, "min": 2, "max": 3, "count": 0}
    assert sort_by in keys, ("Invalid value provided for sort_by: {0}. Support: 'total', "
                             "'avg', 'min', 'max', 'count'".format(sort_by))
    assert ascending in (False, True), \
        "Invalid value provided for ascending: {0}. Support: False, True".format(ascending)
    assert reset in (False, True), \
        "Invalid value provided for reset: {0}. Support: False, True".format(reset)
    with _lock:
        _flush()
        text = _format_json(sort_by, ascending) if format == "json" else \
            _format_table(sort_by, ascending)
        if reset:
            _stats.clear()
    return text


# -- recording: launches (runtime.launcher.RECORD) and our ranges, built into a trace on dump --

def _start_session():
    if _state["origin_ns"] is None:
        _state["origin_ns"] = time.perf_counter_ns()
    _launcher.PROFILING = True


def _stop_session():
    _launcher.PROFILING = False


def _flush():
    """Build the events and statistics of everything recorded since the last build."""
    record = _launcher.RECORD
    count = len(record)
    launches, ranges = record[:count], _ranges[:]
    del record[:count]
    del _ranges[:len(ranges)]
    names, cats, pid = _launcher.LAUNCH_IDS, _launcher.LAUNCH_CATEGORIES, os.getpid()
    for ident, start, end, tid in launches:
        _add_range(cats[ident], names[ident], start, end, pid, tid)
    for kind, cat, name, start, end, tid, value in ranges:
        if kind == "X":
            _add_range(cat, name, start, end, pid, tid)
        else:
            _add_instant(kind, cat, name, start, pid, tid, value)
    if (launches or ranges) and ("process_name", pid) not in _meta:
        _meta[("process_name", pid)] = {"name": "process_name", "ph": "M", "pid": pid,
                                        "tid": 0, "ts": 0, "args": {"name": "symtriton"}}


def _us(ns):
    return (ns - _state["origin_ns"]) / 1000.0


def _add_range(cat, name, start, end, pid, tid):
    dur = (end - start) / 1000.0
    _events.append({"name": name, "cat": cat, "ph": "X", "ts": _us(start), "dur": dur,
                    "pid": pid, "tid": tid})
    _add_stat(cat, name, dur)


def _add_instant(kind, cat, name, when, pid, tid, value):
    out = {"name": name, "cat": cat, "ph": kind, "ts": _us(when), "pid": pid, "tid": tid}
    if kind == "C":
        out["args"] = {name: value}
        _add_stat("Counter", f"{cat}::{name}", value)
    else:
        out["s"] = {"global": "g", "process": "p"}.get(value, "t")
    _events.append(out)


def _add_stat(category, name, value):
    row = _stats.setdefault(category, {}).get(name)
    if row is None:
        _stats[category][name] = [1, value, value, value]
    else:
        row[0] += 1
        row[1] += value
        row[2] = min(row[2], value)
        row[3] = max(row[3], value)


def _rows(table, sort_by, ascending):
    def key(item):
        count, total, lo, hi = item[1]
        return {"total": total, "avg": total / count, "min": lo, "max": hi,
                "count": count}[sort_by]
    return sorted(table.items(), key=key, reverse=not ascending)


def _format_table(sort_by, ascending):
    lines = ["", "Profile Statistics:", "\tNote the difference in units for different entries."]
    for category in sorted(_stats):
        counter = category == "Counter"
        unit = ("Min Value", "Max Value", "Avg Value") if counter else \
            ("Min Time (ms)", "Max Time (ms)", "Avg Time (ms)")
        total = "Total Value" if counter else "Time (ms)"
        scale = 1.0 if counter else 1e-3
        lines += [category, "=================",
                  f"{'Name':<40}{'Total Count':>12}{total:>17}{unit[0]:>17}{unit[1]:>17}"
                  f"{unit[2]:>17}",
                  f"{'----':<40}{'-----------':>12}{'-' * len(total):>17}"
                  f"{'-' * len(unit[0]):>17}{'-' * len(unit[1]):>17}{'-' * len(unit[2]):>17}"]
        for name, (count, tot, lo, hi) in _rows(_stats[category], sort_by, ascending):
            lines.append(f"{name[:39]:<40}{count:>12}{tot * scale:>17.4f}{lo * scale:>17.4f}"
                         f"{hi * scale:>17.4f}{tot * scale / count:>17.4f}")
        lines.append("")
    return "\n".join(lines) + "\n"


def _format_json(sort_by, ascending):
    """mxnet's JSON: each category's rows in ``sort_by`` order; ``Memory`` is empty,
    as no allocation is recorded (module docstring)."""
    doc = {"Time": {}, "Memory": {}, "Unit": {"Time": "ms", "Memory": "kB"}}
    for category in sorted(_stats):
        scale = 1.0 if category == "Counter" else 1e-3
        doc["Time"][category] = {
            name: {"Count": count, "Total": tot * scale, "Min": lo * scale, "Max": hi * scale,
                   "Avg": tot * scale / count}
            for name, (count, tot, lo, hi) in _rows(_stats[category], sort_by, ascending)}
    return json.dumps(doc, indent=2)


def _instant(kind, category, name, value):
    """Record a counter value or a marker now, while recording."""
    if _launcher.PROFILING:
        _ranges.append((kind, category, name, time.perf_counter_ns(), None,
                        threading.get_ident(), value))


# -- user objects -------------------------------------------------------------------------

class Domain:
    """A profiling domain: the category of the tasks, frames, counters and markers it makes.

    Parameters
    ----------
    name : str
    """

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name

    def new_task(self, name):
        """A :class:`Task` of this domain."""
        return Task(self, name)

    def new_frame(self, name):
        """A :class:`Frame` of this domain."""
        return Frame(self, name)

    def new_counter(self, name, value=None):
        """A :class:`Counter` of this domain."""
        return Counter(self, name, value)

    def new_marker(self, name):
        """A :class:`Marker` of this domain."""
        return Marker(self, name)


class _Duration:
    """A named range timed between ``start()`` and ``stop()``, recorded when it stops
    while the profiler records."""

    def __init__(self, category, name):
        self.name = name
        self._range = None
        self._category = category

    def start(self):
        """Start timing."""
        if self._range is not None:
            raise MXNetError(f"{type(self).__name__} '{self.name}' is already started; call "
                             f"stop() first")
        self._range = time.perf_counter_ns()

    def stop(self):
        """Stop timing."""
        if self._range is None:
            raise MXNetError(f"{type(self).__name__} '{self.name}' was not started; call "
                             f"start() first")
        start, self._range = self._range, None
        if _launcher.PROFILING:
            _ranges.append(("X", self._category, self.name, start, time.perf_counter_ns(),
                            threading.get_ident(), None))

    def __str__(self):
        return self.name


class Task(_Duration):
    """A unit of work, timed between ``start()`` and ``stop()``; category: its domain.

    Parameters
    ----------
    domain : Domain
    name : str
    """

    def __init__(self, domain, name):
        super().__init__(str(domain), name)


class Frame(_Duration):
    """A frame (one pass of a repeated stage), timed between ``start()`` and ``stop()``.

    Parameters
    ----------
    domain : Domain
    name : str
    """

    def __init__(self, domain, name):
        super().__init__(str(domain), name)


class Event(_Duration):
    """A named event timed between ``start()`` and ``stop()`` (category ``Events``).

    Parameters
    ----------
    name : str
    """

    def __init__(self, name):
        super().__init__("Events", name)


class Counter:
    """A value tracked over time; each change while recording is a trace counter event.

    Parameters
    ----------
    domain : Domain
    name : str
    value : int, optional
        Initial value.
    """

    def __init__(self, domain, name, value=None):
        self.name = name
        self.domain = domain
        self.value = 0
        if value is not None:
            self.set_value(value)

    def set_value(self, value):
        """Set the counter to ``value``."""
        self.value = int(value)
        _instant("C", str(self.domain), self.name, self.value)

    def increment(self, delta=1):
        """Add ``delta``."""
        self.set_value(self.value + int(delta))

    def decrement(self, delta=1):
        """Subtract ``delta``."""
        self.set_value(self.value - int(delta))

    def __iadd__(self, delta):
        self.increment(delta)
        return self

    def __isub__(self, delta):
        self.decrement(delta)
        return self

    def __str__(self):
        return self.name


class Marker:
    """An instant in time, written as a trace instant event by :meth:`mark`.

    Parameters
    ----------
    domain : Domain
    name : str
    """

    def __init__(self, domain, name):
        self.name = name
        self.domain = domain

    def mark(self, scope="process"):
        """Record the marker now.

        Parameters
        ----------
        scope : str
            ``'global'``, ``'process'``, ``'thread'``, ``'task'`` or ``'marker'``.
        """
        scopes = ("global", "process", "thread", "task", "marker")
        if scope not in scopes:
            raise MXNetError(f"Marker.mark: scope must be one of {scopes}, got {scope!r}")
        _instant("i", str(self.domain), self.name, scope)
