"""How the source tree imports itself (docs/ARCHITECTURE.md, "Imports").

* Imports flow compiler -> runtime -> module_api, never back.
* No import circles: the module graph of compiler/, runtime/ and module_api/ is
  acyclic, counting imports inside functions too (a lazy import that only hides a
  circle is still a circle).
* A target package (compiler/triton, compiler/cpu) imports the tile IR, never the
  other target.

The graph has one node per module and one edge per import: relative imports are
resolved, and ``from pkg import name`` where ``name`` is a submodule of ``pkg``
imports that submodule. Importing ``a.b`` runs ``a/__init__.py`` first, but that is
not counted as an edge (every module would then depend on its package's
``__init__``); package ``__init__`` files stay free of imports for that reason,
except ``compiler/__init__.py``, whose public names are part of the contract.
"""
import ast
import os

import networkx as nx
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = ["compiler", "runtime", "module_api"]
TARGETS = ["compiler.triton", "compiler.cpu"]


def module_files(root: str, packages: list) -> dict:
    """The modules of ``packages`` under ``root``.

    Parameters
    ----------
    root : str
        The folder holding the top-level packages.
    packages : list of str
        Top-level package names to walk.

    Returns
    -------
    dict
        Dotted module name -> path of its file (a package maps to its ``__init__.py``).
    """
    found = {}
    for top in packages:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            if "__init__.py" not in files:
                dirs[:] = []
                continue
            package = os.path.relpath(folder, root).replace(os.sep, ".")
            for name in sorted(files):
                if name.endswith(".py"):
                    stem = name[:-3]
                    module = package if stem == "__init__" else f"{package}.{stem}"
                    found[module] = os.path.join(folder, name)
    return found


def _imported(node, module: str, is_package: bool, known: dict) -> list:
    """The known modules one import statement of ``module`` imports."""
    def known_prefix(dotted):
        parts = dotted.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        return ".".join(parts) or None

    if isinstance(node, ast.Import):
        return [known_prefix(alias.name) for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        origin = ".".join(base + ([node.module] if node.module else []))
    else:
        origin = node.module
    out = []
    for alias in node.names:
        sub = f"{origin}.{alias.name}"
        out.append(sub if sub in known else known_prefix(origin))
    return out


def import_graph(root: str, packages: list) -> nx.DiGraph:
    """The module import graph of ``packages`` (module- and function-level imports).

    Parameters
    ----------
    root : str
        The folder holding the top-level packages.
    packages : list of str
        Top-level package names whose modules are the nodes.

    Returns
    -------
    networkx.DiGraph
        An edge ``a -> b`` when module ``a`` imports module ``b``; its ``line``
        attribute is the line of the first such import.
    """
    known = module_files(root, packages)
    graph = nx.DiGraph()
    graph.add_nodes_from(known)
    for module, path in known.items():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        is_package = path.endswith("__init__.py")
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _imported(node, module, is_package, known):
                    if target and target != module and not graph.has_edge(module, target):
                        graph.add_edge(module, target, line=node.lineno)
    return graph


def import_cycles(graph: nx.DiGraph) -> list:
    """One cycle per strongly connected component of more than one module.

    Returns
    -------
    list of str
        Each cycle as ``a:12 -> b:3 -> a`` (the line of each import), sorted.
    """
    cycles = []
    for component in nx.strongly_connected_components(graph):
        if len(component) < 2:
            continue
        edges = nx.find_cycle(graph.subgraph(component), source=min(component))
        steps = [f"{a}:{graph.edges[a, b]['line']}" for a, b in edges]
        extra = (f"  ({len(component)} modules in this circle)"
                 if len(component) > len(edges) else "")
        cycles.append(" -> ".join(steps + [edges[0][0]]) + extra)
    return sorted(cycles)


def _bound_names(tree) -> set:
    """Names a module binds at its top level (``None`` when a star import or a module
    ``__getattr__`` makes the set open)."""
    names = set()

    def targets(node):
        if isinstance(node, ast.Name):
            return {node.id}
        if isinstance(node, (ast.Tuple, ast.List)):
            return set().union(*map(targets, node.elts)) if node.elts else set()
        return set()

    def visit(statements):
        for st in statements:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(st.name)
            elif isinstance(st, ast.Assign):
                for t in st.targets:
                    names.update(targets(t))
            elif isinstance(st, (ast.AnnAssign, ast.AugAssign)):
                names.update(targets(st.target))
            elif isinstance(st, (ast.Import, ast.ImportFrom)):
                for alias in st.names:
                    if alias.name == "*":
                        return False
                    names.add(alias.asname or alias.name.split(".")[0])
            for field in ("body", "orelse", "finalbody", "handlers"):
                if not isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    inner = getattr(st, field, [])
                    if field == "handlers":
                        inner = [s for h in inner for s in h.body]
                    if visit(inner) is False:
                        return False
        return True

    if visit(tree.body) is False or "__getattr__" in names:
        return None
    return names


def missing_imports(root: str, packages: list) -> list:
    """Imports of a module of ``packages`` that does not exist, or of a name it does not
    bind (a stale name would otherwise resolve through whatever else is on the path).

    Returns
    -------
    list of str
        ``module:line imports what`` for each.
    """
    known = module_files(root, packages)
    trees = {}

    def tree_of(module):
        if module not in trees:
            with open(known[module]) as f:
                trees[module] = ast.parse(f.read(), known[module])
        return trees[module]

    bad = []
    for module, path in known.items():
        is_package = path.endswith("__init__.py")
        for node in ast.walk(tree_of(module)):
            if isinstance(node, ast.Import):
                bad += [f"{module}:{node.lineno} imports {a.name}" for a in node.names
                        if a.name.split(".")[0] in packages and a.name not in known]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module
                if origin.split(".")[0] not in packages:
                    continue
                if origin not in known:
                    bad.append(f"{module}:{node.lineno} imports {origin}")
                    continue
                bound = _bound_names(tree_of(origin))
                bad += [f"{module}:{node.lineno} imports {origin}.{a.name}" for a in node.names
                        if a.name != "*" and f"{origin}.{a.name}" not in known
                        and bound is not None and a.name not in bound]
    return sorted(bad)


def cross_target_imports(graph: nx.DiGraph, targets: list) -> list:
    """Imports from one target package into another, as ``a:line imports b``."""
    def target_of(module):
        return next((t for t in targets if module == t or module.startswith(t + ".")), None)

    return sorted(f"{a}:{data['line']} imports {b}" for a, b, data in graph.edges(data=True)
                  if target_of(a) and target_of(b) and target_of(a) != target_of(b))


@pytest.fixture(scope="module")
def source_graph():
    return import_graph(ROOT, LAYERS)


@pytest.mark.parametrize("layer", LAYERS[:-1])
def test_no_layer_imports_a_layer_above_it(source_graph, layer):
    above = LAYERS[LAYERS.index(layer) + 1:]
    bad = [f"{a}:{data['line']} imports {b}" for a, b, data in source_graph.edges(data=True)
           if a.split(".")[0] == layer and b.split(".")[0] in above]
    assert not bad, "\n".join(sorted(bad))


def test_no_import_circles(source_graph):
    cycles = import_cycles(source_graph)
    assert not cycles, "import circles:\n" + "\n".join(cycles)


def test_a_target_never_imports_another_target(source_graph):
    bad = cross_target_imports(source_graph, TARGETS)
    assert not bad, "\n".join(bad)


def test_every_imported_module_and_name_exists():
    bad = missing_imports(ROOT, LAYERS)
    assert not bad, "\n".join(bad)


def test_the_graph_sees_the_source_tree(source_graph):
    """Guards the checks above against passing on an empty or misread graph."""
    assert source_graph.has_edge("compiler.triton.codegen", "compiler.ir.tile_program")
    assert source_graph.has_edge("runtime.executor", "compiler.symbol")
    assert source_graph.has_edge("module_api", "compiler.symbol")     # from compiler import symbol


def _plant(root, files: dict):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_planted_circle_is_reported(tmp_path):
    _plant(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\n",                        # a submodule by name
        "pkg/b.py": "import os\n\ndef late():\n    from .sub.c import f\n",   # inside a function
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "from ..a import thing\n",              # a name of a module
        "pkg/d.py": "import pkg.a\n",                            # outside the circle
    })
    graph = import_graph(str(tmp_path), ["pkg"])
    assert import_cycles(graph) == ["pkg.a:1 -> pkg.b:4 -> pkg.sub.c:1 -> pkg.a"]
    assert graph.has_edge("pkg.d", "pkg.a") and not graph.has_edge("pkg.a", "pkg.d")


def test_a_planted_cross_target_import_is_reported(tmp_path):
    _plant(tmp_path, {
        "top/__init__.py": "",
        "top/ir.py": "",
        "top/one/__init__.py": "",
        "top/one/render.py": "from ..ir import x\nfrom ..two import render\n",
        "top/two/__init__.py": "",
        "top/two/render.py": "from .. import ir\n",
    })
    graph = import_graph(str(tmp_path), ["top"])
    assert cross_target_imports(graph, ["top.one", "top.two"]) == [
        "top.one.render:2 imports top.two.render"]
    assert not import_cycles(graph)


def test_a_planted_stale_import_is_reported(tmp_path):
    _plant(tmp_path, {
        "pkg/__init__.py": "from .a import kept\n",
        "pkg/a.py": "kept = 1\n\ndef f():\n    from . import gone\n",   # no pkg/gone.py
        "pkg/b.py": "from pkg import kept, a\nfrom .a import moved\nimport pkg.old\n",
    })
    assert missing_imports(str(tmp_path), ["pkg"]) == [
        "pkg.a:4 imports pkg.gone", "pkg.b:2 imports pkg.a.moved", "pkg.b:3 imports pkg.old"]
