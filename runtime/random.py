"""The project's random generators, one per context, seeded by ``mx.random.seed``."""
from __future__ import annotations

import torch

_GENERATORS: dict = {}
_SEED = [None]


def seed(value: int):
    _SEED[0] = int(value)
    _GENERATORS.clear()


def generator_for(ctx) -> torch.Generator:
    key = (ctx.device_type, ctx.device_id)
    gen = _GENERATORS.get(key)
    if gen is None:
        gen = torch.Generator(device="cpu")
        if _SEED[0] is None:
            gen.seed()
        else:
            gen.manual_seed(_SEED[0] * 1000003 + hash(key) % 1000003)
        _GENERATORS[key] = gen
    return gen
