"""Long runs of like lines in a cpu kernel's source, written as one loop each.

A chain of 20,000 ReLUs lowers to 20,000 ``o1_0 = p1_0.as_strided(...)`` lines in
``bind()`` and 20,000 ``torch.clamp_min(o1_0, 0.0, out=o2_0)`` lines in ``run()``:
2.6 MB of source, which CPython takes most of a second to compile, at about 40 us a
line. Such a run differs from line to line only in the names ``bind()`` made, so it is
written once, over a table of those names:

    bind():  o1_0, o2_0, ... = [_v0.as_strided((8, 16), (16, 1)) for _v0 in (p1_0, p2_0, ...)]
             _r0 = tuple(zip((a0_0, o1_0, ...), (o1_0, o2_0, ...)))
    run():   for _v0, _v1 in _r0:
                 torch.clamp_min(_v0, 0.0, out=_v1)

The calls, their arguments and their order are unchanged; a loop iteration adds tens
of nanoseconds to a call of microseconds. Runs shorter than :data:`MIN_RUN` lines stay
as they were, so ordinary kernels keep their source (and their cache keys).

Tables that spell every name would still be a megabyte (20,001 parameters, an
unpacking into 20,001 names, two tables of 20,000), which CPython compiles in 0.3 s.
So names that come in long sequences are read as slices of one tuple: a kernel with
:data:`LONG` parameters or more takes them as ``*_p``, a run of :data:`LONG` bind lines
or more makes one tuple ``_mK``, and a table spans slices of them (a name repeated
row after row, a repeated tuple):

    bind(*_p):  _m0 = tuple([_v0.as_strided((8, 16), (16, 1)) for _v0 in _p[0:20001]])
                _r0 = tuple(zip(_m0[0:20000], _m0[1:20001]))

A name also read on its own line is given its value from its tuple where the tuple is
made.
"""
from __future__ import annotations

import re

MIN_RUN = 32
LONG = 256          # parameters, or lines of one bind run, read as slices of a tuple

# a name a lowering makes in bind() (a view, temporary or constant: a0_0, o12_0, t3,
# w1_0) where the source reads it: not an attribute (``x.float32``), not in a string,
# not a keyword argument
_MADE = re.compile(r"(?<![.\w'\"])([a-z]+\d+(?:_\d+)?)\b(?!\s*=[^=])")
_TARGETS = re.compile(r"([A-Za-z_]\w*(?:, [A-Za-z_]\w*)*) = ")


def assigned(line: str) -> list:
    """The names a generated line assigns (``a = ...`` or ``a, b = ...``), else ``[]``."""
    m = _TARGETS.match(line) if " = " in line else None
    return m.group(1).split(", ") if m else []


def fold_runs(params, bind, body):
    """``(signature, bind, body)`` of a cpu kernel with each run of at least
    :data:`MIN_RUN` like lines written as one loop, and long sequences of names read as
    slices (see the module docstring).

    Parameters
    ----------
    params : list of str
        bind()'s parameters.
    bind, body : list of str
        The lines of ``bind()`` and of ``run()``.

    Returns
    -------
    tuple of (str, list of str, list of str)
        bind()'s parameter list (``*_p`` or the names), and the lines.
    """
    if len(bind) < MIN_RUN and len(body) < MIN_RUN:
        return ", ".join(params), bind, body
    targets = [assigned(line) for line in bind]
    # a name run() assigns holds there what run() gave it, not what bind() made
    in_run = {name for line in body if " = " in line for name in assigned(line.strip())}
    # names given a value more than once are always read by name
    seen, again = set(), set(in_run)
    for names in targets:
        for name in names:
            (again if name in seen else seen).add(name)
    slices = _Slices(again)
    if len(params) >= LONG:
        slices.add("_p", params)
    bind = _fold_bind(set(params), bind, targets, slices)
    made = set(params) | seen
    made -= in_run
    tables, body = _fold_body(made, body, slices)
    bind = slices.given(bind + tables, body)
    return ("*_p" if len(params) >= LONG else ", ".join(params)), bind, body


class _Slices:
    """Where each name of a long sequence lives: ``name -> (tuple, index)``; tables of
    names written as slices of those tuples."""

    def __init__(self, by_name):
        self.at, self.by_name, self.tuples = {}, by_name, []

    def add(self, tuple_name, names):
        self.tuples.append((tuple_name, names))
        self.at.update((n, (tuple_name, i)) for i, n in enumerate(names)
                       if n not in self.by_name)

    def column(self, names) -> str:
        """A tuple display of ``names`` (source), as slices where it can."""
        if not self.at:
            return "(" + ", ".join(names) + ",)"
        parts, k, at = [], 0, self.at               # (text, whether several values)
        while k < len(names):
            place, j = at.get(names[k]), k + 1
            while j < len(names) and names[j] == names[k]:
                j += 1
            one = names[k] if place is None else f"{place[0]}[{place[1]}]"
            if j - k > 1:                           # the same name row after row
                parts.append((f"(({one},) * {j - k})", True))
            elif place is not None:
                vec, i = place
                while j < len(names) and at.get(names[j]) == (vec, i + j - k):
                    j += 1
                parts.append((f"{vec}[{i}:{j - k + i}]", True) if j - k > 1 else (one, False))
            else:
                parts.append((one, False))
            k = j
        if len(parts) == 1 and parts[0][1]:
            return parts[0][0]
        return "(" + ", ".join("*" + t if several else t for t, several in parts) + ",)"

    def given(self, bind, body) -> list:
        """``bind`` with each tuple's names that a line reads on its own assigned from it,
        right after the line making the tuple (first, for ``_p``)."""
        if not self.tuples:
            return bind
        read = set()
        for line in bind + body:
            read.update(_MADE.findall(line))
        out = list(bind)
        for name, names in reversed(self.tuples):
            lines = [f"{n} = {name}[{i}]" for i, n in enumerate(names) if n in read]
            at = 0 if name == "_p" else \
                next(k for k, line in enumerate(out) if line.startswith(name + " = ")) + 1
            out[at:at] = lines
        return out


def _template(text, names):
    """``text`` with each of ``names`` that :data:`_MADE` finds replaced by a
    placeholder, and the names replaced, in order."""
    parts = _MADE.split(text)            # text, name, text, name, ..., text
    args = parts[1::2]
    if names.issuperset(args):           # most often, all of them
        return "\0".join(parts[0::2]), args
    args, out = [], [parts[0]]
    for k in range(1, len(parts), 2):
        word = parts[k]
        if word in names:
            args.append(word)
            out.append("\0")
        else:
            out.append(word)
        out.append(parts[k + 1])
    return "".join(out), args


def _runs(keys):
    """``(start, end)`` of each run of at least MIN_RUN equal, non-None keys."""
    out, i = [], 0
    while i < len(keys):
        j = i + 1
        while j < len(keys) and keys[i] is not None and keys[j] == keys[i]:
            j += 1
        if keys[i] is not None and j - i >= MIN_RUN:
            out.append((i, j))
        i = j
    return out


def _fill(template, values):
    parts = template.split("\0")
    return parts[0] + "".join(v + p for v, p in zip(values, parts[1:]))


def _fold_bind(params, bind, assigns, slices):
    """Runs of ``name = like expression`` in bind() (``assigns``: each line's
    :func:`assigned`), each one unpacking assignment (a tuple of :class:`_Slices`
    when :data:`LONG` lines or more)."""
    made, keys, rows = set(params), [], []
    for line, targets in zip(bind, assigns):
        key = None
        if len(targets) == 1:
            template, args = _template(line[len(targets[0]) + 3:], made)
            if args:
                key = template
            rows.append((targets[0], args))
        else:
            rows.append(None)
        made.update(targets)
        keys.append(key)
    out, at = [], 0
    for i, j in _split_on_reads(_runs(keys), rows):
        out.extend(bind[at:i])
        k = keys[i].count("\0")
        names = [f"_v{s}" for s in range(k)]
        expr = _fill(keys[i], names)
        table = _table([rows[r][1] for r in range(i, j)], slices)
        targets = [rows[r][0] for r in range(i, j)]
        if j - i >= LONG:
            name = f"_m{sum(1 for t, _ in slices.tuples if t != '_p')}"
            out.append(f"{name} = tuple([{expr} for {', '.join(names)} in {table}])")
            slices.add(name, targets)
        else:
            out.append(f"{', '.join(targets)} = [{expr} for {', '.join(names)} in {table}]")
        at = j
    out.extend(bind[at:])
    return out


def _split_on_reads(runs, rows):
    """The runs cut where a line reads a name an earlier line of its run assigned
    (the unpacking assigns them all at the end)."""
    out = []
    for i, j in runs:
        start, assigned_here = i, set()
        for r in range(i, j):
            if assigned_here.intersection(rows[r][1]):
                if r - start >= MIN_RUN:
                    out.append((start, r))
                start, assigned_here = r, set()
            assigned_here.add(rows[r][0])
        if j - start >= MIN_RUN:
            out.append((start, j))
    return out


def _fold_body(made, body, slices):
    """Runs of like calls in run(), each a loop over a table bind() builds."""
    keys, args = [], []
    for line in body:
        template, names = _template(line, made)
        plain = names and not line.startswith(" ") and not line.endswith(":") and \
            not assigned(line)
        keys.append(template if plain else None)
        args.append(names)
    tables, out, at = [], [], 0
    for i, j in _runs(keys):
        out.extend(body[at:i])
        template, rows = _inline_constants(keys[i], [args[r] for r in range(i, j)])
        if not rows[0]:                 # the same line again and again: left as it is
            out.extend(body[i:j])
            at = j
            continue
        table = f"_r{len(tables)}"
        names = [f"_v{s}" for s in range(len(rows[0]))]
        tables.append(f"{table} = {_table(rows, slices)}")
        out.append(f"for {', '.join(names)} in {table}:")
        out.append("    " + _fill(template, names))
        at = j
    out.extend(body[at:])
    return tables, out


def _inline_constants(template, rows):
    """Placeholders whose name is the same in every row written back as that name."""
    keep = [s for s in range(len(rows[0])) if any(r[s] != rows[0][s] for r in rows)]
    parts = template.split("\0")
    text, kept = parts[0], set(keep)
    for s, part in enumerate(parts[1:]):
        text += ("\0" if s in kept else rows[0][s]) + part
    return text, [[r[s] for s in keep] for r in rows]


def _table(rows, slices):
    """The rows as source: a tuple of names (one per row), or the rows' tuples zipped
    from one tuple of names per column (CPython compiles twenty thousand small tuple
    displays in twice the time of the same names in two flat ones); names as
    ``slices`` spans them."""
    if all(len(r) == 1 for r in rows):
        return slices.column([r[0] for r in rows])
    columns = [slices.column(col) for col in zip(*rows)]
    return "tuple(zip(" + ", ".join(columns) + "))"
