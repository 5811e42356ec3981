"""Hypothesis strategies for the tests: the public ones of ``exactmax.strategies`` (this module
is kept so that the foundation's tests import them under their old names)."""

from exactmax.strategies import matrices, maxout_networks, rationals, transformers, vectors

__all__ = ["rationals", "vectors", "matrices", "maxout_networks", "transformers"]
