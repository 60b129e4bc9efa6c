"""``_sample_unique_zipfian``: distinct classes per row, mxnet's draw rule, its count of
draws, the same numbers on both cpu targets (an extern launch seeded by the step)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import module_api as mx
from compiler.errors import MXNetError
from module_api.distribution_checks import verify_generator

draw = mx.nd._internal._sample_unique_zipfian


def _first_class_probs(range_max):
    """P(class) of one draw lround(exp(u log R)) - 1, u uniform on [0, 1)."""
    log_r = math.log(range_max)
    edges = [0.0] + [math.log(v + 0.5) / log_r for v in range(1, range_max)] + [1.0]
    return [b - a for a, b in zip(edges, edges[1:])]


def test_rows_hold_distinct_classes_and_count_their_draws():
    classes, tries = draw(1000, shape=(3, 200))
    c, t = classes.asnumpy(), tries.asnumpy()
    assert c.dtype == np.int64 and t.dtype == np.int64
    assert c.shape == (3, 200) and t.shape == (3,)
    for row, n in zip(c, t):
        assert len(np.unique(row)) == 200
        assert row.min() >= 0 and row.max() < 1000
        assert n >= 200
    # a row that must take every class ends with all of them
    classes, tries = draw(6, shape=(2, 6))
    assert sorted(classes.asnumpy()[0].tolist()) == list(range(6))
    assert (tries.asnumpy() >= 6).all()


def test_first_draw_follows_mxnets_rule():
    """With one class per row, a row's class is one draw: chi-square against the rule's
    probabilities, and the small classes come first as in a Zipfian law."""
    probs = _first_class_probs(8)

    def generator(n):
        return draw(8, shape=(n, 1))[0].asnumpy().ravel()

    verify_generator(generator, list(range(8)), probs, nsamples=4000, nrepeat=3)
    assert probs[0] > probs[3] > probs[7]


def test_draw_counts_match_the_expected_count():
    """The mean count of draws to see k distinct classes, against a numpy simulation of
    the same rule."""
    rng = np.random.default_rng(0)
    log_r = math.log(50)

    def simulated():
        seen, n = set(), 0
        while len(seen) < 10:
            seen.add(int(np.floor(np.exp(rng.random() * log_r) + 0.5)) - 1)
            n += 1
        return n

    expected = np.mean([simulated() for _ in range(3000)])
    got = draw(50, shape=(3000, 10))[1].asnumpy().mean()
    assert abs(got - expected) < 0.04 * expected


@pytest.mark.parametrize("target", ["cpu", "interpret"])
def test_symbol_forward_is_seeded_and_the_same_on_both_targets(monkeypatch, target):
    monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
    s = mx.sym._internal._sample_unique_zipfian(range_max=40, shape=(2, 5), name="z")
    assert s.list_outputs() == ["z_output0", "z_output1"]
    exe = s.simple_bind(mx.cpu())
    mx.random.seed(11)
    first = [o.asnumpy().copy() for o in exe.forward()]
    second = [o.asnumpy().copy() for o in exe.forward()]
    mx.random.seed(11)
    again = [o.asnumpy() for o in exe.forward()]
    assert all((a == b).all() for a, b in zip(first, again))
    assert not (first[0] == second[0]).all()
    if target == "interpret":
        monkeypatch.setenv("SYMTRITON_CPU_TARGET", "cpu")
        cpu_exe = s.simple_bind(mx.cpu())
        mx.random.seed(11)
        assert all((a == o.asnumpy()).all() for a, o in zip(first, cpu_exe.forward()))


def test_errors_name_the_shape():
    with pytest.raises(MXNetError, match=r"num_sampled \(5\) cannot exceed .*range_max \(4\)"):
        draw(4, shape=(1, 5))
    with pytest.raises(MXNetError, match=r"shape must be \(batch_size, num_sampled\)"):
        draw(4, shape=(5,))
    with pytest.raises(MXNetError, match=r"range_max must be positive, got 0"):
        draw(0, shape=(1, 0))


def test_outputs_feed_other_operators_in_a_graph(monkeypatch):
    """In context: both outputs read by fused pointwise ops and a reduction after a view,
    while also kept as heads; the same numbers on both targets."""
    runs = {}
    for target in ("cpu", "interpret"):
        monkeypatch.setenv("SYMTRITON_CPU_TARGET", target)
        z = mx.sym._internal._sample_unique_zipfian(range_max=40, shape=(3, 4), name="z")
        classes = mx.sym.Cast(z[0], dtype="float32")
        per_row = mx.sym.sum(mx.sym.transpose(classes), axis=0) / \
            mx.sym.Cast(z[1], dtype="float32")
        exe = mx.sym.Group([z[0], z[1], per_row * 2 + 1]).simple_bind(mx.cpu())
        mx.random.seed(5)
        runs[target] = [o.asnumpy() for o in exe.forward()]
    drawn, tries, scored = runs["cpu"]
    np.testing.assert_allclose(scored, drawn.sum(1) / tries * 2 + 1, rtol=1e-6)
    assert all((a == b).all() for a, b in zip(runs["cpu"], runs["interpret"]))
