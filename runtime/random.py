"""The project's random generators, one per context, seeded by ``mx.random.seed``.

Until a program calls ``mx.random.seed`` they start from a fixed default seed, as
mxnet 1.9.1's do: a program that never seeds draws the same numbers (initial
weights, Dropout masks, samplers) on every run. The numbers themselves are not
mxnet's: its generators are other algorithms.

Initializers, ``mx.nd.random`` and SGLD's noise draw from them directly. Kernels
that draw random numbers (Dropout, LeakyReLU's rrelu) compute them on the device
with Philox from a seed (``compiler/ops/nn.py``); :func:`set_step_seed` gives that
seed a new value from the context's generator before each forward that draws.
"""
from __future__ import annotations

import torch

_GENERATORS: dict = {}
DEFAULT_SEED = 0
_SEED = [DEFAULT_SEED]


def seed(value: int):
    """Seed every context's generator (``mx.random.seed``); they restart from it."""
    _SEED[0] = int(value)
    _GENERATORS.clear()


def generator_for(ctx) -> torch.Generator:
    """The (host) generator of context ``ctx``, made on first use.

    Parameters
    ----------
    ctx : Context
        Contexts of one device type and id share a generator.

    Returns
    -------
    torch.Generator
        Seeded from ``mx.random.seed``'s value (:data:`DEFAULT_SEED` until it is
        called).
    """
    key = (ctx.device_type, ctx.device_id)
    gen = _GENERATORS.get(key)
    if gen is None:
        gen = torch.Generator(device="cpu")
        # a per-context stream that is the same in every process (str hashes
        # change with PYTHONHASHSEED, so the device type maps to a fixed number)
        kind = {"cpu": 1, "gpu": 2, "cpu_pinned": 3, "cpu_shared": 5}.get(key[0], 7)
        gen.manual_seed(_SEED[0] * 1000003 + kind * 1009 + key[1])
        _GENERATORS[key] = gen
    return gen


def next_step_seed(ctx) -> int:
    """A 32-bit seed for one step's random kernels, drawn from ``ctx``'s generator."""
    return int(torch.randint(0, 2 ** 32, (1,), dtype=torch.int64,
                             generator=generator_for(ctx)))


def set_step_seed(buffer: torch.Tensor, ctx) -> int:
    """Write a new step seed (:func:`next_step_seed`) into a Program's seed buffer.

    The buffer is float32 like every planned buffer; the seed's 32 bits go into
    its first element as they are (an int32 view), and the kernels read them back
    the same way, so no float rounding touches them. A fill of one element: on a
    GPU nothing is copied from the host but the scalar itself.

    Parameters
    ----------
    buffer : torch.Tensor
        The float32 seed buffer (its first element is the seed).
    ctx : Context
        Whose generator draws the seed.

    Returns
    -------
    int
        The seed written, in ``[0, 2**32)``.
    """
    value = next_step_seed(ctx)
    signed = value - 2 ** 32 if value >= 2 ** 31 else value
    buffer.reshape(-1)[:1].view(torch.int32).fill_(signed)
    return value
