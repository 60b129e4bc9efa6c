"""``mx.viz``: a network's layer table (``print_summary``) and its graph drawn with
Graphviz (``plot_network``), as mxnet 1.9.1 prints and draws them.

Both read the symbol's JSON (the nodes in mxnet's order) and, given input shapes,
the shapes ``get_internals().infer_shape`` infers. The table and its parameter
counts follow mxnet's rules, including where those count other than the arrays a
layer owns, so that the printed table equals mxnet's:

* a layer's "previous layers" are its inputs that are operators, plus node 0 (the
  first variable, usually ``data``), which mxnet counts as a head: mxnet reads the
  first head entry ``[node, output, version]`` as a set of node ids;
* ``Convolution`` counts ``C_in * num_filter / num_group * prod(kernel)`` (+
  ``num_filter`` for the bias), ``FullyConnected`` ``(C_in + 1) * num_hidden`` (no
  ``+ 1`` with ``no_bias``), where ``C_in`` is the sum of axis 1 of the previous
  layers' outputs (for a 4-D input to ``FullyConnected`` that is the channels, not
  the flattened size); ``BatchNorm`` counts ``2 * channels`` (gamma, beta);
  ``Embedding`` ``input_dim * output_dim``; every other operator 0;
* without ``shape`` no shapes are known: ``C_in`` is 0.
"""
from __future__ import annotations

import json
import re
import warnings

import numpy as np

from compiler.errors import MXNetError
from compiler.symbol import Symbol

__all__ = ["print_summary", "plot_network"]

# colours of mxnet's drawings, by kind of node
_PALETTE = {"input": "#8dd3c7", "weighted": "#fb8072", "activation": "#ffffb3",
            "norm": "#bebada", "pool": "#80b1d3", "shape": "#fdb462", "softmax": "#b3de69",
            "other": "#fccde5"}
_WEIGHT_SUFFIXES = ('_weight', '_bias', '_beta', '_gamma', '_moving_var', '_moving_mean',
                    '_running_var', '_running_mean')


def _ints(text):
    """The integers written in an attribute such as ``"(3, 3)"``, as strings."""
    return re.findall(r"\d+", str(text))


def _shapes(symbol, shape):
    """``{output name: shape}`` of every internal output for input ``shape``.

    Inferred on the graph, node by node, so that two variables of one name (which
    ``plot_network`` warns about, as mxnet's) each get their own shape."""
    from compiler.passes.infer_shapes import infer_shapes
    internals = symbol.get_internals()
    graph = internals.to_graph(distinct_names=False)
    try:
        infer_shapes(graph, {k: tuple(v) for k, v in shape.items()})
    except MXNetError as err:
        raise ValueError(f"Input shape is incomplete: {err}") from None
    return dict(zip(internals.list_outputs(), [graph.shape(h) for h in graph.heads]))


def _types(symbol, dtype):
    """``{output name: numpy type}`` of every internal output for input ``dtype``,
    inferred on the graph as :func:`_shapes` does."""
    from compiler.passes.infer_shapes import infer_shapes
    internals = symbol.get_internals()
    graph = internals.to_graph(distinct_names=False)
    try:
        infer_shapes(graph, {}, partial=True,
                     dtypes={k: np.dtype(v).name for k, v in dtype.items()})
    except MXNetError as err:
        raise ValueError(f"Input type is incomplete: {err}") from None
    types = [graph.dtype(h) for h in graph.heads]
    if any(t is None for t in types):
        raise ValueError("Input type is incomplete")
    return dict(zip(internals.list_outputs(), [np.dtype(t).type for t in types]))


def _output_key(node):
    """The internal output name of a node's (first) output."""
    return node["name"] if node["op"] == "null" else node["name"] + "_output"


def _layer_params(node, c_in, shape_of):
    """The parameter count mxnet's table gives a layer (rules in the module docstring)."""
    op, attrs = node["op"], node.get("attrs", {})
    if op == "Convolution":
        count = c_in * int(attrs["num_filter"]) // int(attrs.get("num_group", "1"))
        for k in _ints(attrs["kernel"]):
            count *= int(k)
        return count if attrs.get("no_bias") == "True" else count + int(attrs["num_filter"])
    if op == "FullyConnected":
        bias = 0 if attrs.get("no_bias") == "True" else 1
        return (c_in + bias) * int(attrs["num_hidden"])
    if op == "BatchNorm":
        out = shape_of(_output_key(node))
        return 2 * int(out[1]) if out is not None else 0
    if op == "Embedding":
        return int(attrs["input_dim"]) * int(attrs["output_dim"])
    return 0


def print_summary(symbol, shape=None, line_length=120, positions=[.44, .64, .74, 1.]):  # noqa: B006
    """Print a table of the network's layers, as mxnet's ``print_summary``.

    One row per operator (and the first variable): ``name(op)``, the output
    shape without the batch axis, the parameter count, and the previous layers
    (one per row after the first); then the total.

    Parameters
    ----------
    symbol : Symbol
        The network.
    shape : dict of str to tuple, optional
        Input shapes, ``{'data': (1, 1, 28, 28)}``; without them no shapes are shown.
    line_length : int
        Width of the table in characters.
    positions : list of float or int
        Where each of the four columns ends: fractions of ``line_length`` (when
        the last is at most 1) or character positions.

    Returns
    -------
    None
        The table goes to standard output.

    Raises
    ------
    TypeError
        If ``symbol`` is not a Symbol.
    ValueError
        If ``shape`` does not determine every shape.
    """
    if not isinstance(symbol, Symbol):
        raise TypeError("symbol must be Symbol")
    shapes = _shapes(symbol, shape) if shape is not None else {}

    def shape_of(key):
        return shapes.get(key)

    conf = json.loads(symbol.tojson())
    nodes = conf["nodes"]
    as_heads = set(conf["heads"][0])          # mxnet's reading: see the module docstring
    stops = [int(line_length * p) for p in positions] if positions[-1] <= 1 else positions

    def row(fields):
        line = ""
        for field, stop in zip(fields, stops):
            line = (line + str(field))[:stop].ljust(stop)
        print(line)

    print('_' * line_length)
    row(['Layer (type)', 'Output Shape', 'Param #', 'Previous Layer'])
    print('=' * line_length)
    total = 0
    for i, node in enumerate(nodes):
        if node["op"] == "null" and i > 0:
            continue
        out = shape_of(_output_key(node)) if (node["op"] != "null" or i in as_heads) else None
        previous, c_in = [], 0
        if node["op"] != "null":
            for src, _, _ in node["inputs"]:
                before = nodes[src]
                if before["op"] == "null" and src not in as_heads:
                    continue
                previous.append(before["name"])
                seen = shape_of(_output_key(before))
                if seen is not None:
                    c_in += int(seen[1])
        params = _layer_params(node, c_in, shape_of)
        total += params
        row([f"{node['name']}({node['op']})",
             "x".join(str(d) for d in (out[1:] if out is not None else ())),
             params, previous[0] if previous else ''])
        for name in previous[1:]:
            row(['', '', '', name])
        print(('=' if i == len(nodes) - 1 else '_') * line_length)
    print(f"Total params: {total}")
    print('_' * line_length)


def _node_look(node):
    """The label and fill colour mxnet's drawing gives an operator node."""
    op, name, attrs = node["op"], node["name"], node.get("attrs", {})
    if op == "Convolution":
        stride = "x".join(_ints(attrs["stride"])) if "stride" in attrs else "1"
        return (f"Convolution\n{'x'.join(_ints(attrs['kernel']))}/{stride}, "
                f"{attrs['num_filter']}", _PALETTE["weighted"])
    if op == "FullyConnected":
        return f"FullyConnected\n{attrs['num_hidden']}", _PALETTE["weighted"]
    if op == "BatchNorm":
        return name, _PALETTE["norm"]
    if op == "Activation":
        return f"Activation\n{attrs['act_type']}", _PALETTE["activation"]
    if op == "LeakyReLU":
        return f"LeakyReLU\n{attrs.get('act_type', 'Leaky')}", _PALETTE["activation"]
    if op == "Pooling":
        kernel = "x".join(_ints(attrs["kernel"])) if "kernel" in attrs else "[]"
        stride = "x".join(_ints(attrs["stride"])) if "stride" in attrs else "1"
        return f"Pooling\n{attrs['pool_type']}, {kernel}/{stride}", _PALETTE["pool"]
    if op in ("Concat", "Flatten", "Reshape"):
        return name, _PALETTE["shape"]
    if op == "Softmax":
        return name, _PALETTE["softmax"]
    return (attrs["op_type"] if op == "Custom" else name), _PALETTE["other"]


def plot_network(symbol, title="plot", save_format='pdf', shape=None, dtype=None,  # noqa: B006
                 node_attrs={}, hide_weights=True):
    """Draw the network as a ``graphviz.Digraph``, as mxnet's ``plot_network``.

    Operators are boxes labelled with their key attributes, inputs are ovals;
    an edge runs from each operator back to each of its inputs, labelled with
    the input's shape (without the batch axis) and dtype when given.

    Parameters
    ----------
    symbol : Symbol
        The network.
    title : str
        The graph's name (and file name when rendered).
    save_format : str
        The format ``render()`` writes (``'pdf'``, ``'png'``, ``'svg'`` ...).
    shape : dict of str to tuple, optional
        Input shapes; edges are then labelled with shapes.
    dtype : dict of str to numpy dtype, optional
        Input types; edges are then labelled with types.
    node_attrs : dict
        Graphviz node attributes that replace the defaults (``{"fixedsize": "false"}``).
    hide_weights : bool
        Leave out parameter variables (``*_weight``, ``*_bias``, ...) and their
        edges; with False their edges lead to unlabelled default nodes.

    Returns
    -------
    graphviz.Digraph
        ``.source`` is the dot text; ``.render()`` needs Graphviz's ``dot`` program.

    Raises
    ------
    TypeError
        If ``symbol`` is not a Symbol.
    ValueError
        If ``shape`` or ``dtype`` does not determine every output.
    """
    try:
        from graphviz import Digraph
    except ImportError as err:  # a dependency of symtriton; missing only in a broken install
        raise ImportError("Draw network requires graphviz library") from err
    if not isinstance(symbol, Symbol):
        raise TypeError("symbol must be a Symbol")
    shapes = _shapes(symbol, shape) if shape is not None else None
    types = _types(symbol, dtype) if dtype is not None else None
    nodes = json.loads(symbol.tojson())["nodes"]
    names = [node["name"] for node in nodes]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        warnings.warn("There are multiple variables with the same name in your graph, this "
                      "may result in cyclic graph. Repeated names: " + ','.join(repeated),
                      RuntimeWarning)
    defaults = {"shape": "box", "fixedsize": "true", "width": "1.3", "height": "0.8034",
                "style": "filled"}
    defaults.update(node_attrs)
    dot = Digraph(name=title, format=save_format)
    hidden = set()
    for node in nodes:
        attr = dict(defaults)
        if node["op"] == "null":
            if node["name"].endswith(_WEIGHT_SUFFIXES):
                if hide_weights:
                    hidden.add(node["name"])
                continue                     # shown (if at all) as a bare node of its edge
            attr["shape"] = "oval"
            label, attr["fillcolor"] = node["name"], _PALETTE["input"]
        else:
            label, attr["fillcolor"] = _node_look(node)
        dot.node(name=node["name"], label=label, **attr)
    for node in nodes:
        if node["op"] == "null":
            continue
        inputs = node["inputs"][:1] if node["op"] == '_contrib_BilinearResize2D' \
            else node["inputs"]
        for src, _, _ in inputs:
            before = nodes[src]
            if before["name"] in hidden:
                continue
            key = _output_key(before)
            if before["op"] != "null" and "num_outputs" in before.get("attrs", {}):
                key += str(int(before["attrs"]["num_outputs"]) - 1)   # mxnet labels the last
            label = ""
            if shapes is not None:
                label = "x".join(str(d) for d in shapes[key][1:])
            if types is not None:
                label += f"({types[key].__name__})"
            dot.edge(tail_name=node["name"], head_name=before["name"], label=label,
                     dir="back", arrowtail="open")
    return dot
