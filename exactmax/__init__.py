"""exactmax: exact, checked statements about Maxout networks and the Transformers that
represent them (Gu, Yang, Zhou, arXiv 2603.03084).

From Python (docs/python-api.md): ``import exactmax as xm``, then ``xm.load``,
``xm.import_onnx``, ``xm.verify``, ``xm.equiv``, ``xm.check``, ``xm.compile`` and
``xm.regions`` (``exactmax/api.py``).  They are loaded on first use, so that ``import exactmax``
(and with it the command line) starts as fast as without them."""

__version__ = "0.1.0"

API = (
    "load",
    "import_onnx",
    "verify",
    "equiv",
    "check",
    "compile",
    "regions",
    "Result",
    "Counterexample",
    "Compilation",
    "Regions",
    "InputError",
    "ArgumentError",
)
"""The names of ``exactmax/api.py`` that ``exactmax`` itself offers."""


def __getattr__(name: str):
    """``exactmax.verify`` and the other names of ``API``: imported from ``exactmax.api`` on
    first use (PEP 562)."""
    if name == "regions":  # the subpackage, callable: exactmax.api.regions (regions/__init__.py)
        import importlib

        return importlib.import_module(f"{__name__}.regions")
    if name in API:
        from . import api

        value = getattr(api, name)
        globals()[name] = value  # found directly from now on
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(API))
