"""A cpu kernel's source from its lines, its numbers lifted into constants of its launch.

:func:`kernel_source` writes ``templates/cpu_kernel.py.j2`` for every cpu kernel
family (``render.py``, ``pool.py``).

Groups that differ only in sizes, strides, offsets and scalars would each render their
own source: Inception-BN's 69 BatchNorms at a dozen sizes, its convolutions at 69
geometries. Each distinct source is a file written to the cache and a module CPython
compiles before the first step (about 0.2 ms apiece). With the numbers lifted,
Inception-BN's training Program renders 271 kernels into 37 sources, and a cold first
step compiles 37 modules.

:func:`lift_numbers` replaces each number literal of ``bind()``'s and ``run()``'s lines
(outside strings) by a name, ``_c0``, ``_c1``, ... (one per occurrence in ``bind()``;
one per value and type in ``run()``: ``1`` and ``1.0`` differ), which ``bind()``
unpacks from its first argument: the launch's ``config["consts"]``, the values in
order. ``run()`` reads them as default arguments, as it reads the views ``bind()``
made (``templates/cpu_kernel.py.j2``): a local read, where a tuple of numbers becomes a
tuple built at the call (tens of nanoseconds beside calls of microseconds). Floats
keep their exact value through the Program's JSON (``repr`` round-trips).
"""
from __future__ import annotations

import re

from .loops import assigned
from ..ir.rendering import environment

__all__ = ["ARGUMENT", "PREFIX", "kernel_source", "lift_numbers"]

PREFIX = "_c"           # the names of the lifted numbers
ARGUMENT = "_consts"    # bind()'s first parameter: the launch's constants

# a string literal (kept as it is), or a number literal not inside a name or after a
# dot (checked behind its first digit: every token then starts with a quote or a digit,
# which the regular expression engine scans for, a quarter faster)
_TOKEN = re.compile(r"""('(?:[^'\\\n\x00]|\\.)*'|"(?:[^"\\\n\x00]|\\.)*")"""
                    r"""|(\d(?<![\w.]\d)(?:\d*\.\d*(?:[eE][-+]?\d+)?|\d*[eE][-+]?\d+|\d*))"""
                    r"""(?![\w.])""")


_SEP = "\x00"          # joins lines for one substitution pass (never in a line)
_NAMES = [f"{PREFIX}{i}" for i in range(4096)]
_VALUES: dict = {}      # literal text -> its value (sizes and strides recur)


def _name(i: int) -> str:
    return _NAMES[i] if i < 4096 else f"{PREFIX}{i}"


def _value(text: str):
    v = _VALUES.get(text)
    if v is None:
        v = int(text) if text.isdigit() else float(text)
        if len(_VALUES) < 65536:
            _VALUES[text] = v
    return v


def lift_numbers(summary: str, bind: list, body: list):
    """``(summary, bind, body, consts)`` with every number literal of ``bind`` and
    ``body`` named (module doc) and those of ``summary`` written ``N``; ``bind`` starts
    with the line unpacking the names from :data:`ARGUMENT` when there are any.

    Parameters
    ----------
    summary : str
        The kernel's comment line (what it computes, with the launch's numbers).
    bind, body : list of str
        The lines of ``bind()`` and ``run()``.

    Returns
    -------
    tuple of (str, list of str, list of str, tuple)
        The lines with names in place of numbers, and the values, name ``k`` being
        ``consts[k]``.
    """
    consts = []
    append = consts.append
    in_run = {}

    def each(m):                    # bind(): a new name per number
        text = m[2]
        if text is None:            # a string: its digits are text
            return m[1]
        append(_value(text))
        return _name(len(consts) - 1)

    def once(m):                    # run(): one name per value and type
        text = m[2]
        if text is None:
            return m[1]
        value = _value(text)
        key = (type(value), value)
        found = in_run.get(key)
        if found is None:
            append(value)
            found = in_run[key] = _name(len(consts) - 1)
        return found

    # a name per number in bind() (its shapes and strides: two sizes whose numbers
    # coincide differently still share the source); run() reads its names as default
    # arguments, so one per value and type there. The comment, shared by every size,
    # says N (each launch's summary has its numbers). Lines are joined for one pass.
    summary = _TOKEN.sub(lambda m: m[1] or "N", summary)
    bind = _TOKEN.sub(each, _SEP.join(bind)).split(_SEP) if bind else []
    body = _TOKEN.sub(once, _SEP.join(body)).split(_SEP) if body else []
    if len(consts) == 1:
        bind.insert(0, f"{PREFIX}0 = {ARGUMENT}[0]")
    elif consts:
        bind.insert(0, ", ".join(f"{PREFIX}{i}" for i in range(len(consts))) +
                    f" = {ARGUMENT}")
    return summary, bind, body, tuple(consts)


def kernel_source(params: list, signature: str, summary: str, bind: list, body: list):
    """``(source, consts)``: the kernel module of these lines, numbers lifted.

    Parameters
    ----------
    params : list of str
        bind()'s buffer parameters (``p<t>_<d>``).
    signature : str
        How bind() takes them (the names, or ``*_p``: ``loops.fold_runs``).
    summary : str
        The comment line saying what the kernel computes.
    bind, body : list of str
        The lines of ``bind()`` and ``run()``.

    Returns
    -------
    tuple of (str, tuple)
        The source, and the values its launch passes as bind()'s first argument.
    """
    summary, bind, body, consts = lift_numbers(summary, bind, body)
    source = environment.get_template("cpu_kernel.py.j2").render(k={
        "params": f"{ARGUMENT}, {signature}" if signature else ARGUMENT,
        "summary": summary, "bind_lines": bind, "body_lines": body or ["pass"],
        "run_params": _run_params(params, bind, body)})
    return source, consts


_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def _run_params(params, bind, body) -> str:
    """``name=name`` for each name ``run()`` reads from ``bind()`` (its arguments and
    what its lines assign), in the order bind made them: run() takes them as default
    arguments (``templates/cpu_kernel.py.j2`` says why)."""
    made = list(params)
    for line in bind:
        made.extend(assigned(line))
    used = set(_NAME.findall("\n".join(body)))
    seen, out = set(), []
    for name in made:
        if name in used and name not in seen:
            seen.add(name)
            out.append(f"{name}={name}")
    return ", ".join(out)
