"""Every symbolic operator of mxnet 1.9.1 has mxnet-made fixtures, replayed.

For each public function of ``mx.sym``, ``mx.sym.random``, ``mx.sym.linalg`` and
``mx.sym.contrib`` in ``tests/fixtures/mxnet_operator_names.json`` (not ``*_v1``, not
the non-operators), the registry operators it makes must appear in a case that mxnet
recorded (a node of its symbol JSON, control-flow subgraphs included, or the ``op``
of an operator-by-operator case) in a fixture family some test replays on both cpu
targets. Where the operator has a gradient, some such case must also record mxnet's
gradient through it. The few that cannot have such a fixture are in ``EXCEPTIONS``,
each with its reason; the table is exact both ways, as the catalogue's ``NOT_YET``.

A fixture family is any ``tests/fixtures/*.json`` holding a ``cases`` list (or dict) of
cases that name a symbol (a file or inline JSON) or an ``op``, whose numbers are in an
``.npz`` (``arrays`` of the case, or the family's own). Families added later in either
form are read without touching this file. The operators no other family held have
theirs in ``cases_cov_index.json`` (``tests/fixtures/make_coverage_fixtures.py``,
replayed by ``tests/compiler/test_mxnet_fixtures_coverage.py``).
"""
from __future__ import annotations

import ast
import functools
import glob
import importlib
import json
import os
import re

import numpy as np
import pytest

import module_api as mx
from compiler.ops.registry import REGISTRY
from tests.compiler import test_mxnet_fixtures as replay
from tests.compiler.test_operator_catalogue import NOT_YET

FIXTURES = replay.FIXTURES
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ------------------------------------------------------------- where the fixtures are

def _graph_ops(graph, trains, grad_vars, found):
    """Record each operator node of a symbol JSON graph (and its subgraphs) in
    ``found``: op name -> whether mxnet's gradient flows through it in this case."""
    nodes = graph.get("nodes", [])
    needs = []
    for node in nodes:
        if node["op"] == "null":
            needs.append(trains and node["name"] in grad_vars)
            continue
        flows = trains and any(needs[i] for i, *_ in node.get("inputs", []))
        found[node["op"]] = found.get(node["op"], False) or flows
        for sub in node.get("subgraphs", []) or []:
            # a subgraph's variables stand for the loop's data and states
            _graph_ops(sub, trains, {n["name"] for n in sub.get("nodes", [])}, found)
        needs.append(flows)


def _symbol_graph(case):
    text = case["symbol"]
    if text.lstrip().startswith("{"):
        return json.loads(text)
    with open(os.path.join(FIXTURES, text)) as f:
        return json.load(f)


def _grad_vars(case, graph):
    """The variables mxnet recorded a gradient of in this case (``grad_req`` as
    ``simple_bind`` reads it; no ``grad_req``: every argument, as conv/pool cases bind)."""
    req = case.get("grad_req", "write")
    names = [n["name"] for n in graph["nodes"] if n["op"] == "null"]
    if isinstance(req, str):
        return set(names) if req != "null" else set()
    return {n for n in names if req.get(n, "null") != "null"}


@functools.lru_cache(maxsize=None)
def _npz_keys(path):
    with np.load(path) as z:
        return tuple(z.files)


@functools.lru_cache(maxsize=None)
def _source(path):
    with open(path) as f:
        return f.read()


def _case_ops(name, case, family_npz):
    """{op: gradient recorded through it} of one case, or None when it holds no numbers."""
    if "arrays" in case:
        if not os.path.exists(os.path.join(FIXTURES, case["arrays"])):
            return None
    elif family_npz is None:
        return None
    if "symbol" in case:
        graph = _symbol_graph(case)
        trains = "train" in case.get("modes", ["train"])
        found = {}
        _graph_ops(graph, trains, _grad_vars(case, graph), found)
        return found
    if "op" in case:
        keys = _npz_keys(family_npz)
        grads = any(k in (f"{name}:grad", f"{name}/grad") or
                    k.startswith((f"{name}:grad_", f"{name}/grad_")) for k in keys)
        return {case["op"]: grads}
    return None


def _families():
    """{fixture file name: [(case name, {op: gradient recorded})]}, every family."""
    out = {}
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*.json"))):
        try:
            with open(path) as f:
                record = json.load(f)
        except ValueError:
            continue
        cases = []
        for value in (record.values() if isinstance(record, dict) else ()):
            if isinstance(value, dict):     # {case name: case}
                value = [dict(c, name=k) for k, c in value.items() if isinstance(c, dict)]
            if isinstance(value, list):     # ``cases``, ``bind_cases`` ...
                cases += [c for c in value if isinstance(c, dict) and "name" in c and
                          ("symbol" in c or "op" in c)]
        npz = path[:-len(".json")] + ".npz"
        npz = npz if os.path.exists(npz) else None
        found = [(c.get("name", "?"), _case_ops(c.get("name", "?"), c, npz)) for c in cases]
        found = [(n, ops) for n, ops in found if ops]
        if found:
            out[os.path.basename(path)] = found
    return out


# ------------------------------------------------------------------ who replays them

def _mentions(text, family):
    """``family`` named in ``text`` as a whole file name (not ``shape_cases_index.json``
    for ``cases_index.json``)."""
    return family in text and re.search(r"(?<![\w.])" + re.escape(family), text) is not None


def _segment(lines, node):
    """The source lines of one statement (``ast.get_source_segment`` without re-splitting
    the module for every statement)."""
    return "\n".join(lines[node.lineno - 1:node.end_lineno])


def _family_names(tree, lines, family):
    """Module-level names a test module binds from ``family`` (its cases, and its arrays
    when they are the family's own ``.npz``)."""
    names, npz = set(), family[:-len(".json")] + ".npz"
    for stmt in tree.body:
        seg = _segment(lines, stmt)
        if not (_mentions(seg, family) or _mentions(seg, npz)):
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(stmt.name)        # a pytest fixture that loads the family
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def _parametrized_names(module, fn_name):
    """The case names a test is parametrized over (its ``name`` argument), or None."""
    marks = getattr(getattr(module, fn_name), "pytestmark", [])
    for mark in marks:
        if mark.name != "parametrize":
            continue
        argnames = [a.strip() for a in (mark.args[0].split(",") if isinstance(
            mark.args[0], str) else mark.args[0])]
        if "name" in argnames:
            i = argnames.index("name")
            return {v if len(argnames) == 1 else v[i] for v in mark.args[1]}
    return None


def _replays(path, family):
    """What one test module replays of ``family`` on both cpu targets: {case name: whether
    gradients are compared} over the cases that a test taking the ``cpu_target`` fixture
    and reading the family's cases is parametrized over (its ``name`` argument)."""
    source = _source(path)
    if not _mentions(source, family):
        return {}
    tree, lines = ast.parse(source), source.splitlines()
    names = _family_names(tree, lines, family)
    cases = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef) or "cpu_target" not in \
                [a.arg for a in fn.args.args]:
            continue
        if not {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} & names:
            continue
        dotted = os.path.relpath(path[:-len(".py")], os.path.dirname(TESTS))
        module = importlib.import_module(dotted.replace(os.sep, "."))
        chosen = _parametrized_names(module, fn.name)
        seg = _segment(lines, fn)
        grads = "test_mxnet_case(" in seg or "grad" in seg
        for name in chosen or ():
            cases[name] = cases.get(name, False) or grads
    return cases


def _test_modules():
    paths = glob.glob(os.path.join(TESTS, "**", "test_*.py"), recursive=True)
    return sorted(p for p in paths if os.sep + "fixtures" + os.sep not in p)


def _registry_op(name):
    """The registry entry of a case's operator: a registry name, or (``op`` of an
    operator-by-operator case) a ``contrib`` / ``linalg`` member's public name."""
    for prefix in ("", "_contrib_", "_linalg_"):
        if prefix + name in REGISTRY:
            return REGISTRY[prefix + name]
    return None


def _coverage():
    """{OpDef id: [cases with it], ...} and {OpDef id: [cases recording its gradient]},
    over the families some test replays on both cpu targets."""
    modules = _test_modules()
    seen, with_grad = {}, {}
    for family, cases in _families().items():
        chosen = {}
        for replayed in (_replays(p, family) for p in modules):
            for name, grads in replayed.items():
                chosen[name] = chosen.get(name, False) or grads
        for name, ops in cases:
            if name not in chosen:
                continue
            for op, flows in ops.items():
                opdef = _registry_op(op)
                key = id(opdef) if opdef is not None else op
                seen.setdefault(key, []).append(f"{family}:{name}")
                if flows and chosen[name]:
                    with_grad.setdefault(key, []).append(f"{family}:{name}")
    return seen, with_grad


# ----------------------------------------------------- what each public name makes

def _v(*names):
    return [mx.sym.var(n) for n in names]


def _builds_random():
    r, (a, b, d) = mx.sym.random, _v("a", "b", "d")
    two = {"normal": ("loc", "scale"), "uniform": ("low", "high"), "gamma": ("alpha", "beta"),
           "negative_binomial": ("k", "p"), "generalized_negative_binomial": ("mu", "alpha")}
    one = {"exponential": "scale", "poisson": "lam"}
    out = {}
    for k, (p, q) in two.items():
        out[k] = lambda k=k, p=p, q=q: [getattr(r, k)(shape=(2,)),
                                        getattr(r, k)(**{p: a, q: b})]
        out[k + "_like"] = lambda k=k: [getattr(r, k + "_like")(d)]
    for k, p in one.items():
        out[k] = lambda k=k, p=p: [getattr(r, k)(shape=(2,)), getattr(r, k)(**{p: a})]
        out[k + "_like"] = lambda k=k: [getattr(r, k + "_like")(d)]
    out.update({
        "multinomial": lambda: [r.multinomial(d), r.multinomial(d, get_prob=True)],
        "randint": lambda: [r.randint(0, 5, shape=(2,))],
        "randn": lambda: [r.randn(2, 3)],
        "shuffle": lambda: [r.shuffle(d)],
    })
    return {f"sym.random.{k}": f for k, f in out.items()}


def _builds_control_flow():
    c, (x, s0) = mx.sym.contrib, _v("x", "s0")
    # bodies that return their variables: only the loop's own nodes (and mxnet's _copy)
    return {
        "sym.contrib.foreach": lambda: [c.foreach(lambda d, st: (d, st), x, [s0])[0]],
        "sym.contrib.while_loop": lambda: [c.while_loop(
            lambda i: i, lambda i: (i, [i]), [s0], max_iterations=2)[0]],
        "sym.contrib.cond": lambda: [c.cond(s0, lambda: x, lambda: s0)],
    }


def _builds():
    """Public names that are Python functions rather than one registry operator:
    how to call each (every form it has), to read the operators it makes."""
    S, (a, b, c, d) = mx.sym, _v("a", "b", "c", "d")
    pairs = {k: (lambda f=getattr(S, k): [f(a, b), f(a, 2.0), f(3.0, a)])
             for k in ("hypot", "maximum", "minimum", "pow", "power")}
    return {**{f"sym.{k}": f for k, f in pairs.items()}, **_builds_random(),
            **_builds_control_flow(),
            "sym.arange": lambda: [S.arange(3)],
            "sym.eye": lambda: [S.eye(3)],
            "sym.full": lambda: [S.full((2,), 1.0)],
            "sym.linspace": lambda: [S.linspace(0, 1, 5)],
            "sym.histogram": lambda: [S.histogram(a, bins=3, range=(0, 1)),
                                      S.histogram(a, bins=b)],
            "sym.split_v2": lambda: [S.split_v2(a, 2)],
            "sym.contrib.adamw_update": lambda: [S.contrib.adamw_update(
                a, b, c, d, mx.sym.var("r"), lr=0.1, eta=1.0)],
            "sym.contrib.mp_adamw_update": lambda: [S.contrib.mp_adamw_update(
                a, b, c, d, mx.sym.var("w32"), mx.sym.var("r"), lr=0.1, eta=1.0)],
            "sym.contrib.rand_zipfian": lambda: [S.contrib.rand_zipfian(a, 4, 10)[0]],
            "sym.contrib.uniform": lambda: [S.contrib.uniform(shape=(2,)),
                                            S.contrib.uniform(low=a, high=b)],
            }


# Python helpers of mxnet's namespaces that make no operator node
NOT_OPERATORS = {"sym.Group", "sym.Variable", "sym.var", "sym.load", "sym.load_json",
                 "sym.contrib.check_call"}


def _ops_of(symbols):
    ops = {}
    for s in symbols:
        _graph_ops(json.loads(s.tojson()), False, set(), ops)
    return {id(REGISTRY[op]): REGISTRY[op] for op in ops}


def _namespace(space):
    ns = mx
    for part in space.split("."):
        ns = getattr(ns, part)
    return ns


def _public_names():
    """{'space.name': {OpDef id: OpDef}} for every name this file holds to fixtures;
    names the catalogue has not reached yet (its ``NOT_YET``) are left out."""
    with open(os.path.join(FIXTURES, "mxnet_operator_names.json")) as f:
        spaces = json.load(f)["namespaces"]
    builds, out = _builds(), {}
    for space in ("sym", "sym.random", "sym.linalg", "sym.contrib"):
        ns = _namespace(space)
        for name in spaces[space]:
            key = f"{space}.{name}"
            if name.endswith("_v1") or key in NOT_OPERATORS or name in NOT_YET[space]:
                continue
            if key in builds:
                out[key] = _ops_of(builds[key]())
                continue
            fn = getattr(ns, name)
            prefix = "_" + space.split(".")[-1] + "_" if space != "sym" else ""
            # mx.sym.X made from registry operator X (``_make_op_function``), or
            # contrib.X / linalg.X from ``_contrib_X`` / ``_linalg_X``
            assert fn.__name__ in (name, prefix + name) and fn.__name__ in REGISTRY, \
                f"mx.{key} is a Python function ({fn.__name__}): add it to _builds()"
            opdef = REGISTRY[fn.__name__]
            out[key] = {id(opdef): opdef}
    return out


# ------------------------------------------------------------------- the exceptions

_RANDOM = "tests/compiler/test_ops_random.py"
_RANDOM_MORE = "tests/compiler/test_ops_random_more.py"
_SAMPLERS = {
    # a sampler: mxnet's generator is not ours (Philox in the kernel), so no mxnet
    # numbers can be replayed; the named test checks its moments and that one seed gives
    # the same bits on both cpu targets
    **{f"sym.{k}": _RANDOM for k in (
        "normal uniform random_normal random_uniform random_exponential sample_normal "
        "sample_uniform sample_exponential").split()},
    **{f"sym.{k}": _RANDOM_MORE for k in (
        "random_gamma random_generalized_negative_binomial random_negative_binomial "
        "random_poisson random_randint sample_gamma sample_generalized_negative_binomial "
        "sample_multinomial sample_negative_binomial sample_poisson shuffle").split()},
    **{f"sym.random.{k}": _RANDOM for k in (
        "normal normal_like uniform uniform_like exponential exponential_like "
        "randn").split()},
    **{f"sym.random.{k}": _RANDOM_MORE for k in (
        "gamma gamma_like generalized_negative_binomial generalized_negative_binomial_like "
        "multinomial negative_binomial negative_binomial_like poisson poisson_like randint "
        "shuffle").split()},
    "sym.contrib.uniform": _RANDOM,
    # mxnet's Python composition over the uniform sampler (its math ops have fixtures)
    "sym.contrib.rand_zipfian": "tests/compiler/test_ops_contrib_more.py",
}

_NO_SYMBOL = ("a backward operator mxnet 1.9.1 can neither compose into a Symbol (no "
              "named inputs: nnvm's 'Not enough argument to call operator') nor call "
              "through mx.nd ('expects 2 inputs, but got 0'); the forward operator's "
              "fixtures replay the gradient it computes")
_GPU_ONLY = ("mxnet 1.9.1 has only a GPU kernel (cuFFT / CUDA), and this oracle runs on "
             "CPU; checked against torch in tests/compiler/test_ops_contrib_more.py")
_MKLDNN_CONSTANTS = ("mxnet's pip build sends it to MKLDNN on every CPU, which quantizes "
                     "with other constants: its cases are recorded but not compared "
                     "(MKLDNN_DIFFERS, tests/compiler/test_mxnet_fixtures_quantization.py)")

# public name -> why no replayed mxnet-made fixture holds it (exact: one that gains a
# fixture fails test_the_exceptions_are_exact)
EXCEPTIONS = {
    **{k: f"sampler: moments and bit equality in {v}" for k, v in _SAMPLERS.items()},
    "sym.contrib.backward_hawkesll": _NO_SYMBOL,
    "sym.contrib.backward_index_copy": _NO_SYMBOL,
    "sym.contrib.backward_quadratic": _NO_SYMBOL,
    "sym.contrib.fft": _GPU_ONLY,
    "sym.contrib.ifft": _GPU_ONLY,
    "sym.contrib.count_sketch": _GPU_ONLY,
    "sym.contrib.quantize_v2": _MKLDNN_CONSTANTS,
    "sym.contrib.dequantize": _MKLDNN_CONSTANTS,
    "sym.contrib.quantize_asym": "mxnet 1.9.1's pip build crashes (segmentation fault) in "
                                 "it, symbolically and through mx.nd, with and without "
                                 "MKLDNN",
    # csr operators: no bound symbol can hold them here (an executor's csr arrays are
    # read through dense copies, whose zeros would count); mxnet's numbers are replayed
    # through mx.nd by tests/compiler/test_mxnet_fixtures_catalogue_rest.py (op 'csr')
    "sym.contrib.edge_id": "imperative on csr arrays only (a bound symbol holding it is "
                           "refused); mxnet's numbers replayed through mx.nd",
    "sym.contrib.getnnz": "imperative on csr arrays only (a bound symbol holding it is "
                          "refused); mxnet's numbers replayed through mx.nd",
    "sym.contrib.quantized_batch_norm": "its forward cases are replayed bit-equal; they "
                                        "bind without gradients, and mxnet's (zeros, "
                                        "MakeZeroGradNodes) are not recorded",
    "sym.fill_element_0index": "mxnet's Symbol of it cannot be composed (an NDArray "
                               "function, no gradient): mx.nd's numbers "
                               "(spatial_fill_element.npz) are replayed on both targets by "
                               "tests/compiler/test_ops_spatial_more.py",
}

# registry operator -> why mxnet records no gradient through it (its forward has fixtures)
NO_MXNET_GRADIENT = {
    "argmax_channel": "mxnet registers no FGradient (binding with a gradient refuses)",
    "batch_take": "mxnet registers no FGradient (binding with a gradient refuses)",
    "_histogram": "mxnet registers no FGradient (binding with a gradient refuses)",
    "_contrib_ModulatedDeformableConvolution": "mxnet's CPU backward is 'only implemented "
                                               "in GPU'",
    "_contrib_quantized_pooling": "mxnet's only CPU kernel (MKLDNN) fails in training: "
                                  "'incorrect workspace input'",
}


def _takes_inputs(opdef):
    return callable(opdef.arguments) or len(opdef.arguments) > 0


def _gaps(ops, seen, with_grad):
    """What one public name lacks: operators without a case, or without a gradient."""
    out = [f"{o.name}: no replayed case" for i, o in ops.items() if i not in seen]
    out += [f"{o.name}: no case records mxnet's gradient through it"
            for i, o in ops.items() if i in seen and i not in with_grad and
            o.gradient is not None and _takes_inputs(o) and o.name not in NO_MXNET_GRADIENT]
    return out


@pytest.fixture(scope="module")
def coverage():
    return _public_names(), *_coverage()


def test_every_operator_has_a_replayed_mxnet_fixture(coverage):
    names, seen, with_grad = coverage
    missing = {k: _gaps(ops, seen, with_grad) for k, ops in sorted(names.items())
               if k not in EXCEPTIONS}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, f"no mxnet-made fixture replayed on both cpu targets: {missing}"


def test_the_exceptions_are_exact(coverage):
    names, seen, with_grad = coverage
    not_yet = {f"{space}.{n}" for space, ns in NOT_YET.items() for n in ns}
    unknown = sorted(set(EXCEPTIONS) - set(names) - not_yet)
    assert not unknown, f"not public operator names of mxnet 1.9.1: {unknown}"
    arrived = sorted(k for k in EXCEPTIONS if k in names and
                     not _gaps(names[k], seen, with_grad))
    assert not arrived, f"{arrived} have replayed fixtures now: remove them from EXCEPTIONS"
    for op, why in NO_MXNET_GRADIENT.items():
        key = id(REGISTRY[op])
        assert key in seen, f"{op}: no replayed case at all ({why})"
        assert key not in with_grad, f"{op} has a gradient fixture now: " \
                                     f"remove it from NO_MXNET_GRADIENT"


def test_sampler_exceptions_name_the_tests_that_check_them():
    root = os.path.dirname(TESTS)
    for key, path in _SAMPLERS.items():
        with open(os.path.join(root, path)) as f:
            source = f.read()
        assert key.rsplit(".", 1)[1] in source, f"{path} does not check {key}"
        tests = [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)]
        assert any("moments" in t or "distribution" in t for t in tests), path


def test_replays_run_on_both_targets_and_compare_gradients():
    import inspect
    from tests import conftest
    source = inspect.getsource(conftest.cpu_target)
    assert 'params=["cpu", "interpret"]' in source
    body = inspect.getsource(replay.test_mxnet_case)
    assert "exe.grad_dict[arg]" in body and "aux_" in body
