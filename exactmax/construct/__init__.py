"""Untrusted producers: Maxout network -> hardmax Transformer (construction.md §2)."""
