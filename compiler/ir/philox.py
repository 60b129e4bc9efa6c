"""Triton's ``tl.rand(seed, offset)`` in torch, bit for bit.

Dropout's random numbers are drawn inside the Triton kernels that use them
(``tl.rand``: Philox 4x32, 10 rounds). The ``cpu`` target runs no Triton
kernel, so it computes the same numbers here, as ``triton/language/random.py``
(Triton 3.x) does:

* key ``(k0, k1)``: the low and high 32 bits of the seed as a uint64;
* counter ``(c0, c1, c2, c3)``: the low 32 bits of the offset, its high 32 bits
  when the offset is a 64-bit integer (0 for an int32 offset), 0, 0;
* ``randint`` is the first word of the Philox output; ``rand`` turns it into
  ``[0, 1)`` as ``uint_to_uniform_float``: the word read as int32, ``~x`` where
  negative, converted to float32 and multiplied by ``4.6566127342e-10`` in float32.

Each 32-bit word is held in an int64 tensor (values in ``[0, 2**32)``): torch
has no unsigned shifts, and its uint64 multiply is not vectorised.
``tests/compiler/test_philox_dropout.py`` checks every function here against
``tl.randint`` / ``tl.rand`` run in Triton's interpreter.
"""
from __future__ import annotations

import torch

M32 = 0xFFFFFFFF
N_ROUNDS = 10
# Philox 4x32 constants (triton/language/random.py, philox_impl, uint32 branch)
KEY_A, KEY_B = 0x9E3779B9, 0xBB67AE85
ROUND_A, ROUND_B = 0xD2511F53, 0xCD9E8D57
# uint_to_uniform_float's scale for 32-bit words, rounded to float32 as Triton does
SCALE = torch.tensor(4.6566127342e-10, dtype=torch.float32)
# Offsets per pass of ``randint``: a chunk's dozen int64 words stay in the CPU caches,
# where whole large tensors would stream through memory on each of ~200 calls.
# values per pass: a chunk's dozen int64 temporaries stay in the cache while each of
# the ~160 torch calls a chunk costs is long enough to amortise its overhead
# (measured on 2 cores: 1M values in 63 ms with 2**17, 92 ms with 2**15, 83 ms whole)
CHUNK = 1 << 17


def _mul_words(const: int, x: torch.Tensor, hi: torch.Tensor, lo: torch.Tensor):
    """The high and low words of ``const * x`` (``const`` odd, ``x < 2**32``) into
    ``hi`` and ``lo``.

    No int64 product reaches 2**63: signed overflow is undefined in the C++ that
    torch runs, so a wrapping product would be exact only on some builds. With
    ``p = x * (const >> 1)`` (below 2**63), ``const * x = 2p + x``: its high word is
    ``(p + (x >> 1)) >> 31`` and its low word ``(2 (p mod 2**31) + x) mod 2**32``.
    """
    torch.mul(x, const >> 1, out=lo)
    torch.bitwise_right_shift(x, 1, out=hi)
    hi.add_(lo).bitwise_right_shift_(31)
    lo.bitwise_and_(0x7FFFFFFF).mul_(2).add_(x).bitwise_and_(M32)


def philox4x32(c0, c1, c2, c3, k0, k1, n_rounds: int = N_ROUNDS):
    """Philox 4x32 (``triton.language.random.philox_impl``) on int64 word tensors.

    Parameters
    ----------
    c0, c1, c2, c3 : torch.Tensor or int
        The counter words, each in ``[0, 2**32)``; they broadcast together.
    k0, k1 : torch.Tensor or int
        The key words, in ``[0, 2**32)``.
    n_rounds : int
        Rounds of the cipher (Triton's default: 10).

    Returns
    -------
    tuple of 4 int64 tensors
        The output words, in ``[0, 2**32)``.
    """
    words = [torch.as_tensor(w, dtype=torch.int64) for w in (c0, c1, c2, c3)]
    keys = [k if isinstance(k, int) else torch.as_tensor(k, dtype=torch.int64)
            for k in (k0, k1)]
    shape = torch.broadcast_shapes(*[w.shape for w in words],
                                   *[k.shape for k in keys if not isinstance(k, int)])
    c0, c1, c2, c3 = (w.expand(shape).clone() for w in words)   # updated in place below
    k0, k1 = keys
    scratch = [torch.empty(shape, dtype=torch.int64) for _ in range(4)]
    for _ in range(n_rounds):
        hb, lb, ha, la = scratch
        _mul_words(ROUND_B, c2, hb, lb)
        _mul_words(ROUND_A, c0, ha, la)
        hb.bitwise_xor_(c1).bitwise_xor_(k0)
        ha.bitwise_xor_(c3).bitwise_xor_(k1)
        scratch = [c0, c1, c2, c3]
        c0, c1, c2, c3 = hb, lb, ha, la
        k0 = (k0 + KEY_A) & M32
        k1 = (k1 + KEY_B) & M32
    return c0, c1, c2, c3


def _key(seed):
    """``(k0, k1)``: the seed as a uint64 (``seed.to(tl.uint64)``, which sign-extends),
    its low and high words; Python ints for an int or a one-element tensor."""
    if isinstance(seed, torch.Tensor):
        if seed.dtype.is_floating_point or seed.dtype.is_complex or seed.dtype == torch.bool:
            raise TypeError(f"philox: the seed must be an integer, got {seed.dtype}")
        if seed.numel() != 1:
            seed = seed.to(torch.int64)
            return seed & M32, (seed >> 32) & M32
        seed = int(seed.reshape(()).to(torch.int64))
    seed = int(seed) & ((1 << 64) - 1)
    return seed & M32, seed >> 32


def randint(seed, offset: torch.Tensor, n_rounds: int = N_ROUNDS) -> torch.Tensor:
    """``tl.randint(seed, offset)``: one random 32-bit word per offset.

    Parameters
    ----------
    seed : int or integer torch.Tensor
        Any integer Triton accepts (int32, int64 or uint64 range); a tensor
        broadcasts against ``offset``.
    offset : torch.Tensor
        int32 offsets use their 32 bits only; int64 offsets also put their high
        32 bits in the second counter word (Triton's ``randint4x``).
    n_rounds : int
        Rounds of the cipher (Triton's default: 10).

    Returns
    -------
    torch.Tensor
        int64 values in ``[0, 2**32)``, of the broadcast shape of seed and offset.
    """
    if offset.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"philox: offsets must be int32 or int64, got {offset.dtype}")
    wide = offset.dtype == torch.int64
    k0, k1 = _key(seed)
    if isinstance(k0, torch.Tensor):
        offset, k0, k1 = torch.broadcast_tensors(offset, k0, k1)
        k0, k1 = k0.reshape(-1), k1.reshape(-1)
    flat = offset.reshape(-1).to(torch.int64)
    out = torch.empty_like(flat)
    for s in range(0, flat.numel(), CHUNK):
        part = flat[s:s + CHUNK]
        hi = (part >> 32) & M32 if wide else 0
        keys = (k0, k1) if isinstance(k0, int) else (k0[s:s + CHUNK], k1[s:s + CHUNK])
        out[s:s + CHUNK] = philox4x32(part & M32, hi, 0, 0, *keys, n_rounds=n_rounds)[0]
    return out.reshape(offset.shape)


def uint_to_uniform_float(x: torch.Tensor, out: torch.Tensor = None) -> torch.Tensor:
    """Triton's ``uint_to_uniform_float`` of 32-bit words held in an int64 tensor.

    Read as int32, a negative word becomes ``~w``: for the unsigned value ``x``
    that is ``min(x, 2**32 - 1 - x)``, in ``[0, 2**31)``. It is converted to float32
    (rounded to nearest, as Triton's ``sitofp``) and scaled in float32. ``out``, if
    given, receives the result (``x`` broadcasts to its shape).
    """
    folded = torch.minimum(x, M32 - x)
    if out is None:
        return folded.to(torch.float32).mul_(SCALE)
    out.copy_(folded)
    return out.mul_(SCALE)


def rand(seed, offset: torch.Tensor, n_rounds: int = N_ROUNDS) -> torch.Tensor:
    """``tl.rand(seed, offset)``: uniform float32 numbers in ``[0, 1)``, bit for bit.

    Parameters
    ----------
    seed, offset, n_rounds
        As for :func:`randint`.

    Returns
    -------
    torch.Tensor
        float32, of the broadcast shape of seed and offset.
    """
    return uint_to_uniform_float(randint(seed, offset, n_rounds))


def stream_seed(bits: torch.Tensor, stream: int) -> int:
    """The 64-bit Philox seed of random source ``stream`` in one step.

    ``bits`` holds the executor's seed element: a float32 whose 32 bits are the
    step's seed (the memory plan's buffers are float32, so the integer travels
    in the bits, where no rounding touches it). The step's seed is the key's
    low word and the stream (one per random source of the graph) its high word,
    so two sources of one step, or one source on two steps, never share a key.
    """
    low = int(bits.reshape(-1)[:1].view(torch.int32)[0]) & M32
    return low + (int(stream) << 32)


def stream_uniform(bits: torch.Tensor, stream: int, offset, out: torch.Tensor = None):
    """The ``cpu`` target's ``_philox_uniform``: ``tl.rand(stream_seed(bits, stream),
    offset)``, written into ``out`` when given.

    Parameters
    ----------
    bits : torch.Tensor
        A one-element float32 view of the seed buffer (see :func:`stream_seed`).
    stream : int
        The random source's stream number.
    offset : torch.Tensor or int
        The linear index of each value in the random source's shape (int64), or
        0 for a one-element source.
    out : torch.Tensor, optional
        float32 destination of the broadcast shape.
    """
    offset = torch.as_tensor(offset, dtype=torch.int64)
    if offset.dim() == 0:
        # a one-element source: the draw keeps the kernel's rank (``bits``'s view), so a
        # chain of operations on it alone still writes its output view in place
        offset = offset.expand(bits.shape)
    return uint_to_uniform_float(randint(stream_seed(bits, stream), offset), out)
