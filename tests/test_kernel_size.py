"""The kernel stays small enough to read in one sitting (#18).

Size is counted as code lines, the way cloc counts Python: lines that are not blank, not a
comment and not part of a docstring (the docstrings state the mathematics the code checks, and
the style asks for them; they are reading, not trusted code).  Goals: the whole kernel at most
1,500 code lines, its certificate-checking core (rationals, affine maps, polyhedra, programs,
certificates, layerwise, the equivalence entry point) at most 1,000.
"""

import ast
import os

KERNEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "exactmax",
                      "kernel")
CORE = ("__init__", "errors", "rational", "affine", "polyhedron", "program", "certificate",
        "layerwise", "equivalence")


def code_lines(source: str) -> int:
    """Lines of ``source`` that are neither blank, nor a comment, nor inside a docstring."""
    doc: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                doc.update(range(first.lineno, first.end_lineno + 1))
    return sum(1 for n, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and n not in doc)


def kernel_code_lines() -> dict[str, int]:
    out = {}
    for name in sorted(os.listdir(KERNEL)):
        if name.endswith(".py"):
            with open(os.path.join(KERNEL, name)) as f:
                out[name[:-3]] = code_lines(f.read())
    return out


def test_code_lines_skip_blank_lines_comments_and_docstrings_only():
    source = ('"""Module doc\n\nmore."""\n\nimport os  # a comment\n# only a comment\n\n'
              'def f(x):\n    """f doc."""\n    s = """not a docstring"""\n    return x\n')
    assert code_lines(source) == 4   # import, def, s = ..., return
    assert code_lines("x = 1\n\n\ny = 2\n") == 2


def test_the_kernel_is_at_most_1500_code_lines_and_its_core_at_most_1000():
    counts = kernel_code_lines()
    assert set(CORE) <= set(counts)
    total, core = sum(counts.values()), sum(counts[m] for m in CORE)
    assert total <= 1500, f"kernel: {total} code lines ({counts})"
    assert core <= 1000, f"core: {core} code lines"
