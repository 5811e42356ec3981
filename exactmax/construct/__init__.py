"""Untrusted producers: Maxout network -> hardmax Transformer (docs/notes/construction.md §2)."""
