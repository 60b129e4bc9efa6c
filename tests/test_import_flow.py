"""Imports flow compiler -> runtime -> module_api, never back (the architecture's
first rule; docs/ARCHITECTURE.md says how the lower layers reach the upper ones)."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = ["compiler", "runtime", "module_api"]


def _imports(path):
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


@pytest.mark.parametrize("layer", LAYERS[:-1])
def test_no_layer_imports_a_layer_above_it(layer):
    above = LAYERS[LAYERS.index(layer) + 1:]
    bad = []
    for folder, _, files in os.walk(os.path.join(ROOT, layer)):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                for line, module in _imports(path):
                    if module.split(".")[0] in above:
                        bad.append(f"{os.path.relpath(path, ROOT)}:{line} imports {module}")
    assert not bad, "\n".join(bad)
