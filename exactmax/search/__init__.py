"""Counterexample search (untrusted producer): hypothesis strategies aimed at the vertices of
the domain and the tie sets of the models (``counterexample``), and projected gradient ascent
on a property's margin in floats (``gradient``); every point it reports was evaluated by the
kernel.  The names below load ``counterexample`` (and hypothesis) on first use only, so that
``gradient`` does not pay for them."""

__all__ = ["SearchOptions", "SearchResult", "find_counterexample"]


def __getattr__(name: str):
    if name in __all__:
        from . import counterexample

        return getattr(counterexample, name)
    raise AttributeError(f"module 'exactmax.search' has no attribute {name!r}")
