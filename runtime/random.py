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
            # a per-context stream that is the same in every process (str hashes
            # change with PYTHONHASHSEED, so the device type maps to a fixed number)
            kind = {"cpu": 1, "gpu": 2, "cpu_pinned": 3, "cpu_shared": 5}.get(key[0], 7)
            gen.manual_seed(_SEED[0] * 1000003 + kind * 1009 + key[1])
        _GENERATORS[key] = gen
    return gen
