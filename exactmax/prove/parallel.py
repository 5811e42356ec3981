"""Input splitting into work units, solved on any ``concurrent.futures.Executor`` (this
process, a process pool, or a Dask cluster), assembled into one split tree.

The mathematics.  Let D be the case's input set with rows R_1 .. R_m (``domain_rows``).  An
input split on the hyperplane a . x + c = 0 cuts a cell C into C_ge = C and {a . x + c >= 0}
and C_lt = C and {-a . x - c > 0}; k levels of them cut D into at most 2^k sub-cells, each
the set of D's rows followed by the split rows on its path, in order (the rows the kernel's
walk gives a node of the tree at that path).  A work unit is one sub-cell S: it is solved by
``property.build_case_tree`` on the case whose input polyhedron has exactly those rows, so
the row indices of its tree are the indices the same subtree has inside the assembled tree
Split(a, c, T_ge, T_lt, no choices) of the input splits.  A strict split row is handed to the
unit as its closure (>= 0): a Farkas combination valid on the closure is valid on the strict
row too (the kernel's check only gains a strict row it may use), so every proof of the unit
holds in the assembled tree; the kernel checks the assembled tree as it checks any other.

For a box D (lower <= x <= upper), the splits bisect a sub-box's widest coordinate (the first
such, by exact widths) at its exact midpoint: x_t - m >= 0 (upper half) / m - x_t > 0 (lower
half).  For a polyhedron, a float LP gives each sub-cell's bounding box (floats only guide:
any hyperplane gives a valid tree), and the split is the widest coordinate at the dyadic
midpoint.  The units handed to the builder carry D's own box (its rows stay the first 2 d),
never the sub-box: the builder's box proofs name rows 0 .. 2 d - 1 as the box's rows.

The units and their answers are JSON text (z3 terms do not pickle, and a Dask cluster may run
another machine's Python): the network (exactmax JSON), the case's output conjunctions, the
sub-cell's rows, D's box, the wall-clock deadline and the cell budget in; the tree (as in a
property certificate), a point z3 found in a forbidden output region, or the reason for no
answer out.  The splits depend on D and k alone and each unit's answer on its unit alone, and
the trees are assembled in the order of the splits: the certificate is the same whatever the
number of workers.  A point is re-evaluated by the kernel in this process; any unit without
an answer makes the answer unknown, with the reason of the first such unit.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import signal
import sys
import threading
import time

from .. import interruption
from .floatlp import unknown_beyond_floats
from .property import Answer as _PropertyAnswer
from .tolerance import Answer as _ToleranceAnswer
from ..kernel.certificate import Row, Split, domain_rows
from ..kernel.polyhedron import Box, Polyhedron
from ..kernel.property import Case
from ..kernel.rational import ZERO, Q, q_str

DEFAULT_SPLIT_DEPTH = 0
"""Levels of input splits made before any unit is solved (0: the first unit is the whole
input set; an easy query stays one unit)."""
DEFAULT_UNIT_CELLS = None
"""Cells a unit may build before it is split in two instead (the same for every number of
workers, so the splits are too); None: never (the split depth alone makes the units).  Not on
by default: the tree builders cannot hand back the cells they certified before the budget ran
out, so a unit over budget is work thrown away, and bisecting the input duplicates the cells
that hyperplanes crossing both halves need (measured in benchmarks/parallel.py)."""


# ----------------------------------------------------------------------- the input splits

class Cell:
    """A cell of the input splits: case ``case``'s input set and the split rows on the path
    ``path`` ("" the root, then "g" / "l" per level); for a box, its sub-box.  Once split,
    ``cut`` = (a, c) and ``ge`` / ``lt`` its halves; once solved, ``tree``."""

    def __init__(self, case: int, rows: tuple, lower=None, upper=None, path: str = ""):
        self.case, self.rows, self.lower, self.upper, self.path = case, rows, lower, upper, path
        self.cut = self.ge = self.lt = self.tree = None

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
        cols = [([i for i, r in enumerate(rows) if r.a[t]],
                 [float(r.a[t]) for r in rows if r.a[t]]) for t in range(d)]
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
            st, _, value = floatlp._solve_lp(cost, cols, lo, [inf] * len(rows),
                                             [-inf] * d, [inf] * d)
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
        cell.ge = Cell(cell.case, cell.rows + (ge_row,), lo[:t] + (m,) + lo[t + 1:], up,
                       cell.path + "g")
        cell.lt = Cell(cell.case, cell.rows + (lt_row,), lo, up[:t] + (m,) + up[t + 1:],
                       cell.path + "l")
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
    return Split(tuple(a), c, assemble(cell.ge), assemble(cell.lt), ())


# ----------------------------------------------------------------------- units as JSON

def _rows_json(rows) -> list:
    return [{"a": [q_str(v) for v in r.a], "c": q_str(r.c), "strict": r.strict} for r in rows]


def _q(text: str) -> Q:
    n, _, d = text.partition("/")
    return Q(int(n), int(d or 1))


def _rows_of(items) -> tuple[Row, ...]:
    return tuple(Row(tuple(_q(v) for v in r["a"]), _q(r["c"]), bool(r["strict"]))
                 for r in items)


def unit_text(kind: str, models_json: list, case: Case, cell: Cell, box: Box | None,
              deadline_wall: float, max_leaves: int, relaxed: bool = True) -> str:
    """The work unit as JSON text.  ``inputs``: the domain's rows, then the cell's split rows
    (closed), as A x <= b."""
    A = [list(map(q_str, a)) for a in case.inputs.A]
    b = [q_str(v) for v in case.inputs.b]
    for r in cell.rows:
        A.append([q_str(-v) for v in r.a])
        b.append(q_str(r.c))
    return json.dumps({
        "kind": kind, "models": models_json, "cell": cell.where(),
        "inputs": {"A": A, "b": b, "dim": case.inputs.dim},
        "outputs": [_rows_json(conj) for conj in case.outputs],
        "box": None if box is None else {"lower": [q_str(v) for v in box.lower],
                                          "upper": [q_str(v) for v in box.upper]},
        "deadline": deadline_wall, "max_leaves": max_leaves, "relaxed": relaxed},
        separators=(",", ":"))


_programs: dict = {}
_unit_lock = threading.Lock()   # one unit at a time per process: z3's context, HiGHS state


def _program(kind: str, models_json: list):
    """The tree builder's program of the unit's models (cached per process by content)."""
    key = hashlib.sha256(json.dumps([kind, models_json], sort_keys=True).encode()).hexdigest()
    if key not in _programs:
        from ..io.jsonfile import Cursor
        from ..io.models import read_model
        from ..kernel.program import program_of_maxout
        models = [read_model(Cursor("work unit", f"models[{i}]", m))
                  for i, m in enumerate(models_json)]
        if kind == "maxout":
            _programs[key] = program_of_maxout(models[0]), models
        else:
            from .tolerance import programs
            _programs[key] = programs(*models)[1], models
    return _programs[key]


def _relaxed(kind: str, models, p, case: Case, limits):
    """As ``property.decide_property`` does first, for a network (kind "maxout"): the tree
    of relaxed leaves (``relaxation.build_relaxed_tree``; None where it does not apply), a
    cell centre that is a counterexample (in floats, then exactly) raising Violated."""
    if kind != "maxout":
        return None
    try:
        from .relaxation import build_relaxed_tree
    except ImportError:
        return None
    import numpy as np

    from .property import Violated, _FloatNet, _margins, violation
    net = models[0]
    fnet = _FloatNet(net)

    def centre(x):
        X = np.array([[float(v) for v in x]])
        Y = fnet(X)
        if any(_margins(conj, X, Y)[0] > -1e-9 for conj in case.outputs):
            if violation(net, (case,), x)[0] is not None:
                raise Violated(x)
    return build_relaxed_tree(p, case, limits, centre)


def solve_unit(text: str, progress=None) -> str:
    """A work unit's answer, as JSON text: {"tree": T, "stats": ...} (T as in a property
    certificate), {"violated": x} (a point z3 found where a forbidden conjunction holds on the
    cell; exact, to be re-evaluated by the kernel) or {"unknown": reason}.  ``progress``: the
    tree builders' progress callback (cells so far), for a unit solved in this process."""
    from ..io.property_certificate import _tree
    from .certify import Limits, NoCertificate
    from .property import Violated, build_case_tree
    u = json.loads(text)
    with _unit_lock:
        started, cpu = time.monotonic(), time.process_time()
        deadline = started + (u["deadline"] - time.time())
        try:
            p, models = _program(u["kind"], u["models"])
            P = Polyhedron(tuple(tuple(_q(v) for v in a) for a in u["inputs"]["A"]),
                           tuple(_q(v) for v in u["inputs"]["b"]), u["inputs"]["dim"])
            case = Case(P, tuple(_rows_of(conj) for conj in u["outputs"]))
            box = None if u["box"] is None else Box(tuple(map(_q, u["box"]["lower"])),
                                                   tuple(map(_q, u["box"]["upper"])))
            if time.monotonic() > deadline:
                return json.dumps({"unknown": "time limit reached before the unit started"})
            with interruption.time_limit(deadline):
                limits = Limits(deadline, u["max_leaves"], progress)
                built = _relaxed(u["kind"], models, p, case, limits) \
                    if u.get("relaxed", True) else None
                tree, stats = built or build_case_tree(p, case, box, limits)
        except Violated as e:
            return json.dumps({"violated": [q_str(v) for v in e.x]})
        except NoCertificate as e:
            return json.dumps({"unknown": str(e)})
        except interruption.TimeLimit:
            return json.dumps({"unknown": "time limit reached while building the certificate"})
        stats = {k: stats[k] for k in ("leaves", "splits", "proofs") if k in stats}
        stats["time_s"] = round(time.monotonic() - started, 3)
        stats["cpu_s"] = round(time.process_time() - cpu, 3)
        return json.dumps({"tree": _tree(tree), "stats": stats}, separators=(",", ":"))


def read_answer(text: str, dim: int):
    """("tree", tree, stats) | ("violated", x, None) | ("unknown", reason, None)."""
    from ..io import property_certificate as pc
    from ..io.certificates import _read_empty, read_tree
    from ..io.jsonfile import Cursor
    r = json.loads(text)
    if "tree" in r:   # the leaves of a property certificate, whichever its reader knows
        leaves = {"empty": _read_empty, "excluded": pc._read_excluded}
        if hasattr(pc, "_read_relaxed"):
            leaves["relaxed"] = pc._read_relaxed
        return "tree", read_tree(Cursor("work unit", "tree", r["tree"]), dim, leaves), r["stats"]
    if "violated" in r:
        return "violated", tuple(_q(v) for v in r["violated"]), None
    return "unknown", r["unknown"], None


# ----------------------------------------------------------------------- executors

class InlineExecutor(cf.Executor):
    """Runs each submitted call at once, in this process (``--workers 1``)."""

    def submit(self, fn, /, *args, **kwargs):
        f: cf.Future = cf.Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except Exception as e:   # noqa: BLE001 - handed to the caller through the future
            f.set_exception(e)
        return f


def _worker_init() -> None:
    """In a pool worker: Ctrl-C at the terminal reaches the whole process group; the
    coordinator answers it (and ends the workers), so the workers ignore SIGINT; and a worker
    dies with its parent (Linux: PR_SET_PDEATHSIG)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except Exception:   # not Linux: the pool's own shutdown ends the workers
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
        self.client = self.executor = None

    def __enter__(self) -> cf.Executor:
        if self.scheduler is not None:
            try:
                from dask.distributed import Client
            except ImportError:
                raise SchedulerError("--scheduler needs Dask: pip install 'exactmax[dask]' (or "
                                     "'.[dask]' in a checkout)") from None
            try:
                self.client = Client(self.scheduler, timeout="5s")
            except (OSError, TimeoutError, ValueError, TypeError) as e:
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise SchedulerError(f"--scheduler: cannot reach a Dask scheduler at "
                                     f"{self.scheduler} ({msg})") from None
            self.executor = self.client.get_executor(pure=False)
        elif self.n <= 1:
            self.executor = InlineExecutor()
        else:
            import multiprocessing as mp
            try:
                ctx = mp.get_context("forkserver")
                ctx.set_forkserver_preload(["exactmax.prove.parallel", "exactmax.prove.property"])
            except ValueError:
                ctx = mp.get_context("spawn")
            self.executor = cf.ProcessPoolExecutor(self.n, mp_context=ctx,
                                                   initializer=_worker_init)
        return self.executor

    def __exit__(self, *exc) -> bool:
        ex = self.executor
        if isinstance(ex, cf.ProcessPoolExecutor):
            procs = list((ex._processes or {}).values())
            ex.shutdown(wait=False, cancel_futures=True)
            for p in procs:
                if p.is_alive():
                    p.terminate()
            for p in procs:
                p.join(timeout=1.0)
        elif self.client is not None:
            try:
                ex.shutdown(wait=False)
            finally:
                self.client.close(timeout=2)
        return False


# ----------------------------------------------------------------------- running units

MAX_DEPTH = 24
"""Input splits below a case's root at most: a cell that still needs more than the unit
budget of cells there is left unknown."""


def _add_stats(total: dict, s: dict) -> None:
    total["leaves"] = total.get("leaves", 0) + s.get("leaves", 0)
    total["splits"] = total.get("splits", 0) + s.get("splits", 0)
    how = total.setdefault("proofs", {})
    for k, v in s.get("proofs", {}).items():
        how[k] = how.get(k, 0) + v


def split_case_trees(kind: str, models_json: list, cases: list, boxes: list, dim: int,
                     deadline: float, max_leaves: int, executor: cf.Executor, depth: int,
                     unit_cells: int, confirm, progress_shown: bool = False,
                     relaxed: bool = True):
    """One tree per case: input splits over trees of work units solved on ``executor``.

    Every case's input set is first split ``depth`` levels deep; each cell is a unit, solved
    with a budget of ``unit_cells`` cells; a unit over budget is split in two and its halves
    are units in turn (down to MAX_DEPTH levels).  Which cells are split depends only on the
    units' answers, so the tree is the same for every executor.  Stops at the first point a
    unit reports that ``confirm(x)`` turns into an answer (a counterexample evaluated by the
    kernel), at the deadline, or with every cell solved.  Returns (what, value, stats):
    ("trees", one tree per case), ("point", confirm's answer), ("unknown", reason)."""
    wall = time.time() + (deadline - time.monotonic())
    roots, todo = [], []
    for n, (case, box) in enumerate(zip(cases, boxes)):
        root = Cell(n, (), None if box is None else tuple(box.lower),
                    None if box is None else tuple(box.upper))
        roots.append(root)
        level = [root]
        for _ in range(depth):
            level = [h for c in level if split(c, case.inputs) for h in (c.ge, c.lt)] + \
                    [c for c in level if c.cut is None]
        todo += level
    budget = max_leaves if unit_cells is None else max(1, min(unit_cells, max_leaves))
    over = f"more than {budget} cells"
    stats: dict = {"units": 0, "split_depth": depth, "unit_cells": budget}
    reasons: dict = {}
    futures: dict = {}
    cells, done, unit_time, unit_cpu = 0, 0, 0.0, 0.0
    start = last = time.monotonic()

    def inline_progress(leaves):
        print(f"exactmax: {cells + leaves} cells certified, {time.monotonic() - start:.0f} s",
              file=sys.stderr, flush=True)

    if not progress_shown:
        inline_progress = None   # noqa: F811

    def submit(cell, ex=executor):
        n = cell.case
        text = unit_text(kind, models_json, cases[n], cell, boxes[n], wall, budget, relaxed)
        if isinstance(ex, InlineExecutor):   # here: the builder's own progress lines
            futures[ex.submit(solve_unit, text, inline_progress)] = cell
        else:
            futures[ex.submit(solve_unit, text)] = cell
        stats["units"] += 1

    # a single first unit runs here: an easy query never waits for a pool to start (the
    # unit's answer is the same wherever it runs)
    for cell in todo:
        submit(cell, InlineExecutor() if len(todo) == 1 else executor)
    while futures:
        interruption.check()
        left = deadline - time.monotonic()
        if left <= 0:
            for cell in futures.values():
                reasons[(cell.case, cell.path)] = (
                    f"{cell.where()}: time limit reached ({done} of {stats['units']} units "
                    "answered)")
            break
        finished, _ = cf.wait(list(futures), timeout=min(0.2, left),
                              return_when=cf.FIRST_COMPLETED)
        for f in sorted(finished, key=lambda f: (futures[f].case, futures[f].path)):
            cell = futures.pop(f)
            what, value, s = read_answer(f.result(), dim)
            done += 1
            if what == "tree":
                cell.tree = value
                _add_stats(stats, s)
                cells += s.get("leaves", 0)
                unit_time += s.get("time_s", 0.0)
                unit_cpu += s.get("cpu_s", 0.0)
                if cells > max_leaves:
                    reasons[(-1, "")] = f"more than {max_leaves} cells in all"
            elif what == "violated":
                ans = confirm(value)
                if ans is not None:
                    return "point", ans, stats
                reasons[(cell.case, cell.path)] = (
                    f"{cell.where()}: a cell reaches a forbidden output, but the point z3 gave "
                    "was not confirmed by the kernel")
            elif value.startswith(over) and budget < max_leaves and stats["units"] + 2 > \
                    max_leaves:   # every unit has a cell at least
                reasons[(-1, "")] = f"more than {max_leaves} cells in all"
            elif value.startswith(over) and budget < max_leaves and \
                    len(cell.path) < MAX_DEPTH and split(cell, cases[cell.case].inputs):
                stats["units_over_budget"] = stats.get("units_over_budget", 0) + 1
                submit(cell.ge)
                submit(cell.lt)
            else:
                reasons[(cell.case, cell.path)] = f"{cell.where()}: {value}"
        if (-1, "") in reasons:
            break
        now = time.monotonic()
        if progress_shown and now - start >= 1 and (now - last >= 1 or not futures):
            last = now
            print(f"exactmax: {done}/{stats['units']} units done, {cells} cells certified, "
                  f"{now - start:.0f} s", file=sys.stderr, flush=True)
    stats["units_wall_s"] = round(unit_time, 3)   # the solved units' (not the discarded)
    stats["units_cpu_s"] = round(unit_cpu, 3)
    if reasons:
        return "unknown", reasons[min(reasons)], stats
    return "trees", [assemble(r) for r in roots], stats


# ----------------------------------------------------------------------- deciding

@unknown_beyond_floats(_PropertyAnswer)
def decide_property_split(net, prop, timeout_s: float, max_leaves: int, search: bool,
                          executor: cf.Executor, depth: int = DEFAULT_SPLIT_DEPTH,
                          unit_cells: int = DEFAULT_UNIT_CELLS, progress_shown: bool = False,
                          relaxed: bool = True):
    """``property.decide_property`` with the trees built from work units
    (``split_case_trees`` for all cases at once): the same search, answers and kernel check.
    ``relaxed`` False: no relaxed leaves (a certificate export-coq takes)."""
    from ..io.models import model_to_json
    from .property import decide_property

    def build(net, prop, boxes, deadline, confirm, max_leaves, progress, relaxed):
        return split_case_trees("maxout", [model_to_json(net)], list(prop.cases), list(boxes),
                                net.input_dim, deadline, max_leaves, executor, depth,
                                unit_cells, confirm, progress_shown, relaxed)

    return decide_property(net, prop, timeout_s, max_leaves, search, relaxed=relaxed,
                           build=build)


@unknown_beyond_floats(_ToleranceAnswer)
def decide_tolerance_split(a, b, dom, epsilon, timeout_s: float, max_leaves: int,
                           run_search: bool, executor: cf.Executor,
                           depth: int = DEFAULT_SPLIT_DEPTH,
                           unit_cells: int = DEFAULT_UNIT_CELLS, progress_shown: bool = False):
    """``tolerance.decide_tolerance`` with the pair program's tree built from work units
    (``split_case_trees``): the same search, answers and kernel check."""
    from ..io.models import model_to_json
    from .tolerance import decide_tolerance

    def build(q, case, box, deadline, confirm, max_leaves, progress):
        what, value, s = split_case_trees("pair", [model_to_json(a), model_to_json(b)], [case],
                                          [box], case.inputs.dim, deadline, max_leaves,
                                          executor, depth, unit_cells, confirm, progress_shown)
        return what, (value[0] if what not in ("point", "unknown") else value), s

    return decide_tolerance(a, b, dom, epsilon, timeout_s, max_leaves, run_search, build=build)


def default_workers() -> int:
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
            raise UsageError(f"--split-depth: expected 0 to 12 levels (2^K units), got "
                             f"{args.split_depth}")
        if args.unit_cells is not None and args.unit_cells < 1:
            raise UsageError(f"--unit-cells: expected a positive number, got {args.unit_cells}")
        if args.scheduler is not None and args.workers is not None:
            raise UsageError("--workers and --scheduler: give one (the cluster has its own "
                             "workers)")
        self.workers = Workers(n, args.scheduler)

    def __enter__(self) -> cf.Executor:
        from ..exits import UsageError
        try:
            return self.workers.__enter__()
        except SchedulerError as e:
            raise UsageError(str(e)) from None

    def __exit__(self, *exc) -> bool:
        return self.workers.__exit__(*exc)
