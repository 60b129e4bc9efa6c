"""Reading LibSVM text for ``mx.io.LibSVMIter``, as mxnet 1.9.1's dmlc-core parser reads it.

A line is ``label[:weight] [qid:N] index:value index:value ...``, indices
zero-based and kept in the order written (mxnet neither sorts nor checks them);
``#`` starts a comment, blank lines are skipped, the weight and ``qid`` are read
and dropped. ``num_parts`` / ``part_index`` cut the bytes of the files (taken
together, in name order for a folder) into equal spans, each moved to the start
of the next line, as dmlc's ``InputSplit`` does: parts hold whole lines and need
not hold the same number of them.

Parsing is vectorised: the feature text of a whole part is tokenised and its
decimal numbers read with numpy (a 100,000-line file of 39 features a line in
seconds, not minutes); tokens numpy cannot read exactly (exponents, more than 15
significant digits, ``inf`` ...) go through Python's ``float`` / ``int``.
"""
import os
import re

import numpy as np

from compiler.errors import MXNetError

_DOT, _MINUS, _PLUS = 46, 45, 43
# a feature token with two colons
_TWO_COLONS = re.compile(rb":[^\s:]*:")


def list_files(uri, what):
    """The files ``uri`` names: ``;``-separated paths, a folder meaning its files by name."""
    files = []
    for path in str(uri).split(";"):
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if not n.startswith("."))
            files += [os.path.join(path, n) for n in names
                      if os.path.isfile(os.path.join(path, n))]
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise MXNetError(f"LibSVMIter: {what} {path!r} does not exist")
    return [f for f in files if os.path.getsize(f) > 0]


def _line_start_after(raw, offset):
    """dmlc's ``SeekRecordBegin``: from ``offset``, past the next end of line and the run
    of line ends after it (not beyond the end of this file)."""
    stop = len(raw)
    i = offset
    while i < stop and raw[i] not in b"\r\n":
        i += 1
    while i < stop and raw[i] in b"\r\n":
        i += 1
    return i


def read_part(files, num_parts, part_index):
    """The bytes of part ``part_index`` of ``num_parts`` of the files taken together."""
    sizes = [os.path.getsize(f) for f in files]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    total = int(starts[-1])
    step = -(-total // num_parts)
    begin, end = min(step * part_index, total), min(step * (part_index + 1), total)
    if begin == end:
        return b""
    chunks = []
    for k, name in enumerate(files):
        lo, hi = int(starts[k]), int(starts[k + 1])
        if hi <= begin or lo >= end:
            continue
        with open(name, "rb") as f:
            raw = f.read()
        a = 0 if begin <= lo else _line_start_after(raw, begin - lo)
        b = len(raw) if end >= hi else _line_start_after(raw, end - lo)
        if a < b:
            chunks.append(raw[a:b] if raw[a:b].endswith((b"\n", b"\r")) else raw[a:b] + b"\n")
    return b"".join(chunks)


def _numbers(tokens, integer):
    """The decimal numbers ``tokens`` (bytes) spell, as float64 (int64 with ``integer``).

    The tokens become a byte matrix (one row each, zero-padded) read column by column;
    tokens it cannot read exactly (exponents, more than 15 digits, ``inf`` ...) are read
    by Python.
    """
    n = len(tokens)
    if n == 0:
        return np.zeros(0, np.int64 if integer else np.float64)
    chars = np.array(tokens).view(np.uint8).reshape(n, -1)
    mant, ndig, frac = (np.zeros(n, np.int64) for _ in range(3))
    seen_dot, neg, odd = (np.zeros(n, bool) for _ in range(3))
    for j in range(chars.shape[1]):
        c = chars[:, j]
        digit = (c >= 48) & (c <= 57)
        mant = np.where(digit, mant * 10 + (c.astype(np.int64) - 48), mant)
        ndig += digit
        frac += digit & seen_dot
        dot = c == _DOT
        odd |= dot & (seen_dot | integer)
        seen_dot |= dot
        sign = (c == _MINUS) | (c == _PLUS)
        neg |= c == _MINUS
        odd |= ~(digit | dot | (c == 0) | (sign & (j == 0)))
    odd |= (ndig == 0) | (ndig > 15)
    out = np.where(neg, -mant, mant)
    if not integer:
        out = out / 10.0 ** frac
    for i in np.flatnonzero(odd):
        out[i] = _python_number(tokens[i].decode("ascii", "replace"), integer)
    return out


def _python_number(text, integer):
    try:
        return int(text) if integer else float(text)
    except ValueError:
        raise MXNetError(f"LibSVMIter: {text!r} is not a number") from None


def _split_lines(text):
    """Heads (label tokens) and feature text of the non-blank lines, comments dropped."""
    heads, rests = [], []
    has_comment, has_qid = b"#" in text, b"qid:" in text
    for line in text.replace(b"\r", b"\n").split(b"\n"):
        if has_comment:
            line = line.split(b"#", 1)[0]
        parts = line.split(None, 1)
        if not parts:
            continue
        heads.append(parts[0].split(b":", 1)[0])
        rest = parts[1] if len(parts) > 1 else b""
        if has_qid and rest.startswith(b"qid:"):
            rest = rest.split(None, 1)[1] if len(rest.split(None, 1)) > 1 else b""
        rests.append(rest)
    return heads, rests


def parse(text, where):
    """Rows of LibSVM text: ``(labels, indptr, indices, values)``.

    Parameters
    ----------
    text : bytes
    where : str
        The file(s), for errors.

    Returns
    -------
    labels : float32 array (rows,)
    indptr : int64 array (rows + 1,)
    indices : int64 array (nnz,)
    values : float32 array (nnz,)
    """
    heads, rests = _split_lines(text)
    labels = np.fromiter(map(float, heads), np.float64, len(heads)).astype(np.float32) \
        if heads else np.zeros(0, np.float32)
    counts = np.fromiter((r.count(b":") for r in rests), np.int64, len(rests))
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    joined = b" ".join(rests)
    tokens = joined.replace(b":", b" ").split()
    if len(tokens) != 2 * indptr[-1] or _unpaired_colon(joined):
        _raise_unpaired(rests, where)
    indices = _numbers(tokens[0::2], True).astype(np.int64)
    values = _numbers(tokens[1::2], False).astype(np.float32)
    return labels, indptr, indices, values


def _unpaired_colon(joined):
    """Whether a colon of the feature text has no index before or no value after it."""
    if joined.startswith(b":") or joined.endswith(b":"):
        return True
    if any(p in joined for p in (b" :", b": ", b"\t:", b":\t")):
        return True
    return _TWO_COLONS.search(joined) is not None


def _raise_unpaired(rests, where):
    for row, rest in enumerate(rests):
        for token in rest.split():
            if token.count(b":") != 1 or token.startswith(b":") or token.endswith(b":"):
                raise MXNetError(
                    f"LibSVMIter: row {row} of {where} has the feature {token.decode()!r}, "
                    f"not index:value (mxnet 1.9.1 crashes on a feature without a value)")
    raise MXNetError(f"LibSVMIter: {where} is not in LibSVM format")
