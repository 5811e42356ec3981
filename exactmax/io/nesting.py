"""Reading nested input: the readers recurse once per level of nesting, up to Python's
recursion limit, where a file nested too deeply is refused in one line."""

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collection_paused() -> Iterator[None]:
    """Run the block with Python's cyclic garbage collector paused, restoring it after.

    A reader deep in its recursion allocates; an allocation may start a collection, which runs
    the finalisers of unrelated garbage at that depth. z3's ``__del__`` then fails with a
    RecursionError and Python prints it to stderr beside the reader's one-line error (a
    traceback-like text on a clean refusal). Paused, that garbage is collected after the reader
    returns, at a shallow depth. Nothing else changes: objects freed by reference counting are
    freed as before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
