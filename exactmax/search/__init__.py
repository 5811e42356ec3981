"""Counterexample search (untrusted producer): hypothesis strategies aimed at the vertices of
the domain and the tie sets of the models; every point it reports was evaluated by the kernel."""

from .counterexample import SearchOptions, SearchResult, find_counterexample, refute_by_search

__all__ = ["SearchOptions", "SearchResult", "find_counterexample", "refute_by_search"]
