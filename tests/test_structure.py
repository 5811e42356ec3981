"""The package's import graph: no cycle through the command line, and a kernel that imports
nothing but itself, the standard library and the one rational backend (architecture.md)."""

import ast
import os
import sys

import exactmax

PACKAGE = os.path.dirname(exactmax.__file__)


def _imports(path: str, source: str | None = None) -> list[str]:
    """Absolute names of every module imported anywhere in the file (function bodies too)."""
    package = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].split(os.sep)[:-1]
    out = []
    for node in ast.walk(ast.parse(open(path).read() if source is None else source)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            out.append(mod)
            out += [f"{mod}.{a.name}" for a in node.names]
    return out


def _modules():
    for root, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                yield os.path.join(root, f)


def test_no_module_imports_the_command_line():
    """cli.py imports the command modules; none of them may import cli.py back."""
    offenders = [os.path.relpath(p, PACKAGE) for p in _modules()
                 if not p.endswith(("cli.py", "__main__.py"))
                 and "exactmax.cli" in _imports(p)]
    assert offenders == []


def test_the_kernel_imports_only_itself_the_standard_library_and_flint():
    allowed = set(sys.stdlib_module_names) | {"flint"}
    for path in _modules():
        if os.sep + "kernel" + os.sep not in path:
            continue
        for name in _imports(path):
            top = name.split(".")[0]
            assert top in allowed or name.startswith("exactmax.kernel"), (path, name)


def test_the_scan_sees_imports_inside_functions_and_relative_ones():
    """The scan itself can fail: a function-level relative import of the CLI is caught."""
    path = os.path.join(PACKAGE, "softmax", "command.py")
    src = open(path).read()
    assert "exactmax.cli" not in _imports(path, src)
    assert "exactmax.cli" in _imports(path, src + "\n\ndef _f():\n    from ..cli import main\n")
    assert "exactmax.cli.main" in _imports(path, "from exactmax.cli import main\n")
