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
from dataclasses import dataclass

from .. import interruption
from ..kernel.certificate import Row, Split, domain_rows
from ..kernel.polyhedron import Box, Polyhedron
from ..kernel.property import Case
from ..kernel.rational import Q, ZERO, q_str

DEFAULT_SPLIT_DEPTH = 4
"""Levels of input splits (2^4 = 16 units per case): enough units to keep a few workers
busy when the sub-cells are uneven; the same for every number of workers."""


# ----------------------------------------------------------------------- the input splits

@dataclass(frozen=True)
class Unit:
    """A leaf of the input splits: the split rows on its path (after the domain's)."""
    index: int
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Cut:
    """An input split: a . x + c >= 0 (ge) / < 0 (lt)."""
    a: tuple
    c: Q
    ge: object
    lt: object


def _halves(a, c) -> tuple[Row, Row]:
    return Row(tuple(a), c), Row(tuple(-v for v in a), -c, True)


def _unit_vector(d: int, t: int) -> tuple:
    return tuple(Q(int(i == t)) for i in range(d))


def box_splits(box: Box, depth: int):
    """(the plan, the units in plan order): each sub-box bisected at its widest coordinate
    (the first, by exact widths), ``depth`` levels deep (less where a sub-box is a point)."""
    units: list[Unit] = []

    def plan(lower, upper, rows, level):
        widths = [u - lo for lo, u in zip(lower, upper)]
        w = max(widths, default=ZERO)
        if level == depth or not w > 0:
            units.append(Unit(len(units), tuple(rows)))
            return units[-1]
        t = widths.index(w)
        m = (lower[t] + upper[t]) / 2
        a, c = _unit_vector(len(lower), t), -m
        ge_row, lt_row = _halves(a, c)
        ge = plan(lower[:t] + (m,) + lower[t + 1:], upper, rows + [ge_row], level + 1)
        lt = plan(lower, upper[:t] + (m,) + upper[t + 1:], rows + [lt_row], level + 1)
        return Cut(a, c, ge, lt)

    return plan(tuple(box.lower), tuple(box.upper), [], 0), units


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


def polyhedron_splits(P: Polyhedron, depth: int):
    """As ``box_splits`` for a polyhedron: the widest coordinate of each sub-cell's float
    bounding box, split at the dyadic rational nearest its float midpoint."""
    units: list[Unit] = []
    base = domain_rows(P)

    def plan(rows, level):
        bounds = None if level == depth else _float_bounds(base + [
            Row(r.a, r.c) for r in rows], P.dim)
        best = None
        for t, (lo, hi) in enumerate(bounds or ()):
            if lo is not None and hi is not None and hi - lo > 1e-9 * (1 + abs(lo) + abs(hi)):
                if best is None or hi - lo > best[1]:
                    best = (t, hi - lo, (lo + hi) / 2)
        if best is None:
            units.append(Unit(len(units), tuple(rows)))
            return units[-1]
        a, c = _unit_vector(P.dim, best[0]), -Q(*float(best[2]).as_integer_ratio())
        ge_row, lt_row = _halves(a, c)
        ge = plan(rows + [ge_row], level + 1)
        lt = plan(rows + [lt_row], level + 1)
        return Cut(a, c, ge, lt)

    return plan([], 0), units


def assemble(plan, trees: list):
    """The tree of the input splits with unit i's tree at its leaf i (no choices at the
    splits: each unit proves its own from the domain's rows and its path's)."""
    if isinstance(plan, Unit):
        return trees[plan.index]
    return Split(tuple(plan.a), plan.c, assemble(plan.ge, trees), assemble(plan.lt, trees), ())


# ----------------------------------------------------------------------- units as JSON

def _rows_json(rows) -> list:
    return [{"a": [q_str(v) for v in r.a], "c": q_str(r.c), "strict": r.strict} for r in rows]


def _q(text: str) -> Q:
    n, _, d = text.partition("/")
    return Q(int(n), int(d or 1))


def _rows_of(items) -> tuple[Row, ...]:
    return tuple(Row(tuple(_q(v) for v in r["a"]), _q(r["c"]), bool(r["strict"]))
                 for r in items)


def unit_text(kind: str, models_json: list, case: Case, unit: Unit, box: Box | None,
              deadline_wall: float, max_leaves: int) -> str:
    """The work unit as JSON text.  ``inputs``: the domain's rows, then the unit's split rows
    (closed), as A x <= b."""
    A = [list(map(q_str, a)) for a in case.inputs.A]
    b = [q_str(v) for v in case.inputs.b]
    for r in unit.rows:
        A.append([q_str(-v) for v in r.a])
        b.append(q_str(r.c))
    return json.dumps({
        "kind": kind, "models": models_json, "index": unit.index,
        "inputs": {"A": A, "b": b, "dim": case.inputs.dim},
        "outputs": [_rows_json(conj) for conj in case.outputs],
        "box": None if box is None else {"lower": [q_str(v) for v in box.lower],
                                          "upper": [q_str(v) for v in box.upper]},
        "deadline": deadline_wall, "max_leaves": max_leaves}, separators=(",", ":"))


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
            _programs[key] = program_of_maxout(models[0])
        else:
            from .tolerance import programs
            _programs[key] = programs(*models)[1]
    return _programs[key]


def solve_unit(text: str) -> str:
    """A work unit's answer, as JSON text: {"tree": T, "stats": ...} (T as in a property
    certificate), {"violated": x} (a point z3 found where a forbidden conjunction holds on the
    cell; exact, to be re-evaluated by the kernel) or {"unknown": reason}."""
    from ..io.property_certificate import _tree
    from .certify import Limits, NoCertificate
    from .property import Violated, build_case_tree
    u = json.loads(text)
    with _unit_lock:
        started = time.monotonic()
        deadline = started + (u["deadline"] - time.time())
        try:
            p = _program(u["kind"], u["models"])
            P = Polyhedron(tuple(tuple(_q(v) for v in a) for a in u["inputs"]["A"]),
                           tuple(_q(v) for v in u["inputs"]["b"]), u["inputs"]["dim"])
            case = Case(P, tuple(_rows_of(conj) for conj in u["outputs"]))
            box = None if u["box"] is None else Box(tuple(map(_q, u["box"]["lower"])),
                                                   tuple(map(_q, u["box"]["upper"])))
            if time.monotonic() > deadline:
                return json.dumps({"unknown": "time limit reached before the unit started"})
            with interruption.time_limit(deadline):
                tree, stats = build_case_tree(p, case, box, Limits(deadline, u["max_leaves"]))
        except Violated as e:
            return json.dumps({"violated": [q_str(v) for v in e.x]})
        except NoCertificate as e:
            return json.dumps({"unknown": str(e)})
        except interruption.TimeLimit:
            return json.dumps({"unknown": "time limit reached while building the certificate"})
        stats = {k: stats[k] for k in ("leaves", "splits", "proofs") if k in stats}
        stats["time_s"] = round(time.monotonic() - started, 3)
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

def run_units(executor: cf.Executor, texts: list[str], deadline: float, stop, progress=None):
    """The answers (JSON text, None where not received) of the units, in their order.
    ``stop(i, text)`` is called on each answer as it arrives; True ends the run at once
    (a confirmed counterexample).  Ends at ``deadline`` (time.monotonic()) with the missing
    answers None; SIGINT/SIGTERM end it within the polling interval (the caller's ``with
    Workers`` then ends the workers)."""
    answers: list[str | None] = [None] * len(texts)
    futures = {}
    for i, t in enumerate(texts):
        futures[executor.submit(solve_unit, t)] = i
        interruption.check()
    pending = set(futures)
    while pending:
        interruption.check()
        left = deadline - time.monotonic()
        if left <= 0:
            break
        done, pending = cf.wait(pending, timeout=min(0.2, left),
                                return_when=cf.FIRST_COMPLETED)
        for f in sorted(done, key=futures.get):
            i = futures[f]
            answers[i] = f.result()
            if progress is not None:
                progress(answers)
            if stop(i, answers[i]):
                return answers
    return answers


def units_progress(shown: bool, total: int):
    """A progress printer (units done / total, cells so far, elapsed) for stderr, printing
    from the first second on, at most once a second; None when not ``shown``."""
    if not shown:
        return None
    start, last = time.monotonic(), [0.0]

    def show(answers):
        now = time.monotonic()
        done = [a for a in answers if a is not None]
        if now - start < 1 or (now - last[0] < 1 and len(done) < total):
            return
        last[0] = now
        cells = 0
        for a in done:
            if a.startswith('{"tree"'):
                cells += json.loads(a)["stats"].get("leaves", 0)
        print(f"exactmax: {len(done)}/{total} units done, {cells} cells certified, "
              f"{now - start:.0f} s", file=sys.stderr, flush=True)
    return show


def _add_stats(total: dict, s: dict) -> None:
    total["leaves"] = total.get("leaves", 0) + s.get("leaves", 0)
    total["splits"] = total.get("splits", 0) + s.get("splits", 0)
    how = total.setdefault("proofs", {})
    for k, v in s.get("proofs", {}).items():
        how[k] = how.get(k, 0) + v


def split_case_trees(kind: str, models_json: list, cases: list, boxes: list, dim: int,
                     deadline: float, max_leaves: int, executor: cf.Executor, depth: int,
                     confirm, progress_shown: bool = False):
    """One tree per case, each the input splits (``depth`` levels) over trees of units solved
    on ``executor``; or the first confirmed point (``confirm(x)`` -> answer or None, called
    here on each point a unit reports); or ("unknown", reason).  Returns (what, value, stats)
    with what in "trees", "point", "unknown"."""
    plans, texts, where = [], [], []
    wall = time.time() + (deadline - time.monotonic())
    for n, (case, box) in enumerate(zip(cases, boxes)):
        plan, units = (box_splits(box, depth) if box is not None else
                       polyhedron_splits(case.inputs, depth))
        plans.append((plan, len(units)))
        for u in units:
            texts.append(unit_text(kind, models_json, case, u, box, wall, max_leaves))
            where.append((n, u.index))
    stats = {"units": len(texts), "split_depth": depth}
    found: list = []
    unconfirmed: list = []

    def stop(i, text):
        if text.startswith('{"violated"'):
            _, x, _ = read_answer(text, dim)
            ans = confirm(x)
            if ans is not None:
                found.append(ans)
                return True
            unconfirmed.append(i)
        return False

    answers = run_units(executor, texts, deadline, stop,
                        units_progress(progress_shown, len(texts)))
    if found:
        return "point", found[0], stats
    trees_of = [[None] * m for _, m in plans]
    reason = None
    unit_time = 0.0
    for i, text in enumerate(answers):
        n, j = where[i]
        if text is None:
            reason = reason or (f"case {n}, unit {j}: time limit reached "
                                f"({sum(a is not None for a in answers)} of {len(texts)} "
                                "units answered)")
            continue
        what, value, s = read_answer(text, dim)
        if what == "tree":
            trees_of[n][j] = value
            _add_stats(stats, s)
            unit_time += s.get("time_s", 0.0)
        elif what == "violated":
            reason = reason or (f"case {n}, unit {j}: a cell reaches a forbidden output, but "
                                "the point z3 gave was not confirmed by the kernel")
        else:
            reason = reason or f"case {n}, unit {j}: {value}"
    stats["units_cpu_s"] = round(unit_time, 3)
    if reason is not None:
        return "unknown", reason, stats
    return "trees", [assemble(plan, t) for (plan, _), t in zip(plans, trees_of)], stats


# ----------------------------------------------------------------------- deciding

def decide_property_split(net, prop, timeout_s: float, max_leaves: int, search: bool,
                          executor: cf.Executor, depth: int = DEFAULT_SPLIT_DEPTH,
                          progress_shown: bool = False):
    """``property.decide_property`` with the certificate built from work units: the same
    search first, then ``split_case_trees`` for all cases at once, then the kernel's check."""
    from ..io.models import model_to_json
    from ..kernel.errors import CheckFailed
    from ..kernel.property import check_property
    from .property import Answer, search_counterexample, violation
    start = time.monotonic()
    deadline = start + timeout_s
    stats: dict = {}
    boxes = list(prop.boxes or (None,) * len(prop.cases))
    if search:
        found, s = search_counterexample(net, prop.cases, boxes,
                                         min(deadline, start + max(1.0, timeout_s / 4)))
        stats["search"] = s
        if found is not None:
            x, n, j, y, margin = found
            stats["found_by"] = "search"
            return Answer("sat", x, y, (n, j), margin, stats=stats)

    def confirm(x):
        cn, cj, y, margin = violation(net, prop.cases, x)
        if cn is None:
            return None
        return Answer("sat", x, y, (cn, cj), margin, stats=stats | {"found_by": "certificate"})

    what, value, s = split_case_trees("maxout", [model_to_json(net)], list(prop.cases), boxes,
                                      net.input_dim, deadline, max_leaves, executor, depth,
                                      confirm, progress_shown)
    stats.update(s)
    if what == "point":
        value.stats = stats | {"found_by": "certificate"}
        return value
    if what == "unknown":
        return Answer("unknown", reason=value, stats=stats)
    try:
        t0 = time.monotonic()
        stats["leaves_checked"] = check_property(net, prop.cases, tuple(value))
        stats["kernel_check_s"] = round(time.monotonic() - t0, 3)
    except CheckFailed as e:   # a producer bug: never trusted, reported
        return Answer("unknown", reason=f"the kernel rejected the certificate ({e})",
                      stats=stats)
    return Answer("unsat", trees=tuple(value), stats=stats)


def decide_tolerance_split(a, b, dom, epsilon, timeout_s: float, max_leaves: int,
                           run_search: bool, executor: cf.Executor,
                           depth: int = DEFAULT_SPLIT_DEPTH, progress_shown: bool = False):
    """``tolerance.decide_tolerance`` with the certificate built from work units."""
    from ..io.models import model_to_json
    from ..kernel.errors import CheckFailed
    from ..kernel.pair import check_pair_property, pair_case
    from ..kernel.program import Unsupported
    from .certify import NoCertificate
    from .tolerance import Answer, FloatProgram, polish, programs, refutes, restate, search
    start = time.monotonic()
    deadline = start + timeout_s
    stats: dict = {}
    try:
        p, q = programs(a, b)
    except NoCertificate as e:
        return Answer("unknown", reason=str(e), stats=stats)
    except Unsupported as e:
        return Answer("unknown", reason=f"unsupported: {e}", stats=stats)
    stats["program_nodes"] = len(p.nodes)
    P = dom.as_polyhedron()
    n_out = len(p.outputs) // 2
    case = pair_case(P, n_out, epsilon)
    box = dom if isinstance(dom, Box) else None
    fp = FloatProgram(q) if box is not None else None

    def better(ans):
        if epsilon is None or box is None:
            return ans
        return polish(a, b, fp, P, n_out, box, ans, min(deadline, time.monotonic() + 2.0))

    if run_search and box is not None:
        found, s, best = search(a, b, fp, case, box, epsilon,
                                min(deadline, start + max(1.0, timeout_s / 4)))
        stats["search"] = s
        if best[0] is not None:
            stats["largest_gap_seen"] = best[0]
        if found is not None:
            found = better(found)
            found.stats = stats | {"found_by": "search"}
            return found

    def confirm(x):
        return refutes(a, b, x, epsilon) if P.contains(tuple(x)) else None

    what, value, s = split_case_trees("pair", [model_to_json(a), model_to_json(b)], [case],
                                      [box], P.dim, deadline, max_leaves, executor, depth,
                                      confirm, progress_shown)
    stats.update(s)
    if what == "point":
        found = better(value)
        found.stats = stats | {"found_by": "certificate"}
        return found
    if what == "unknown":
        return Answer("unknown", reason=value, stats=stats)
    tree = restate(p, value[0], len(domain_rows(P)))
    try:
        t0 = time.monotonic()
        stats["leaves_checked"] = check_pair_property(a, b, dom, epsilon, tree)
        stats["kernel_check_s"] = round(time.monotonic() - t0, 3)
    except CheckFailed as e:   # a producer bug: never trusted, reported
        return Answer("unknown", reason=f"the kernel rejected the certificate ({e})",
                      stats=stats)
    return Answer("proved", tree=tree, stats=stats)


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
