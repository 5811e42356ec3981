"""The package's import graph has no cycle, and the engine (``exactmax/engine/``: branch and
bound, relaxations, LPs, work units) imports nothing from ``exactmax/prove/`` (the routes and
commands depend on the engine, never the reverse).  Issue #32.

The graph is read from the source with ``ast``, without importing anything.  Its edges are
the imports a module runs when it is first imported: the statements of the module's body,
including those inside ``if`` / ``try`` / ``with`` blocks and class bodies at top level
(``if TYPE_CHECKING:`` blocks too: they are not run, but a cycle through them is one edit away
from a real one).  Imports inside a function body are lazy (the CLI's pattern: a command loads
what it needs when it runs): they are not edges of the module-level graph.

The module-level graph must have no cycle.  So must the graph with the lazy imports added:
the two cycles issue #32 names (``prove/command`` <-> ``prove/tolerance_command``, and
``search`` <-> ``prove/verify`` through ``prove/pullback``) both ran through a function-level
import, as did ``strategies`` <-> ``search/counterexample``; the second check is the one that
failed before they were broken.  The direction check counts lazy imports too: a lazy import is
still a dependency.

``import a.b``, ``from a.b import c`` and ``from .. import c`` are resolved to the module they
load: ``a.b``, then ``a.b.c`` when c is a submodule, else ``a.b`` itself.

One exception (issue #33): the package's own ``__getattr__`` (PEP 562) in
``exactmax/__init__.py``, which loads the Python API (``exactmax.verify``, ...: ``exactmax/api.py``)
when one of its names is first asked for.  The API depends on the whole package, and modules
import ``__version__`` from ``exactmax``, so that lazy edge would close a cycle through every
command; it is not one, because the package's body imports nothing of the package and the
modules import nothing from ``exactmax`` but ``__version__``, which the package assigns before
anything else runs (``test_the_package_itself_is_a_facade``).  Those two guards hold the
exception to what it is.
"""

import ast
import os

import exactmax

PACKAGE = os.path.dirname(exactmax.__file__)
ROOT = os.path.dirname(PACKAGE)


ROOT_PACKAGE = "exactmax"


def _is_facade(node: ast.AST) -> bool:
    """The package's module-level ``def __getattr__`` (PEP 562)."""
    return isinstance(node, ast.FunctionDef) and node.name == "__getattr__"


def _module_name(path: str) -> str:
    parts = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _sources() -> dict[str, str]:
    """Module name -> path, for every .py file of the package."""
    out = {}
    for root, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                out[_module_name(path)] = path
    return out


def _import_nodes(tree: ast.AST, lazy: bool):
    """The Import / ImportFrom nodes of the module; with ``lazy``, those in function bodies
    too."""
    stack = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif lazy or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


def imports_of(name: str, path: str, modules, lazy: bool = False, source: str | None = None):
    """The modules of the package that module ``name`` (file ``path``) imports (see the
    module's docstring), sorted."""
    is_package = path.endswith("__init__.py")
    package = name.split(".") if is_package else name.split(".")[:-1]
    tree = ast.parse(open(path).read() if source is None else source)
    if name == ROOT_PACKAGE:  # its __getattr__ is the API's lazy facade (module docstring)
        tree.body = [n for n in tree.body if not _is_facade(n)]
    out = set()
    for node in _import_nodes(tree, lazy):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            targets = [
                f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names
            ]
        out |= {t for t in targets if t in modules and t != name}
    return sorted(out)


def import_graph(lazy: bool = False, sources: dict | None = None) -> dict[str, list[str]]:
    modules = _sources()
    sources = sources or {}
    return {
        name: imports_of(name, path, modules, lazy, sources.get(name))
        for name, path in sorted(modules.items())
    }


def find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A cycle of the graph as [m0, m1, ..., m0], or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in graph.get(m, ()):
            if state.get(n) == 1:
                return path[path.index(n) :] + [n]
            if n not in state and (found := visit(n)) is not None:
                return found
        path.pop()
        state[m] = 2
        return None

    for m in graph:
        if m not in state and (found := visit(m)) is not None:
            return found
    return None


def test_the_module_level_import_graph_has_no_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle at module level: " + " -> ".join(cycle or ())


def test_no_cycle_through_the_lazy_imports_either():
    """With the imports inside functions added as edges: a cycle there is a dependency that
    runs both ways, one edit away from a module-level one."""
    cycle = find_cycle(import_graph(lazy=True))
    assert cycle is None, "import cycle (lazy imports counted): " + " -> ".join(cycle or ())


def test_the_package_itself_is_a_facade():
    """What makes the exception for ``exactmax/__init__.py``'s ``__getattr__`` safe (module
    docstring): the package's body imports nothing of the package (only its ``__getattr__``
    does, on first use of an API name), and every other module imports from ``exactmax`` only
    ``__version__``, never an API name (which would be a real cycle)."""
    assert import_graph(lazy=True)[ROOT_PACKAGE] == []
    modules = _sources()
    offences = []
    for name, path in sorted(modules.items()):
        if name == ROOT_PACKAGE:
            continue
        is_package = path.endswith("__init__.py")
        package = name.split(".") if is_package else name.split(".")[:-1]
        for node in _import_nodes(ast.parse(open(path).read()), lazy=True):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                if mod == ROOT_PACKAGE:
                    offences += [
                        f"{name}: from {mod} import {a.name}"
                        for a in node.names
                        if f"{mod}.{a.name}" not in modules and a.name != "__version__"
                    ]
    assert offences == []
    # and the exception is that one function only: an import in the package's body counts
    root = os.path.join(PACKAGE, "__init__.py")
    body = open(root).read() + "\nfrom . import api\n"
    assert imports_of(ROOT_PACKAGE, root, modules, source=body) == ["exactmax.api"]
    facade = "def __getattr__(name):\n    from . import api\n"
    assert imports_of(ROOT_PACKAGE, root, modules, lazy=True, source=facade) == []
    other = "def helper():\n    from . import api\n"
    assert imports_of(ROOT_PACKAGE, root, modules, lazy=True, source=other) == ["exactmax.api"]


def test_the_engine_imports_nothing_from_prove():
    """prove/ (the routes and commands) depends on engine/, never the reverse: not even lazily."""
    graph = import_graph(lazy=True)
    assert any(m.startswith("exactmax.engine.") for m in graph)
    offences = [
        f"{m} imports {n}"
        for m, targets in graph.items()
        if m == "exactmax.engine" or m.startswith("exactmax.engine.")
        for n in targets
        if n == "exactmax.prove" or n.startswith("exactmax.prove.")
    ]
    assert offences == []


def test_the_graph_sees_relative_imports_and_cycles():
    """The checks can fail: ``from . import x`` and ``from ..a import b`` make edges, the same
    imports inside a function make none (unless lazy ones are counted), and a cycle is found
    and printed in order."""
    modules = _sources()
    name, path = "exactmax.kernel.rational", os.path.join(PACKAGE, "kernel", "rational.py")
    src = "from . import affine\nfrom ..io.models import load_model\nfrom .. import jsonout\n"
    assert imports_of(name, path, modules, source=src) == [
        "exactmax.io.models",
        "exactmax.jsonout",
        "exactmax.kernel.affine",
    ]
    lazy = "def f():\n    from . import affine\n"
    assert imports_of(name, path, modules, source=lazy) == []
    assert imports_of(name, path, modules, lazy=True, source=lazy) == ["exactmax.kernel.affine"]
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["b"], "b": [], "c": ["a", "b"]}) is None
    # the package's own graph with one edge back: kernel/affine.py imports kernel/rational.py
    back = open(path).read() + "\nfrom .affine import Affine\n"
    assert "exactmax.kernel.rational" in import_graph()["exactmax.kernel.affine"]
    cycle = find_cycle(import_graph(sources={name: back}))
    assert cycle is not None and cycle[0] == cycle[-1]
    assert sorted(cycle[1:]) == ["exactmax.kernel.affine", "exactmax.kernel.rational"]
