"""Fuzzing symbol JSON: a symbol file is data, never code.

Random structural and textual mutations of the mxnet-written fixture files
must either fail with :class:`MXNetError` (at load, shape inference or
compile time) or compile to kernels that contain no text taken from the
input. Every string the mutations inject carries a unique marker; the test
asserts the marker never shows up in any generated kernel source.
"""
import json
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.artifacts import cache
from compiler import symbol as sym
from compiler.artifacts.compile import compile_symbol
from compiler.errors import MXNetError
from compiler.ops.registry import prod

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")
NAMES = ("mlp", "lstm_cell", "ops")


def _fixture(name):
    with open(os.path.join(FIXTURES, f"{name}-symbol.json")) as f:
        doc = json.load(f)
    with open(os.path.join(FIXTURES, f"{name}-expected.json")) as f:
        shapes = {k: tuple(v) for k, v in json.load(f)["input_shapes"].items()}
    return doc, shapes


DOCS = {name: _fixture(name) for name in NAMES}

MARKER = "ZZq7mark"
# Compile only what stays small: the point is the source text, not the run time.
MAX_COMPILE_ELEMENTS = 1 << 16

HOSTILE_PIECES = ['"', "'", "\n", "\\", "\r", "\t", "\x00", "\u00e9", "\u4e2d", "\U0001F600",
                  "\u202e", "__import__('os')", "); import os; os.system('x') #", "{", "}",
                  "{{ k }}", "{% raw %}", "${x}", "%s", "(", ")", ",", "[", "]", "0", "-1",
                  "1e999", "nan", "inf", "None", "True", "(2, 3)", " ", ""]

hostile_text = st.builds(
    lambda parts, tag: MARKER + str(tag) + "".join(parts),
    st.lists(st.sampled_from(HOSTILE_PIECES), max_size=4),
    st.integers(0, 999))

huge_ints = st.sampled_from([0, -1, -2, 1, 2, 3, 7, 2 ** 31, 2 ** 31 - 1, 2 ** 63, -2 ** 63,
                             10 ** 12, 10 ** 30, 10 ** 400])
numeric_text = st.one_of(
    huge_ints.map(str),
    huge_ints.map(lambda n: f"({n}, 3)"),
    huge_ints.map(lambda n: f"({n},)"),
    huge_ints.map(lambda n: f"(3, {n}, 2)"),
    st.sampled_from(["1e999", "-1e999", "nan", "inf", "1e308", "0.5", "-0", "1" * 5000,
                     "(" * 200 + ")" * 200, "[" * 2000, "()", "(-1, -1)", "(0, 0)",
                     "(10**12,)", "9" * 400 + ".0"]))

scalars = st.one_of(st.none(), st.booleans(), huge_ints, hostile_text, numeric_text,
                    st.floats(allow_nan=True, allow_infinity=True))


def _values(depth=2):
    if depth == 0:
        return scalars
    inner = _values(depth - 1)
    return st.one_of(scalars, st.lists(inner, max_size=3),
                     st.dictionaries(st.one_of(hostile_text, st.sampled_from(
                         ["op", "name", "attrs", "inputs", "num_hidden", "shape", "axis",
                          "__shape__", "act_type", "no_bias"])), inner, max_size=3))


values = _values()


def _paths(obj, prefix=()):
    """Every (container path) in the JSON tree, including the root."""
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_paths(v, prefix + (i,)))
    return out


def _get(obj, path):
    for p in path:
        obj = obj[p]
    return obj


def _set(obj, path, value):
    if not path:
        return value
    _get(obj, path[:-1])[path[-1]] = value
    return obj


@st.composite
def mutate_once(draw, doc):
    """One structural mutation of ``doc`` (modified in place, returned)."""
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    good_nodes = isinstance(nodes, list) and nodes and all(isinstance(n, dict) for n in nodes)
    kind = draw(st.sampled_from(
        ["replace", "delete", "insert", "name", "attr", "attr_numeric", "input",
         "dup_name", "shape_hint", "deep", "heads", "swap_type",
         "name", "name", "name", "hidden_attr", "hidden_attr"]
        if good_nodes else ["replace", "delete", "insert", "swap_type"]))
    if kind in ("replace", "delete", "insert", "swap_type"):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        target = _get(doc, path)
        if kind == "replace":
            return _set(doc, path, draw(values))
        if kind == "swap_type":
            if isinstance(target, list):
                new = {str(i): v for i, v in enumerate(target)} if draw(st.booleans()) \
                    else json.dumps(target)
            elif isinstance(target, dict):
                new = list(target.values()) if draw(st.booleans()) else json.dumps(target)
            elif isinstance(target, str):
                new = draw(st.sampled_from([[target], {target: target}, len(target), None]))
            elif isinstance(target, (int, float)) and not isinstance(target, bool):
                new = draw(st.sampled_from([str(target), [target], None, float(target)]))
            else:
                new = draw(values)
            return _set(doc, path, new)
        if kind == "delete":
            if isinstance(target, dict) and target:
                del target[draw(st.sampled_from(sorted(target, key=str)))]
            elif isinstance(target, list) and target:
                del target[draw(st.integers(0, len(target) - 1))]
            return doc
        if isinstance(target, dict):
            key = draw(st.one_of(hostile_text, st.sampled_from(
                ["attrs", "attr", "param", "inputs", "name", "op", "num_hidden", "shape",
                 "__shape__", "__dtype__", "no_bias", "flatten", "axis"])))
            target[key] = draw(values)
        elif isinstance(target, list):
            target.insert(draw(st.integers(0, len(target))), draw(values))
        return doc
    i = draw(st.integers(0, len(nodes) - 1))
    node = nodes[i]
    if kind == "name":
        node["name"] = draw(hostile_text)
    elif kind == "dup_name":
        j = draw(st.integers(0, len(nodes) - 1))
        node["name"] = nodes[j].get("name")
    elif kind in ("attr", "attr_numeric"):
        attrs = node.get("attrs")
        if not isinstance(attrs, dict):
            attrs = node["attrs"] = {}
        keys = sorted(k for k in attrs if isinstance(k, str))
        key = draw(st.sampled_from(keys)) if keys and draw(st.booleans()) else draw(
            st.sampled_from(["num_hidden", "shape", "axis", "axes", "act_type", "scalar",
                             "no_bias", "flatten", "num_outputs", "dim", "input_dim",
                             "output_dim", "p", "begin", "end", "reps", "__shape__"]))
        attrs[key] = draw(hostile_text if kind == "attr" else numeric_text)
    elif kind == "hidden_attr":
        attrs = node.setdefault("attrs", {}) if isinstance(node.get("attrs", {}), dict) else {}
        key = draw(st.one_of(st.sampled_from(["__init__", "__lr_mult__", "__wd_mult__",
                                              "__dtype__", "__storage_type__", "__ctx_group__"]),
                             hostile_text.map(lambda t: f"__{t}__")))
        attrs[key] = draw(hostile_text)
    elif kind == "shape_hint":
        attrs = node.setdefault("attrs", {}) if isinstance(node.get("attrs", {}), dict) else {}
        attrs["__shape__"] = draw(numeric_text)
    elif kind == "input":
        inputs = node.get("inputs")
        entry = [draw(st.one_of(huge_ints, st.integers(-2, len(nodes) + 1))),
                 draw(st.one_of(st.integers(-1, 3), huge_ints)), 0]
        if isinstance(inputs, list) and inputs and draw(st.booleans()):
            inputs[draw(st.integers(0, len(inputs) - 1))] = entry
        else:
            node["inputs"] = (inputs if isinstance(inputs, list) else []) + [entry]
    elif kind == "deep":
        # a placeholder, expanded to nested lists in the text (see mutated_json)
        depth = draw(st.sampled_from([50, 2000, 100000]))
        node[draw(st.sampled_from(["inputs", "attrs", "name"]))] = f"@DEEP{depth}@"
    elif kind == "heads":
        doc["heads"] = [[draw(st.one_of(huge_ints, st.integers(-1, len(nodes)))),
                         draw(st.integers(-1, 3)), 0]]
    return doc


@st.composite
def mutated_json(draw):
    name = draw(st.sampled_from(NAMES))
    doc, shapes = DOCS[name]
    doc = json.loads(json.dumps(doc))
    for _ in range(draw(st.integers(1, 3))):
        doc = draw(mutate_once(doc))
    shapes = _renamed(DOCS[name][0], doc, shapes)
    text = json.dumps(doc)
    for depth in (50, 2000, 100000):
        text = text.replace(f'"@DEEP{depth}@"', "[" * depth + "0" + "]" * depth)
    if draw(st.integers(0, 4)) == 0:          # textual damage on top
        pos = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 20))
        text = text[:pos] + draw(st.sampled_from(['"', "\\", "{", "]", ",", "\n", "\u00e9",
                                                  MARKER, "'", ""])) + text[pos + cut:]
    return name, text, shapes


def _renamed(original, doc, shapes):
    """The input shapes, following variables the mutations renamed in place."""
    shapes = dict(shapes)
    try:
        pairs = list(zip(original["nodes"], doc["nodes"]))
        if len(original["nodes"]) != len(doc["nodes"]):
            return shapes
        for old, new in pairs:
            if old["name"] in shapes and isinstance(new.get("name"), str) \
                    and new.get("op") == "null" and new["name"] not in shapes:
                shapes[new["name"]] = shapes[old["name"]]
    except (KeyError, TypeError, AttributeError):
        pass
    return shapes


def _compile_and_check(s, shapes, training):
    root = tempfile.mkdtemp(prefix="symtriton-fuzz-")
    old = os.environ.get("SYMTRITON_CACHE_DIR")
    os.environ["SYMTRITON_CACHE_DIR"] = root
    cache.clear_memory_cache()
    try:
        grad_req = {n: "write" for n in s.list_arguments()} if training else None
        try:
            compile_symbol(s, shapes, training, grad_req, training)
        except MXNetError:
            return
        kdir = os.path.join(root, "kernels")
        for fname in os.listdir(kdir) if os.path.isdir(kdir) else ():
            with open(os.path.join(kdir, fname), encoding="utf-8") as f:
                src = f.read()
            assert MARKER not in src, f"input text reached kernel source {fname}"
    finally:
        cache.clear_memory_cache()
        if old is None:
            os.environ.pop("SYMTRITON_CACHE_DIR", None)
        else:
            os.environ["SYMTRITON_CACHE_DIR"] = old
        shutil.rmtree(root, ignore_errors=True)


def check_mutation(text, shapes, training):
    """Load, infer shapes and (when small) compile; only MXNetError may escape."""
    try:
        s = sym.load_json(text)
        inputs = set(s.list_inputs())
        given = {k: v for k, v in shapes.items() if k in inputs}
        arg_shapes, out_shapes, aux_shapes = s.infer_shape_partial(**given)
        s.list_outputs()
        s.tojson()
    except MXNetError:
        return
    known = [tuple(x) for x in arg_shapes + out_shapes + aux_shapes]
    if any(len(x) == 0 for x in known):
        return
    if max(prod(x) for x in known) > MAX_COMPILE_ELEMENTS:
        return
    _compile_and_check(s, given, training)


@pytest.mark.slow
@settings(max_examples=250, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(mutated_json(), st.booleans())
def test_mutated_symbol_json_fails_cleanly_or_compiles_clean(case, training):
    _, text, shapes = case
    check_mutation(text, shapes, training)


@pytest.mark.parametrize("name", NAMES)
def test_unmutated_fixtures_compile(name):
    """The harness itself: the reference files load, infer and compile."""
    doc, shapes = DOCS[name]
    s = sym.load_json(json.dumps(doc))
    assert s.infer_shape(**shapes)[0] is not None
    _compile_and_check(s, shapes, True)


@pytest.mark.parametrize("text", [
    "[" * 100000 + "]" * 100000,
    json.dumps({"nodes": [], "heads": []}),
    json.dumps({"nodes": [{"op": "null", "name": "x", "inputs": []}], "heads": [[0, 0, 0]] * 3,
                "attrs": {"mxnet_version": ["int", "\u4e2d"]}}),
    b"\xff\xfe not utf-8",
    None,
    12,
])
def test_garbage_documents(text):
    try:
        s = sym.load_json(text)
        s.infer_shape_partial()
    except MXNetError:
        pass


@pytest.mark.parametrize("value, words", [
    (str(10 ** 12), ["fc1_weight", "SYMTRITON_MAX_ELEMENTS"]),
    (str(2 ** 31), ["fc1_weight", "SYMTRITON_MAX_ELEMENTS"]),
    (str(10 ** 400), ["num_hidden"]),
])
def test_absurd_num_hidden_fails_before_allocation(value, words):
    doc, shapes = DOCS["mlp"]
    doc = json.loads(json.dumps(doc))
    fc = next(n for n in doc["nodes"] if n["op"] == "FullyConnected")
    fc["attrs"]["num_hidden"] = value
    with pytest.raises(MXNetError) as err:
        sym.load_json(json.dumps(doc)).infer_shape(**shapes)
    for w in [fc["name"]] + words:
        assert w in str(err.value), (w, str(err.value))
    assert len(str(err.value)) < 400


def test_absurd_counts_fail_when_parsed():
    doc = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                     {"op": "SliceChannel", "name": "split",
                      "attrs": {"num_outputs": str(10 ** 12)}, "inputs": [[0, 0, 0]]}],
           "heads": [[1, 0, 0]]}
    with pytest.raises(MXNetError, match="num_outputs"):
        sym.load_json(json.dumps(doc))


def test_oversized_input_shape_fails_with_names():
    doc, _ = DOCS["mlp"]
    s = sym.load_json(json.dumps(doc))
    with pytest.raises(MXNetError) as err:
        compile_symbol(s, {"data": (10 ** 6, 10 ** 6)})
    assert "data" in str(err.value) and "elements" in str(err.value)


def test_element_limit_is_configurable(monkeypatch):
    doc, shapes = DOCS["mlp"]
    s = sym.load_json(json.dumps(doc))
    monkeypatch.setenv("SYMTRITON_MAX_ELEMENTS", "100")
    with pytest.raises(MXNetError) as err:
        s.infer_shape(**shapes)
    assert "fc1" in str(err.value)
    monkeypatch.setenv("SYMTRITON_MAX_ELEMENTS", "not a number")
    with pytest.raises(MXNetError):
        s.infer_shape(**shapes)
