"""Exact region enumeration and counting (activation and linear regions), and the sawtooth
family of docs/notes/construction.md §5."""
