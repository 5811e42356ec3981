"""Untrusted producers that use z3: their answers carry witnesses the kernel checks."""
