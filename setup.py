"""The one compiled part of exactmax: fixed-width exact integer matrices for fast single-input
evaluation (exactmax/vectorized/_fixedwidth.c).  It is optional: without a C compiler the
install still succeeds and exactmax uses the kernel's evaluators instead (slower, same results).
Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "exactmax.vectorized._fixedwidth",
    ["exactmax/vectorized/_fixedwidth.c"],
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
    optional=True,
)])
