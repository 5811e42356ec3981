"""Exact region enumeration and counting (activation and linear regions), and the sawtooth
family of docs/notes/construction.md §5.

The package is also the Python API's function of the same name: ``exactmax.regions(net,
domain=None, ...)`` is ``exactmax.api.regions`` (docs/python-api.md).  A package and a function
cannot share the name ``exactmax.regions`` otherwise (importing the package sets the
attribute), so the package is callable."""

import sys
import types


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        """``exactmax.api.regions(*args, **kwargs)``: the exact region counts of a model."""
        from ..api import regions

        return regions(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
