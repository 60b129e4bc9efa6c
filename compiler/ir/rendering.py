"""What every target renders kernels with: the templates and the rendered record.

``templates/*.py.j2`` (one per kernel family and target) load through one jinja2
environment under ``StrictUndefined``; :func:`template_hash` covers them all in the
cache key. :class:`Rendered` is what rendering a tile program gives on any target: the
source and the facts a launch needs (parameters, tile extents, the kernel family).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import jinja2

_COMPILER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE_DIR = os.path.join(os.path.dirname(_COMPILER_DIR), "templates")
if not os.path.isdir(TEMPLATE_DIR):  # installed: templates ship as package data of compiler
    TEMPLATE_DIR = os.path.join(_COMPILER_DIR, "templates")

environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
                                 undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                 autoescape=False)


def template_hash() -> str:
    """Hash of every template file: part of every cache key.

    Returns
    -------
    str
        16 hex digits of the sha256 over each file's name and bytes, in name order.
    """
    h = hashlib.sha256()
    for name in sorted(os.listdir(TEMPLATE_DIR)):
        with open(os.path.join(TEMPLATE_DIR, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()[:16]


@dataclass
class Rendered:
    """One kernel's source and what launching it needs."""
    source: str
    params: list          # (tensor index, destination index) per pointer parameter
    M: int
    N: int
    K: int                # largest reduction length of a dot (0 if none)
    kind: str
    batch: int = 1        # batches of a batched matmul (folded into grid axis 0)
    dot: str = "float32"  # a dot's operand kind (compiler/ir/tiles.py: TENSOR_CORE_DOTS)
    # cpu target: the numbers lifted out of the source (compiler/cpu/source.py), passed
    # to bind() by the launch, and the summary line with its numbers
    consts: tuple = ()
    summary: str = ""
