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


# cli.py parses the command line and dispatches; a command's logic lives with its subject
# (construct/command.py, prove/command.py, export/command.py, ...), reached through
# cli._command("<module>", "<function>"), so that cli.py stays small as commands are added.
CLI_FUNCTION_LINES = 60
"""The longest function cli.py may hold, build_parser aside (main is about 45 lines)."""
CLI_LINES_BESIDES_PARSER = 250
"""cli.py's lines outside build_parser (the option tables, the stdout guard, main)."""


def _cli_offences(source: str) -> list[str]:
    """What in ``source`` (cli.py's text) is command logic rather than parsing and dispatch:
    a ``cmd_*`` function, a function other than build_parser longer than
    CLI_FUNCTION_LINES, a subcommand whose ``run`` is not a ``_command(...)`` dispatch, or
    more than CLI_LINES_BESIDES_PARSER lines outside build_parser."""
    tree = ast.parse(source)
    out, parser_lines = [], 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if node.name == "build_parser":
                parser_lines = lines
            elif node.name.startswith("cmd_"):
                out.append(f"{node.name}: a command's logic (move it to its subject's module)")
            elif lines > CLI_FUNCTION_LINES:
                out.append(f"{node.name}: {lines} lines (at most {CLI_FUNCTION_LINES})")
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "set_defaults":
            for kw in node.keywords:
                v = kw.value
                if kw.arg == "run" and not (isinstance(v, ast.Call)
                                            and getattr(v.func, "id", None) == "_command"):
                    out.append(f"line {node.lineno}: run= is not a _command(...) dispatch")
    besides = len(source.splitlines()) - parser_lines
    if besides > CLI_LINES_BESIDES_PARSER:
        out.append(f"{besides} lines outside build_parser (at most {CLI_LINES_BESIDES_PARSER})")
    return out


def test_the_command_line_only_parses_and_dispatches():
    assert _cli_offences(open(os.path.join(PACKAGE, "cli.py")).read()) == []


def test_the_size_check_sees_command_logic_in_the_command_line():
    """The check can fail: a cmd_ function, a long helper, a direct run= and bulk each count."""
    body = "".join(f"    x{i} = {i}\n" for i in range(CLI_FUNCTION_LINES))
    src = ("def build_parser():\n    p.set_defaults(run=cmd_eval)\n"
           "    q.set_defaults(run=_command('model_command', 'run_eval'))\n"
           f"def cmd_eval(args):\n    return 0\n\ndef _helper():\n{body}"
           + "\n" * CLI_LINES_BESIDES_PARSER)
    found = sorted(_cli_offences(src))
    assert len(found) == 4, found     # line 3, a _command dispatch, is not one of them
    assert found[0].endswith("lines outside build_parser (at most 250)")
    assert [f.split(":")[0] for f in found[1:]] == ["_helper", "cmd_eval", "line 2"]


def test_every_dispatch_names_a_function_that_exists():
    """Each _command("<module>", "<function>") of cli.py names a function of that module."""
    import importlib
    tree = ast.parse(open(os.path.join(PACKAGE, "cli.py")).read())
    targets = [[a.value for a in node.args] for node in ast.walk(tree)
               if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_command"]
    assert len(targets) >= 10
    for module, *name in targets:
        assert callable(getattr(importlib.import_module(f"exactmax.{module}"),
                                name[0] if name else "run")), (module, name)
