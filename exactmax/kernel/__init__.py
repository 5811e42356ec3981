"""The trusted kernel: exact rationals, networks, polyhedra, programs and the checks of
certificates.  It imports only the standard library and the rational backend (``rational.py``);
nothing outside it can make exactmax say "proved"."""
