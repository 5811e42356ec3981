"""A file nested too deeply is refused in one line and nothing else is printed, even when the
process holds garbage whose finalisers cannot run deep in a recursion.

The long fuzz run of #36 found it: a VNN-LIB 2.0 query nested 20,000 deep got the right line
("formulas nested too deeply"), but a garbage collection started deep in the reader's recursion
ran z3's ``__del__`` on objects left by earlier work, and Python printed their RecursionError
beside the line. The readers now recurse with the cyclic collector paused
(``exactmax.io.nesting.collection_paused``)."""

from __future__ import annotations

import gc
import sys

import pytest

from exactmax.io import InputError
from exactmax.io.jsonfile import parse_json_text
from exactmax.io.nesting import collection_paused
from exactmax.io.property_certificate import read_counterexample
from exactmax.io.vnnlib import read_vnnlib
from exactmax.io.vnnlib2 import read_query

DEPTH = 20_000
V1 = "(declare-const X_0 Real)\n(declare-const Y_0 Real)\n"
V2 = (
    "(vnnlib-version <2.0>)\n(declare-network f (declare-input X real [1]) "
    "(declare-output Y real [1]))\n"
)


def _deep_vnnlib1() -> str:
    return V1 + "(assert " + "(and " * DEPTH + "(<= X_0 1)" + ")" * DEPTH + ")"


def _deep_vnnlib2() -> str:
    return V2 + "(assert " + "(and " * DEPTH + "(<= X[0] 1.0)" + ")" * DEPTH + ")"


def _deep_counterexample() -> str:
    return "((X_0 " + "(- " * DEPTH + "1" + ")" * DEPTH + ") (Y_0 0))"


def _deep_json() -> str:
    return "[" * DEPTH + "]" * DEPTH


def _frames_deeper_than(base: int, limit: int = 200) -> int:
    """How many frames the current stack has beyond ``base`` frames, counted up to ``limit``."""
    f, n = sys._getframe(1), 0
    while f is not None and n < base + limit:
        f, n = f.f_back, n + 1
    return max(0, n - base)


def _stack_depth() -> int:
    f, n = sys._getframe(1), 0
    while f is not None:
        f, n = f.f_back, n + 1
    return n


READERS = {
    "vnnlib 1.0": (_deep_vnnlib1, ".vnnlib", read_vnnlib, "nested too deeply"),
    "vnnlib 2.0": (_deep_vnnlib2, ".vnnlib", read_query, "nested too deeply"),
    "counterexample": (
        _deep_counterexample,
        ".txt",
        lambda p: read_counterexample(p, 1, 1),
        "nested too deeply",
    ),
    "json": (_deep_json, ".json", lambda p: parse_json_text(open(p).read(), p), "too deeply"),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_no_collection_starts_deep_in_a_reader(reader, tmp_path, monkeypatch):
    """The file is refused in one line, and no garbage collection starts while the reader is
    more than 100 frames deep: finalisers (z3's ``__del__``, which calls through ctypes) never
    run near the recursion limit, whatever garbage the process holds."""
    text, ext, read, message = READERS[reader]
    path = tmp_path / ("deep" + ext)
    path.write_text(text())
    base = _stack_depth()
    deepest: list[int] = []

    def on_collection(phase, info):
        if phase == "start":
            deepest.append(_frames_deeper_than(base))

    threshold = gc.get_threshold()
    gc.collect()
    gc.set_threshold(1)  # a collection at (nearly) every allocation, the reader's included
    gc.callbacks.append(on_collection)
    try:
        with pytest.raises(InputError, match=message):
            read(str(path))
    finally:
        gc.callbacks.remove(on_collection)
        gc.set_threshold(*threshold)
    assert max(deepest, default=0) <= 100, f"a collection started {max(deepest)} frames deep"


def test_collection_paused_restores_the_collector():
    assert gc.isenabled()
    with collection_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), collection_paused():
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with collection_paused():
            pass
        assert not gc.isenabled()  # paused by the caller: left paused
    finally:
        gc.enable()
