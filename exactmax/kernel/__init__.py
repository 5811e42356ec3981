"""The trusted kernel: exact rationals, networks and their evaluation, polyhedra, checks.

It imports only the standard library and the rational backend (``rational.py``).  Nothing
outside the kernel can make exactmax say "proved".
"""
