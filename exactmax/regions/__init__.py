"""Exact region enumeration and counting (activation and linear regions), and the sawtooth
family of construction.md §5."""
