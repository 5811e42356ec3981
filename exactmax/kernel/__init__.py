"""The trusted kernel: the only code that can make exactmax say "proved".  It imports only the
standard library and the rational backend (``rational.py``)."""
