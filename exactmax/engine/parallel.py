"""Work units of a split tree, solved on any ``concurrent.futures.Executor`` (this process,
a process pool, or a Dask cluster) and assembled into one tree: parallel branch and bound.

The mathematics.  Let D be the case's input set with rows R_1 .. R_m (``domain_rows``).  The
tree builders (``casetree.build_case_tree``, and for networks first
``relaxation.build_relaxed_tree``) walk D's split tree depth first, as the kernel does: a node
at path pi has the rows R_1 .. R_m followed by the split rows on pi, in order, and the choices
stated at the nodes above it hold on it.  A work unit is one node of that tree: the builder is
given a budget of cells, and once it has certified that many leaves it stops and hands back
the finished part of its subtree with a placeholder at every node it has not begun (an *open
cell*: its rows, and what the builder needs to resume there: the exact affine maps of the
nodes known on it, which are those the choices above it give, and the float point guessed for
it; for the relaxed builder its sub-box and depth).  Each open cell becomes a unit in turn;
its subtree is the one the uninterrupted walk would build below that node (the same rows, the
same maps, the same choices in force), so the tree with every placeholder replaced by its
unit's subtree is a tree the kernel checks like any other.  Its row indices need no
renumbering: a unit's rows are exactly those the node has inside the assembled tree.  The
kernel alone decides: a placeholder left in, or a subtree put at another node (other rows,
other maps), is rejected.

Which cells are open depends on the budget (counted in cells, never in time) and on the
units' answers, and each unit's answer depends on its unit alone; the placeholders are
replaced by position (the unit of the i-th placeholder of a subtree, depth first), never by
arrival.  So the certificate is the same, byte for byte, whatever the number of workers and
whatever the order in which they finish.  Units are submitted as soon as the unit that handed
them back has answered, so every worker stays busy while open cells remain.

Optionally (``--split-depth K``) the input set is first bisected K levels deep: for a box D
(lower <= x <= upper) a sub-box's widest coordinate (the first such, by exact widths) at its
exact midpoint, x_t - m >= 0 / m - x_t > 0; for a polyhedron the widest coordinate of the
cell's float bounding box (HiGHS; floats only guide) at a dyadic midpoint.  Each sub-cell is
a first unit, solved on the case whose input polyhedron has D's rows followed by its split
rows (a strict split row as its closure: a Farkas combination valid on the closure is valid
on the strict row too), carrying D's own box (its rows stay the first 2 d: the builders' box
proofs name rows 0 .. 2 d - 1); the assembled tree is Split(a, c, T_ge, T_lt, no choices)
over the bisections.  Bisection duplicates the cells of hyperplanes that cross both halves,
so it is off by default.

The units and their answers are JSON text (z3 terms do not pickle, and a Dask cluster may run
another machine's Python): in, the network (exactmax JSON; for a local process pool, its
SHA-256 and a file written once that each worker reads on its first unit), the case's output
conjunctions,
the unit's input rows, D's box, the open cell to resume at (if any), the wall-clock deadline
and the budgets; out, the tree (as in a property certificate, with {"open": i} placeholders)
and its open cells, a point z3 found in a forbidden output region, or the reason for no
answer.  A point is re-evaluated by the kernel in this process; any unit without an answer
makes the answer unknown, with the reason of the first such unit in tree order.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

from .. import interruption
from ..io.numbers import q_str
from ..kernel.certificate import Choice, Empty, Row, Split, TieProof, domain_rows
from ..kernel.polyhedron import Box, Polyhedron
from ..kernel.property import Case, Excluded, Phase, Relaxed, Tighten, Upper
from ..kernel.rational import ZERO, Q

DEFAULT_SPLIT_DEPTH = 0
"""Levels of input bisection made before any unit is solved (0: the first unit is the whole
input set; an easy query stays one unit)."""
DEFAULT_UNIT_CELLS = 128
"""Cells (leaves) the Max-choice builder (``build_case_tree``) certifies in one unit before
it hands back its open cells: a fraction of a second of work, small enough that the workers
share the tail of a query evenly, large enough that a unit's JSON and start-up cost little;
a query needing fewer cells stays one unit, in this process.  Chosen on the epsilon query of
benchmarks/parallel.py (2 workers: 64 and 128 cells 5.3-5.8 s, 256 cells 6.5 s, one unit
8.8-9.8 s)."""
DEFAULT_UNIT_BOXES = 4
"""The same for the relaxed builder (``build_relaxed_tree``), whose leaves cost far more (an
optimised relaxation each): about a second of work on ACAS Xu."""


# ----------------------------------------------------------------------- the input splits


class Cell:
    """A cell of the input bisection: case ``case``'s input set and the split rows on the
    path ``path`` ("" the root, then "g" / "l" per level); for a box, its sub-box.  Once
    split, ``cut`` = (a, c) and ``ge`` / ``lt`` its halves; else ``unit``, its first work
    unit, and once assembled, ``tree``."""

    def __init__(self, case: int, rows: tuple, lower=None, upper=None, path: str = ""):
        self.case, self.rows, self.lower, self.upper, self.path = case, rows, lower, upper, path
        self.cut: tuple[tuple[Q, ...], Q] | None = None
        self.ge: Cell | None = None
        self.lt: Cell | None = None
        self.tree: Any = None
        self.unit: Unit | None = None

    def where(self) -> str:
        return f"case {self.case}, cell {self.path or 'root'}"


def _unit_vector(d: int, t: int) -> tuple:
    return tuple(Q(int(i == t)) for i in range(d))


def _float_bounds(rows: list[Row], d: int):
    """Float (lower, upper) bounds of each coordinate over {x : rows (closed)}, None where
    the float LP (HiGHS) finds none; a guide only."""
    from . import floatlp

    if not floatlp.available():
        return None
    try:
        cols = floatlp.columns(rows, d)
        lo = [-float(r.c) for r in rows]
    except OverflowError:
        return None
    inf = float("inf")
    out = []
    for t in range(d):
        side = []
        for s in (1.0, -1.0):
            cost = [0.0] * d
            cost[t] = s
            st, _, value = floatlp._solve_lp(
                cost, cols, lo, [inf] * len(rows), [-inf] * d, [inf] * d
            )
            side.append(s * value if st == "optimal" else None)
        out.append(tuple(side))
    return out


def split(cell: Cell, P: Polyhedron) -> bool:
    """Halve the cell (False when it cannot be): a sub-box at its widest coordinate (the
    first, by exact widths) at the exact midpoint m, x_t - m >= 0 (ge) / m - x_t > 0 (lt); a
    polyhedral cell at the widest coordinate of its float bounding box, at the dyadic rational
    nearest the float midpoint."""
    d = P.dim
    if cell.lower is not None:
        widths = [u - lo for lo, u in zip(cell.lower, cell.upper)]
        w = max(widths, default=ZERO)
        if not w > 0:
            return False
        t = widths.index(w)
        m = (cell.lower[t] + cell.upper[t]) / 2
    else:
        best = None
        rows = domain_rows(P) + [Row(r.a, r.c) for r in cell.rows]
        for t, (lo, hi) in enumerate(_float_bounds(rows, d) or ()):
            if lo is not None and hi is not None and hi - lo > 1e-9 * (1 + abs(lo) + abs(hi)):
                if best is None or hi - lo > best[1]:
                    best = (t, hi - lo, (lo + hi) / 2)
        if best is None:
            return False
        t, m = best[0], Q(*float(best[2]).as_integer_ratio())
    a = _unit_vector(d, t)
    cell.cut = (a, -m)
    ge_row, lt_row = Row(a, -m), Row(tuple(-v for v in a), m, True)
    if cell.lower is not None:
        lo, up = cell.lower, cell.upper
        cell.ge = Cell(
            cell.case, cell.rows + (ge_row,), lo[:t] + (m,) + lo[t + 1 :], up, cell.path + "g"
        )
        cell.lt = Cell(
            cell.case, cell.rows + (lt_row,), lo, up[:t] + (m,) + up[t + 1 :], cell.path + "l"
        )
    else:
        cell.ge = Cell(cell.case, cell.rows + (ge_row,), path=cell.path + "g")
        cell.lt = Cell(cell.case, cell.rows + (lt_row,), path=cell.path + "l")
    return True


def assemble(cell: Cell):
    """The tree of the input splits with each solved cell's tree at its place (no choices at
    the splits: each unit proves its own from the domain's rows and its path's)."""
    if cell.cut is None:
        return cell.tree
    a, c = cell.cut
    assert cell.ge is not None and cell.lt is not None  # a cut cell has both halves
    return Split(tuple(a), c, assemble(cell.ge), assemble(cell.lt), ())


# ----------------------------------------------------------------------- units as JSON


def _rows_json(rows) -> list:
    return [{"a": [q_str(v) for v in r.a], "c": q_str(r.c), "strict": r.strict} for r in rows]


def _q(text: str) -> Q:
    n, _, d = text.partition("/")
    return Q(int(n), int(d or 1))


def _rows_of(items) -> tuple[Row, ...]:
    return tuple(Row(tuple(_q(v) for v in r["a"]), _q(r["c"]), bool(r["strict"])) for r in items)


def _map_json(v):
    return None if v is None else [[q_str(t) for t in v[0]], q_str(v[1])]


def _map_of(v):
    return None if v is None else (tuple(_q(t) for t in v[0]), _q(v[1]))


def open_json(cell) -> dict:
    """An open cell as JSON: exact numbers as "p/q" text, floats as JSON numbers (Python
    writes and reads a float's shortest repr, the same float; nan and inf as NaN and
    Infinity)."""
    from .casetree import OpenCell

    if isinstance(cell, OpenCell):
        return {
            "builder": "cell",
            "rows": _rows_json(cell.rows),
            "vals": [_map_json(v) for v in cell.vals],
            "floats": [
                None
                if f is None
                else [list(map(float, f[0])), float(f[1]), float(f[2]), float(f[3])]
                for f in cell.floats
            ],
            "hint": None if cell.hint is None else list(cell.hint),
        }
    return {
        "builder": "box",
        "rows": _rows_json(cell.rows),
        "depth": cell.depth,
        "box": [[[i, q_str(k), q_str(v)] for i, k, v in side] for side in cell.box],
    }


def open_of(item: dict):
    """The open cell of ``open_json``."""
    from .casetree import OpenCell
    from .relaxation import OpenBox

    rows = _rows_of(item["rows"])
    if item["builder"] == "cell":
        return OpenCell(
            rows,
            tuple(_map_of(v) for v in item["vals"]),
            tuple(None if f is None else (f[0], f[1], f[2], f[3]) for f in item["floats"]),
            None if item["hint"] is None else tuple(item["hint"]),
        )
    return OpenBox(
        rows,
        tuple(tuple((i, _q(k), _q(v)) for i, k, v in side) for side in item["box"]),
        item["depth"],
    )


def unit_text(
    kind: str,
    models_json: list,
    case: Case,
    cell: Cell,
    box: Box | None,
    deadline_wall: float,
    max_leaves: int,
    relaxed: bool = True,
    budget: tuple[int, int] | None = None,
    start: dict | None = None,
    name: str | None = None,
    shared: SharedModels | None = None,
    with_models: bool = True,
) -> str:
    """The work unit as JSON text.  ``inputs``: the domain's rows, then the bisection's split
    rows of the cell (closed), as A x <= b; ``start``: the open cell to resume at (as
    ``open_json``), None for the whole cell; ``budget``: (cells of the Max-choice builder,
    leaves of the relaxed builder) before it hands back its open cells, None: no budget.
    ``shared``: the models written once (``SharedModels``): the unit names them by hash and
    carries them only when ``with_models`` (else a worker reads their file once)."""
    models: dict = {"models": models_json}
    if shared is not None:
        models = {"models_sha256": shared.sha256}
        if with_models:
            models["models"] = models_json
        elif shared.path is not None:
            models["models_path"] = shared.path
    A = [list(map(q_str, a)) for a in case.inputs.A]
    b = [q_str(v) for v in case.inputs.b]
    for r in cell.rows:
        A.append([q_str(-v) for v in r.a])
        b.append(q_str(r.c))
    return json.dumps(
        {
            "kind": kind,
            **models,
            "cell": name or cell.where(),
            "inputs": {"A": A, "b": b, "dim": case.inputs.dim},
            "outputs": [_rows_json(conj) for conj in case.outputs],
            "box": None
            if box is None
            else {"lower": [q_str(v) for v in box.lower], "upper": [q_str(v) for v in box.upper]},
            "deadline": deadline_wall,
            "max_leaves": max_leaves,
            "relaxed": relaxed,
            "budget": None if budget is None else list(budget),
            "start": start,
        },
        separators=(",", ":"),
    )


_programs: dict = {}
_unit_lock = threading.Lock()  # one unit at a time per process: z3's context, HiGHS state


@dataclass(frozen=True)
class SharedModels:
    """A run's models sent once per worker, not once per unit: their JSON text, its SHA-256
    (the units name the models by it) and, for a process pool on this machine, the file
    holding the text (a worker reads it on its first unit; later units find the program in
    the worker's cache).  A remote (Dask) worker gets the models inside every unit."""

    sha256: str
    path: str | None

    @staticmethod
    def of(kind: str, models_json: list, folder: str | None) -> SharedModels:
        text = json.dumps([kind, models_json], separators=(",", ":"))
        key = hashlib.sha256(text.encode()).hexdigest()
        path = None
        if folder is not None:
            path = os.path.join(folder, f"models-{key[:16]}.json")
            with open(path, "w") as f:
                f.write(text)
        return SharedModels(key, path)


class ModelsUnavailable(Exception):
    """A unit's shared models file is missing or not the one the unit names."""


def _models_of(u: dict) -> tuple[str, list | None]:
    """(cache key, models JSON or None when the key is cached here) of a unit: its models
    inline, or read from the shared file, whose content must have the unit's hash."""
    key = u.get("models_sha256")
    if key is None:
        key = hashlib.sha256(
            json.dumps([u["kind"], u["models"]], sort_keys=True).encode()
        ).hexdigest()
        return key, u["models"]
    if key in _programs:
        return key, None
    if "models" in u:
        return key, u["models"]
    try:
        with open(u["models_path"]) as f:
            text = f.read()
    except OSError as e:
        raise ModelsUnavailable(f"the shared models file cannot be read ({e})") from None
    if hashlib.sha256(text.encode()).hexdigest() != key:
        raise ModelsUnavailable(
            f"the shared models file {u['models_path']} does not have the unit's hash"
        )
    kind, models = json.loads(text)
    if kind != u["kind"]:
        raise ModelsUnavailable("the shared models are of another kind than the unit")
    return key, models


def _program(kind: str, models_json: list | None, key: str | None = None):
    """The tree builder's program of the unit's models (cached per process by content)."""
    if key is None:
        key = hashlib.sha256(json.dumps([kind, models_json], sort_keys=True).encode()).hexdigest()
    if key not in _programs:
        assert models_json is not None  # a key not cached comes with its models
        from ..io.jsonfile import Cursor
        from ..io.models import read_model
        from ..kernel.program import program_of_maxout

        models = [
            read_model(Cursor("work unit", f"models[{i}]", m)) for i, m in enumerate(models_json)
        ]
        if kind == "maxout":
            from ..kernel.maxout import MaxoutNetwork

            net = models[0]
            assert isinstance(net, MaxoutNetwork)  # a "maxout" unit's model
            _programs[key] = program_of_maxout(net), models
        else:
            from .pair import programs

            _programs[key] = programs(*models)[1], models
    return _programs[key]


def _relaxed(kind: str, models, p, case: Case, limits, budget=None, start=None):
    """As ``prove.property.decide_property`` does first, for a network (kind "maxout"): the
    tree of relaxed leaves (``relaxation.build_relaxed_tree``; None where it does not apply), a
    cell centre that is a counterexample (in floats, then exactly) raising Violated."""
    if kind == "pair":
        return _differential(models, case, limits, budget, start)
    if kind != "maxout":
        return None
    try:
        from .relaxation import build_relaxed_tree
    except ImportError:
        return None
    import numpy as np

    from ..search.gradient import FloatNetwork
    from .casetree import Violated, _margins, violation

    net = models[0]
    fnet = FloatNetwork(net)

    def centre(x):
        X = np.array([[float(v) for v in x]])
        Y = fnet(X)
        if any(_margins(conj, X, Y)[0] > -1e-9 for conj in case.outputs):
            if violation(net, (case,), x)[0] is not None:
                raise Violated(x)

    return build_relaxed_tree(p, case, limits, centre, budget, start)


def _differential(models, case: Case, limits, budget=None, start=None):
    """For a pair of ReLU networks of one depth (epsilon or top-1): the tree of relaxed
    leaves with delta rows (``differential.build_differential_tree``), else None."""
    from . import differential

    a, b = models
    if a.input_dim > differential.INPUT_SPLITS:
        return None  # many inputs: the coordinator has tried it in its own process
    return differential.build_differential_tree(a, b, case, limits, None, budget, start)


def _build(u: dict, p, models, case: Case, box, limits):
    """The unit's (tree with open cells, stats): the relaxed builder where it applies (and
    the unit asks for it), else the Max-choice builder; at the unit's open cell if it has
    one.  An open box the relaxed builder cannot finish (deeper than its MAX_DEPTH) is solved
    by the Max-choice builder from that box, with no maps known (no choices above it)."""
    from .casetree import OpenCell, build_case_tree

    cells, boxes = u["budget"] or (None, None)
    start = None if u.get("start") is None else open_of(u["start"])
    if start is None:
        built = (
            _relaxed(u["kind"], models, p, case, limits, boxes) if u.get("relaxed", True) else None
        )
        return built or build_case_tree(p, case, box, limits, budget=cells)
    if isinstance(start, OpenCell):
        return build_case_tree(p, case, box, limits, budget=cells, start=start)
    built = _relaxed(u["kind"], models, p, case, limits, boxes, start)
    n = len(p.nodes)
    return built or build_case_tree(
        p,
        case,
        box,
        limits,
        budget=cells,
        start=OpenCell(start.rows, (None,) * n, (None,) * n, None),
    )


def tree_json(tree, opens: list) -> dict:
    """The tree as in a property certificate, each open cell as {"open": i} (i its place
    among the open cells, depth first, ge before lt) with its state appended to ``opens``."""
    from ..io.certificates import _choice
    from ..io.property_certificate import _tree
    from .casetree import OpenCell
    from .relaxation import OpenBox

    if isinstance(tree, OpenCell | OpenBox):
        opens.append(open_json(tree))
        return {"open": len(opens) - 1}
    if isinstance(tree, Empty | Excluded | Relaxed):
        return _tree(tree)
    return {
        "split": {"a": [q_str(v) for v in tree.a], "c": q_str(tree.c)},
        "choices": [_choice(*c) for c in tree.choices],
        "ge": tree_json(tree.ge, opens),
        "lt": tree_json(tree.lt, opens),
    }


def solve_unit(text: str, progress=None, inline: bool = False):
    """A work unit's answer, as JSON text: {"tree": T, "open": [...], "stats": ...} (T as in
    a property certificate, with a placeholder {"open": i} for the i-th open cell), or
    {"violated": x} (a point z3 found where a forbidden conjunction holds on the cell; exact,
    to be re-evaluated by the kernel) or {"unknown": reason}.  ``progress``: the tree
    builders' progress callback (cells so far), for a unit solved in this process.
    ``inline`` (a unit solved in this process): a tree answer as ``read_answer`` gives it, the
    tree itself with ``Hole`` placeholders (``tree_holes``): no JSON round trip (on ACAS Xu
    property 1, 0.6 M numbers written and read again, about 2.5 s)."""
    from .casetree import Violated
    from .certify import Limits, NoCertificate

    u = json.loads(text)
    with _unit_lock:
        started, cpu = time.monotonic(), time.process_time()
        deadline = started + (u["deadline"] - time.time())
        try:
            key, models_json = _models_of(u)
            p, models = _program(u["kind"], models_json, key)
            P = Polyhedron(
                tuple(tuple(_q(v) for v in a) for a in u["inputs"]["A"]),
                tuple(_q(v) for v in u["inputs"]["b"]),
                u["inputs"]["dim"],
            )
            case = Case(P, tuple(_rows_of(conj) for conj in u["outputs"]))
            box = (
                None
                if u["box"] is None
                else Box(tuple(map(_q, u["box"]["lower"])), tuple(map(_q, u["box"]["upper"])))
            )
            if time.monotonic() > deadline:
                return json.dumps({"unknown": "time limit reached before the unit started"})
            with interruption.time_limit(deadline):
                tree, stats = _build(
                    u, p, models, case, box, Limits(deadline, u["max_leaves"], progress)
                )
        except Violated as e:
            return json.dumps({"violated": [q_str(v) for v in e.x]})
        except (NoCertificate, ModelsUnavailable) as e:
            return json.dumps({"unknown": str(e)})
        except interruption.TimeLimit:
            return json.dumps({"unknown": "time limit reached while building the certificate"})
        stats = {k: stats[k] for k in ("leaves", "splits", "proofs") if k in stats}
        stats["time_s"] = round(time.monotonic() - started, 3)
        stats["cpu_s"] = round(time.process_time() - cpu, 3)
        opens: list = []
        if inline:
            return "tree", tree_holes(tree, opens), (stats, opens)
        out = tree_json(tree, opens)
        return json.dumps({"tree": out, "open": opens, "stats": stats}, separators=(",", ":"))


def tree_holes(tree, opens: list):
    """The tree with each open cell replaced by Hole(i), its state appended to ``opens``, in
    the order of ``tree_json`` (depth first, ge before lt)."""
    from .casetree import OpenCell
    from .relaxation import OpenBox

    if isinstance(tree, OpenCell | OpenBox):
        opens.append(open_json(tree))
        return Hole(len(opens) - 1)
    if isinstance(tree, Split):
        ge, lt = tree_holes(tree.ge, opens), tree_holes(tree.lt, opens)
        return Split(tree.a, tree.c, ge, lt, tree.choices)
    return tree


@dataclass(frozen=True, slots=True)
class Hole:
    """The placeholder of the ``index``-th open cell in a unit's tree (read from
    {"open": i}); not a tree node the kernel knows, so one left in is rejected."""

    index: int


def _farkas_of(items) -> tuple:
    return tuple((i, _q(y)) for i, y in items)


def _choice_of(c: dict) -> tuple:
    proofs = tuple(
        None
        if p is None
        else TieProof(
            _farkas_of(p["tie"]["dominance"]),
            _farkas_of(p["tie"]["upper"]),
            _farkas_of(p["tie"]["lower"]),
        )
        if isinstance(p, dict)
        else _farkas_of(p)
        for p in c["proofs"]
    )
    return c["program"], c["node"], Choice(c["k"], proofs)


def tree_of(t: dict):
    """The tree of a unit's answer (as ``tree_json`` writes it), read directly: a unit is a
    producer, so its answer needs no reader's error messages, and whatever it says is checked
    by the kernel once assembled.  The nodes are those the certificate readers give."""
    if "split" in t:
        return Split(
            tuple(_q(v) for v in t["split"]["a"]),
            _q(t["split"]["c"]),
            tree_of(t["ge"]),
            tree_of(t["lt"]),
            tuple(_choice_of(c) for c in t["choices"]),
        )
    if "open" in t:
        return Hole(t["open"])
    if "empty" in t:
        return Empty(_farkas_of(t["empty"]))
    if "excluded" in t:
        e = t["excluded"]
        return Excluded(
            tuple(_choice_of(c) for c in e["choices"]), tuple(_proof_of(p) for p in e["proofs"])
        )
    r = t["relaxed"]
    return Relaxed(
        tuple(_choice_of(c) for c in r["choices"]),
        tuple(None if u is None else _upper_of(u) for u in r["uppers"]),
        tuple(_proof_of(p) for p in r["proofs"]),
        tuple((e["node"], _upper_of(e["upper"])) for e in r.get("extra", ())),
    )


def _upper_of(u) -> Upper:
    return Upper(
        tuple(_q(v) for v in u["lambda"]),
        _q(u["beta"]),
        tuple(_farkas_of(p) for p in u["proofs"]),
        tuple((k, _q(c)) for k, c in u.get("terms", ())),
    )


def _proof_of(p):
    if isinstance(p, dict) and "tighten" in p:
        t = p["tighten"]
        uppers = tuple(_upper_of(u) for u in t["uppers"])
        return Tighten(tuple(t["nodes"]), uppers, _proof_of(t["then"]))
    if isinstance(p, dict):
        return Phase(p["phase"]["node"], tuple(_proof_of(b) for b in p["phase"]["branches"]))
    return _farkas_of(p)


def read_answer(text: str):
    """("tree", the tree as JSON (``tree_of`` reads it), (stats, open cells as JSON)) |
    ("violated", x, None) | ("unknown", reason, None)."""
    r = json.loads(text)
    if "tree" in r:
        return "tree", r["tree"], (r["stats"], r.get("open", []))
    if "violated" in r:
        return "violated", tuple(_q(v) for v in r["violated"]), None
    return "unknown", r["unknown"], None


def fill(tree, subtrees: list):
    """The tree with placeholder Hole(i) replaced by subtrees[i] (by position: the i-th open
    cell of the tree, depth first); the kernel checks the result."""
    if isinstance(tree, Hole):
        return subtrees[tree.index]
    if isinstance(tree, Split):
        return Split(tree.a, tree.c, fill(tree.ge, subtrees), fill(tree.lt, subtrees), tree.choices)
    return tree


# ----------------------------------------------------------------------- executors


class InlineExecutor(cf.Executor):
    """Runs each submitted call at once, in this process (``--workers 1``)."""

    def submit(self, fn, /, *args, **kwargs):
        f: cf.Future = cf.Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - handed to the caller through the future
            f.set_exception(e)
        return f


def _worker_init() -> None:
    """In a pool worker: Ctrl-C at the terminal reaches the whole process group; the
    coordinator answers it (and ends the workers), so the workers ignore SIGINT; and a worker
    dies with its parent (Linux: PR_SET_PDEATHSIG)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # not Linux: the pool's own shutdown ends the workers
        pass
    import z3

    z3.set_param("ctrl_c", False)


class SchedulerError(Exception):
    """--scheduler: dask missing or the scheduler unreachable (a one-line usage error)."""


class Workers:
    """``with Workers(n, scheduler) as ex:`` an Executor: this process (n = 1), a process pool
    of n workers, or a Dask cluster's (``client.get_executor()``).  On leaving, pending
    units are cancelled and the pool's processes are ended (a unit still running on a Dask
    worker stops at its own deadline)."""

    def __init__(self, n: int, scheduler: str | None = None):
        self.n, self.scheduler = n, scheduler
        self.client: Any = None  # dask.distributed.Client with --scheduler
        self.executor: cf.Executor | None = None

    def __enter__(self) -> cf.Executor:
        if self.scheduler is not None:
            try:
                from dask.distributed import Client
            except ImportError:
                raise SchedulerError(
                    "--scheduler needs Dask: pip install 'exactmax[dask]' (or "
                    "'.[dask]' in a checkout)"
                ) from None
            try:
                self.client = Client(self.scheduler, timeout="5s")
            except (OSError, TimeoutError, ValueError, TypeError) as e:
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise SchedulerError(
                    f"--scheduler: cannot reach a Dask scheduler at {self.scheduler} ({msg})"
                ) from None
            ex: cf.Executor = self.client.get_executor(pure=False)
        elif self.n <= 1:
            ex = InlineExecutor()
        else:
            import multiprocessing as mp
            from multiprocessing.context import BaseContext

            try:
                forkserver = mp.get_context("forkserver")
                forkserver.set_forkserver_preload(
                    ["exactmax.engine.parallel", "exactmax.engine.casetree"]
                )
                ctx: BaseContext = forkserver
            except ValueError:
                ctx = mp.get_context("spawn")
            ex = cf.ProcessPoolExecutor(self.n, mp_context=ctx, initializer=_worker_init)
            # the models of the units, written once per run (SharedModels), removed on leaving
            ex.models_folder = tempfile.mkdtemp(prefix="exactmax-units-")  # type: ignore[attr-defined]
        self.executor = ex
        return ex

    def __exit__(self, *exc) -> Literal[False]:
        ex = self.executor
        if isinstance(ex, cf.ProcessPoolExecutor):
            procs = list((ex._processes or {}).values())
            ex.shutdown(wait=False, cancel_futures=True)
            for p in procs:
                if p.is_alive():
                    p.terminate()
            for p in procs:
                p.join(timeout=1.0)
            shutil.rmtree(getattr(ex, "models_folder", ""), ignore_errors=True)
        elif self.client is not None:
            try:
                if ex is not None:
                    ex.shutdown(wait=False)
            finally:
                self.client.close(timeout=2)
        return False


# ----------------------------------------------------------------------- running units


class Unit:
    """A work unit: a node of its case's tree, the root of the bisection cell ``cell``
    (``start`` None) or an open cell handed back below it (``start``, as ``open_json``);
    ``at``: the places of the open cells on the way from the cell's root down to it.  Once
    answered, ``tree`` (with Hole placeholders) and ``units``, one per placeholder, in
    order."""

    def __init__(self, cell: Cell, start: dict | None = None, at: tuple = ()):
        self.cell, self.start, self.at = cell, start, at
        self.tree = None
        self.units: list[Unit] = []

    def key(self) -> tuple:
        """The unit's place in the assembled tree (sorted: depth first)."""
        return self.cell.case, self.cell.path, self.at

    def where(self) -> str:
        return self.cell.where() + (f", open cell {'.'.join(map(str, self.at))}" if self.at else "")

    def assembled(self):
        """The unit's tree with every placeholder replaced by its unit's assembled tree."""
        return fill(self.tree, [u.assembled() for u in self.units])


def _add_stats(total: dict, s: dict) -> None:
    total["leaves"] = total.get("leaves", 0) + s.get("leaves", 0)
    total["splits"] = total.get("splits", 0) + s.get("splits", 0)
    how = total.setdefault("proofs", {})
    for k, v in s.get("proofs", {}).items():
        how[k] = how.get(k, 0) + v


def unit_budget(unit_cells: int | None, max_leaves: int) -> tuple[int, int]:
    """(cells of the Max-choice builder, leaves of the relaxed builder) per unit:
    --unit-cells N for both, else the defaults; never above --max-leaves."""
    budget = (
        (DEFAULT_UNIT_CELLS, DEFAULT_UNIT_BOXES) if unit_cells is None else (unit_cells, unit_cells)
    )
    return max(1, min(budget[0], max_leaves)), max(1, min(budget[1], max_leaves))


def split_case_trees(
    kind: str,
    models_json: list,
    cases: list,
    boxes: list,
    dim: int,
    deadline: float,
    max_leaves: int,
    executor: cf.Executor,
    depth: int,
    unit_cells: int | None,
    confirm,
    progress_shown: bool = False,
    relaxed: bool = True,
):
    """One tree per case, built by work units on ``executor`` (parallel branch and bound).

    Every case's input set is first bisected ``depth`` levels deep; each cell is a unit.  A
    unit certifies at most ``unit_budget(unit_cells, max_leaves)`` cells and hands back the
    rest as open cells, each a unit in turn, submitted as soon as it is handed back.  Stops at
    the first point a unit reports that ``confirm(x)`` turns into an answer (a counterexample
    evaluated by the kernel), at the deadline, at more than ``max_leaves`` cells in all, or
    with every unit answered; the trees are then assembled by position.  Returns (what, value,
    stats): ("trees", one tree per case), ("point", confirm's answer), ("unknown", reason)."""
    # the models once per run: a file in the pool's folder (Workers) that each worker reads
    # on its first unit; inline in every unit for a pool without one, or a Dask cluster
    shared = SharedModels.of(kind, models_json, getattr(executor, "models_folder", None))
    wall = time.time() + (deadline - time.monotonic())
    roots, first = [], []
    for n, (case, box) in enumerate(zip(cases, boxes)):
        root = Cell(
            n,
            (),
            None if box is None else tuple(box.lower),
            None if box is None else tuple(box.upper),
        )
        roots.append(root)
        level = [root]
        for _ in range(depth):
            level = [
                h for c in level if split(c, case.inputs) for h in (c.ge, c.lt) if h is not None
            ] + [c for c in level if c.cut is None]
        first += level
    budget = unit_budget(unit_cells, max_leaves)
    stats: dict = {
        "units": 0,
        "split_depth": depth,
        "unit_cells": budget[0],
        "unit_boxes": budget[1],
        "units_handed_back": 0,
        "open_cells": 0,
    }
    reasons: dict = {}
    futures: dict = {}
    cells, done, unit_time, unit_cpu = 0, 0, 0.0, 0.0
    start = last = time.monotonic()

    def inline_progress(leaves):
        interruption.note_stats(
            units=stats["units"], units_answered=done, cells_certified=cells + leaves
        )
        if progress_shown:
            print(
                f"exactmax: {cells + leaves} cells certified, {time.monotonic() - start:.0f} s",
                file=sys.stderr,
                flush=True,
            )

    shown = inline_progress  # also how far the search got, for an answer at the time limit

    def submit(unit, ex=executor):
        n = unit.cell.case
        text = unit_text(
            kind,
            models_json,
            cases[n],
            unit.cell,
            boxes[n],
            wall,
            max_leaves,
            relaxed,
            budget,
            unit.start,
            unit.where(),
            shared,
            shared.path is None
            and not (isinstance(ex, InlineExecutor) and shared.sha256 in _programs),
        )
        if isinstance(ex, InlineExecutor):  # here: the builder's own progress lines
            futures[ex.submit(solve_unit, text, shown, True)] = unit
        else:
            futures[ex.submit(solve_unit, text)] = unit
        stats["units"] += 1

    # a single first unit runs here: an easy query (one unit within its budget) never waits
    # for a pool to start; the unit's answer is the same wherever it runs
    units = [Unit(c) for c in first]
    for u in units:
        u.cell.unit = u
        submit(u, InlineExecutor() if len(units) == 1 else executor)
    while futures:
        interruption.check()
        left = deadline - time.monotonic()
        if left <= 0:
            for unit in futures.values():
                reasons[unit.key()] = (
                    f"{unit.where()}: time limit reached ({done} of "
                    f"{stats['units']} units answered)"
                )
            break
        finished, _ = cf.wait(list(futures), timeout=min(0.2, left), return_when=cf.FIRST_COMPLETED)
        trees = []  # read once the open cells are submitted: the workers go on meanwhile
        for f in sorted(finished, key=lambda f: futures[f].key()):
            unit = futures.pop(f)
            answer = f.result()  # text, or a tree answer of a unit solved here (objects)
            what, value, extra = answer if isinstance(answer, tuple) else read_answer(answer)
            done += 1
            if what == "tree":
                s, opens = extra
                trees.append((unit, value))
                unit.units = [Unit(unit.cell, o, unit.at + (i,)) for i, o in enumerate(opens)]
                _add_stats(stats, s)
                cells += s.get("leaves", 0)
                unit_time += s.get("time_s", 0.0)
                unit_cpu += s.get("cpu_s", 0.0)
                if opens:
                    stats["units_handed_back"] += 1
                    stats["open_cells"] += len(opens)
                if cells > max_leaves or (
                    opens and cells + len(futures) + len(opens) > max_leaves
                ):  # a unit certifies a cell at least
                    reasons[(-1,)] = f"more than {max_leaves} cells in all"
                    break
                for v in unit.units:
                    submit(v)
            elif what == "violated":
                ans = confirm(value)
                if ans is not None:
                    return "point", ans, stats
                reasons[unit.key()] = (
                    f"{unit.where()}: a cell reaches a forbidden output, but the point z3 gave "
                    "was not confirmed by the kernel"
                )
            else:
                reasons[unit.key()] = f"{unit.where()}: {value}"
        for unit, t in trees:
            unit.tree = tree_of(t) if isinstance(t, dict) else t
        if finished:
            interruption.note_stats(
                units=stats["units"],
                units_answered=done,
                cells_certified=cells,
                units_running=len(futures),
            )
        if (-1,) in reasons:
            break
        now = time.monotonic()
        if progress_shown and now - start >= 1 and (now - last >= 1 or not futures):
            last = now
            print(
                f"exactmax: {done}/{stats['units']} units done, {cells} cells certified, "
                f"{now - start:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    stats["units_wall_s"] = round(unit_time, 3)
    stats["units_cpu_s"] = round(unit_cpu, 3)
    stats["units_span_s"] = round(time.monotonic() - start, 3)  # first unit to last answer
    if reasons:
        return "unknown", reasons[min(reasons)], stats
    for c in first:
        assert c.unit is not None  # every first cell was given its unit
        c.tree = c.unit.assembled()
    return "trees", [assemble(r) for r in roots], stats


# ----------------------------------------------------------------------- workers


def check_map(executor: cf.Executor):
    """A ``map`` for the kernel's check in pieces (``kernel.property.check_case``) on as many
    processes as the local pool has workers, or None (in this process): with --workers 1, and
    with a Dask cluster, whose machines are not this one.  On Linux the processes are forked from
    this one when the check starts (``fork_map``): they hold the certificate already, where the
    pool's workers would receive each piece pickled (python-flint's numbers pickle at about 4 us
    each way: on ACAS Xu property 1 the transfer took as long as the check).  Elsewhere the
    pool's workers, the pieces in a few chunks per worker (the program pickled once a chunk)."""
    if not isinstance(executor, cf.ProcessPoolExecutor):
        return None
    from ..kernel.property import PIECES

    n = max(1, getattr(executor, "_max_workers", 1))
    if sys.platform == "linux" and n > 1:
        return functools.partial(fork_map, n)
    return functools.partial(executor.map, chunksize=max(1, PIECES // (4 * n)))


_forked_call: tuple | None = None  # (fn, argument lists) of the running fork_map, for its children


def _forked(k: int):
    fn, lists = _forked_call  # type: ignore[misc]
    return fn(*(a[k] for a in lists))


def _fork_init() -> None:
    """In a forked checker: the coordinator's signal handlers and wake-up pipe are not its own
    (SIGTERM ends it, SIGINT is the coordinator's to answer); it dies with its parent."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the pool's own exit ends the processes
        pass


def fork_map(n: int, fn, *iterables) -> list:
    """[fn(*args) for args in zip(*iterables)], computed by n processes forked from this one
    (each inherits the arguments; only indices and results travel), in order; an exception of
    fn is raised here.  The processes end when the map returns or is interrupted."""
    import multiprocessing as mp

    global _forked_call
    lists = [list(it) for it in iterables]
    _forked_call = (fn, lists)
    try:
        with mp.get_context("fork").Pool(min(n, len(lists[0]) or 1), _fork_init) as pool:
            result = pool.map_async(_forked, range(len(lists[0])), chunksize=1)
            while not result.ready():  # short waits: a time limit or a signal ends it here
                result.wait(0.1)
            return result.get()
    finally:
        _forked_call = None


def default_workers() -> int:
    """The cores this process may run on (its CPU affinity where the system says, else the
    machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class workers_of:
    """``with workers_of(args) as executor``: the executor of --workers N (default: the
    machine's cores) or --scheduler ADDRESS, after checking --workers and --split-depth;
    a missing Dask or an unreachable scheduler is a usage error (one line, exit 2)."""

    def __init__(self, args):
        from ..exits import UsageError

        n = args.workers if args.workers is not None else default_workers()
        if n < 1:
            raise UsageError(f"--workers: expected a positive number of workers, got {n}")
        if not 0 <= args.split_depth <= 12:
            raise UsageError(
                f"--split-depth: expected 0 to 12 levels (2^K units), got {args.split_depth}"
            )
        if args.unit_cells is not None and args.unit_cells < 1:
            raise UsageError(f"--unit-cells: expected a positive number, got {args.unit_cells}")
        if args.scheduler is not None and args.workers is not None:
            raise UsageError(
                "--workers and --scheduler: give one (the cluster has its own workers)"
            )
        self.workers = Workers(n, args.scheduler)

    def __enter__(self) -> cf.Executor:
        from ..exits import UsageError

        try:
            return self.workers.__enter__()
        except SchedulerError as e:
            raise UsageError(str(e)) from None

    def __exit__(self, *exc) -> bool:
        return self.workers.__exit__(*exc)
