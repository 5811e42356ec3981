"""exactmax from Python: ``import exactmax as xm`` (docs/python-api.md).

Each function is the command of the same name without its printing: the same readers (a model
file, .json or .onnx; a domain file; a VNN-LIB property), the same decision functions as the
command modules (``prove/command.py``'s ``decide_equal``, ``prove/tolerance_command.py``'s
``decide_tolerance``, ``prove/property_command.py``'s ``decide_check``,
``construct/command.py``'s ``compile_checked``, ``regions/command.py``'s ``count_checked``)
and the same words: a result's ``verdict``, ``trust``, ``reason`` and ``stats`` are those
of the command's ``--json`` object, built by the same function.

- ``load(path)``, ``import_onnx(path, report=False)``: a model file; the exact Maxout network
  of an ONNX one (with ``report=True``, also ``exactmax import``'s report).
- ``verify(net, transformer=None, domain=None, timeout=60)``: the Transformer (compiled from
  ``net`` when not given) equals ``net`` on the domain (``exactmax verify``).
- ``equiv(a, b, domain=None, epsilon=None, top1=False, timeout=60)``: ``exactmax equiv``.
- ``check(net, prop, timeout=60, workers=1)``: a VNN-LIB property, sat / unsat / unknown
  (``exactmax check``).
- ``compile(net, domain=None, timeout=None)``: the hardmax Transformer and its size
  (``exactmax compile``; ``TimeoutError`` past the timeout).
- ``regions(net, domain=None)``: the exact region counts (``exactmax regions``).

A model argument is a path or a loaded model (``MaxoutNetwork`` or ``Transformer``); a domain
is a path (an exactmax/domain file, or a VNN-LIB property whose input set is the domain, as
``--domain-from``), a ``Box`` or ``Polyhedron``, or ``box="lo,hi;..."`` (as ``--box``).
Verdicts come back as frozen results (``Result``, ``Compilation``, ``Regions``) with exact
numbers as ``fractions.Fraction``; a bad input raises ``InputError`` (one line, the command's
message; ``ArgumentError``, also a ValueError, for a bad argument), never a traceback from
inside.  A ``timeout`` bounds the whole call, even inside one long exact step
(``interruption.time_limit``: one call at a time per process, as one command is); reaching
it is the answer "unknown", with the reason.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from types import SimpleNamespace
from typing import Any, TypeVar

from .exits import UsageError
from .io.errors import InputError, shorten_numbers
from .io.numbers import LONG_EXACT, approx_point, q_str
from .kernel.maxout import MaxoutNetwork
from .kernel.polyhedron import Box, Domain, Polyhedron
from .kernel.transformer import Transformer

__all__ = [
    "ArgumentError",
    "Compilation",
    "Counterexample",
    "InputError",
    "Regions",
    "Result",
    "check",
    "compile",
    "equiv",
    "import_onnx",
    "load",
    "regions",
    "verify",
]

Model = MaxoutNetwork | Transformer
T = TypeVar("T")


class ArgumentError(InputError, ValueError):
    """A bad argument of an API function: ``str(e)`` is one line, ``"name: what is wrong"``.
    An ``InputError`` (the one class to catch for any bad input) and a ``ValueError``."""

    def __init__(self, argument: str, message: str):
        super().__init__(argument, "", message)


# ------------------------------------------------------------------------------- results


def _fractions(values) -> tuple[Fraction, ...]:
    """Exact rationals (FLINT's fmpq) as ``fractions.Fraction``."""
    return tuple(Fraction(int(v.p), int(v.q)) for v in values)


def _point(name: str, values, sep: str = " = ") -> str:
    """``name = (exact, ...)``, or ``name ~ (six digits, ...)`` when a coordinate's exact text
    is long (as the commands print it, ``io.numbers.point_lines``)."""
    exact = [q_str(v) for v in values]
    if max(map(len, exact), default=0) <= LONG_EXACT:
        return f"{name}{sep}({', '.join(exact)})"
    return f"{name} ~ ({', '.join(approx_point(values))})"


def _number(value) -> str:
    """An exact number's text, or its six digits when the text is long."""
    text = q_str(value)
    return text if len(text) <= LONG_EXACT else approx_point([value])[0]


def _short(text: str, limit: int = 100) -> str:
    text = shorten_numbers(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Counterexample:
    """An exact point where the claim fails: ``x`` (Fractions), the outputs there, evaluated by
    the kernel (by model: the names of the answer; ``check``: ``"y"``), and what else the
    answer states (``details``: check's case, conjunction and margin; equiv's gap and output
    with ``epsilon``, arg max sets and ties with ``top1``; how it was found)."""

    x: tuple[Fraction, ...]
    outputs: dict[str, tuple[Fraction, ...]]
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def x_approx(self) -> list[str]:
        """The point to six significant digits (``io.numbers.approx_point``)."""
        return approx_point(self.x)

    def __repr__(self) -> str:
        parts = [_point("x", self.x)] + [_point(n, y, ": ") for n, y in self.outputs.items()]
        return "<counterexample " + "; ".join(parts) + ">"


@dataclass(frozen=True)
class Result:
    """The answer of ``verify``, ``equiv`` or ``check``: ``verdict`` in the words of the
    command's ``--json`` (proved / refuted / unknown / vacuous; sat / unsat / unknown), what
    it rests on (``trust``: "kernel-checked", "solver-only" or None), ``reason`` (unknown),
    the exact ``counterexample`` (or None), the ``certificate`` the kernel checked (the
    in-memory object; ``write_certificate(path)`` writes the file ``--cert`` writes), the
    command's ``stats``, the ``sha256`` of what the answer is about, and ``time_s``."""

    command: str
    verdict: str
    trust: str | None
    reason: str | None
    counterexample: Counterexample | None
    certificate: Any
    stats: dict[str, Any]
    sha256: dict[str, Any]
    time_s: float
    certificate_kind: str | None = None
    summary: str = ""  # the key numbers, as the command's text answer gives them
    _writer: Callable[[str], None] | None = field(default=None, repr=False, compare=False)

    def write_certificate(self, path: str | os.PathLike[str]) -> None:
        """Write the certificate to ``path`` (``.gz``: compressed), the file the command's
        ``--cert`` writes (models, domain or property embedded, bound by SHA-256), for
        ``exactmax check-cert`` and ``export-coq``."""
        if self._writer is None:
            raise ArgumentError(
                "write_certificate",
                f"no certificate: the verdict is {self.verdict}"
                + (" (not checked by the kernel)" if self.trust == "solver-only" else ""),
            )
        self._writer(_path("path", path))

    def check_in_coq(self, timeout_s: float = 600.0):
        """Prove the certificate in Coq too (what ``--coq`` does): write it to a temporary
        file, export it as ``export-coq`` does, compare the file with it, compile it with coqc
        against the library in ``proofs/`` and check its axioms; the temporary files are
        removed.  Returns ``export.recheck.CoqCheck``: ``proved`` (bool), ``seconds`` (coqc),
        ``bytes`` (of the .v file), ``reason`` (why not proved: coqc's message, or why the
        certificate has no Coq export yet).  Needs coqc (ArgumentError without it)."""
        import shutil
        import tempfile

        from .exits import UsageError
        from .export.recheck import coq_check, require_coq

        try:
            require_coq(SimpleNamespace(coq=True))
        except UsageError as e:
            raise ArgumentError("check_in_coq", str(e)) from None
        folder = tempfile.mkdtemp(prefix="exactmax-cert-")
        try:
            path = os.path.join(folder, "certificate.json")
            self.write_certificate(path)
            return coq_check(path, _seconds("timeout_s", timeout_s))
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def __repr__(self) -> str:
        head = f"<{self.command}: {self.verdict}" + (f" ({self.trust})" if self.trust else "")
        parts = [head]
        if self.counterexample is not None:
            parts[0] += " at " + _point("x", self.counterexample.x)
        if self.summary:
            parts.append(self.summary)
        if self.reason and self.verdict not in ("proved", "unsat"):
            parts[0] += ": " + _short(self.reason)
        parts.append(f"{self.time_s:.2f} s")
        return ", ".join(parts) + ">"


@dataclass(frozen=True)
class Compilation:
    """What ``compile`` built: the hardmax ``transformer`` (``write(path)`` writes it, as
    ``compile -o``), its ``size`` (``compile --json``'s report: sub-layers, tokens, heads,
    d_model, parameters per layer and in total), the gate constants C_l and how they were
    bounded (``bounds``: "interval" or "lp")."""

    transformer: Transformer
    size: dict[str, Any]
    gate_constants: tuple[Fraction, ...]
    bounds: str
    verdict: str = "done"

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the Transformer as an exactmax/transformer file, atomically."""
        from .io import model_to_json, write_json_atomic

        write_json_atomic(_path("path", path), model_to_json(self.transformer))

    def __repr__(self) -> str:
        s = self.size
        gates = ", ".join(_number(g) for g in self.gate_constants)
        return (
            f"<compile: {s['sublayers']} sub-layers, {s['tokens']} tokens, {s['heads']} heads, "
            f"d_model {s['d_model']}; gate constants from {self.bounds} bounds: {gates}>"
        )


@dataclass(frozen=True)
class Regions:
    """The answer of ``regions``: ``verdict`` "counted" (``trust`` "kernel-checked": the
    cells, maps, patterns and merges) or "unknown" (``reason``); the counts; ``count``, the
    ``RegionCount`` (cells, maps, the region of every cell); its ``certificate``
    (``write_certificate(path)`` writes the file ``regions --cert`` writes)."""

    verdict: str
    trust: str | None
    reason: str | None
    activation_regions: int | None
    linear_regions: int | None
    cells: int | None
    distinct_maps: int | None
    merge_components: int | None
    linear_certified: bool | None
    count: Any
    certificate: Any
    stats: dict[str, Any]
    sha256: dict[str, Any]
    time_s: float
    _writer: Callable[[str], None] | None = field(default=None, repr=False, compare=False)

    def write_certificate(self, path: str | os.PathLike[str]) -> None:
        """Write the region certificate (model and domain embedded) to ``path``."""
        if self._writer is None:
            raise ArgumentError(
                "write_certificate", f"no certificate: the verdict is {self.verdict}"
            )
        self._writer(_path("path", path))

    def __repr__(self) -> str:
        if self.verdict != "counted":
            return f"<regions: {self.verdict}: {_short(self.reason or '')}, {self.time_s:.2f} s>"
        linear = (
            f"{self.linear_regions} linear regions"
            if self.linear_certified
            else f"{self.distinct_maps} to {self.merge_components} linear regions"
        )
        return (
            f"<regions: counted ({self.trust}), {self.activation_regions} activation regions, "
            f"{linear}, {self.cells} cells, {self.time_s:.2f} s>"
        )


# ------------------------------------------------------------------------------ arguments


def _path(argument: str, value) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ArgumentError(argument, f"expected a path, got {type(value).__name__}")
    return value


def _model(argument: str, value) -> tuple[Model, str, str | None]:
    """(the model, its name in answers, its path or None) of a model argument."""
    if isinstance(value, MaxoutNetwork | Transformer):
        return value, argument, None
    if not isinstance(value, str | os.PathLike):
        raise ArgumentError(
            argument,
            f"expected a path or a loaded model (MaxoutNetwork, Transformer), got "
            f"{type(value).__name__}",
        )
    from .io import load_model

    path = _path(argument, value)
    return load_model(path), path, path


def _domain(domain, box, dim: int) -> tuple[Domain | None, str | None]:
    """(the domain of ``domain=`` or ``box=``, where it came from: its path, "box", or None
    for a Box or Polyhedron given), or (None, None)."""
    from .io.models import box_of_text, domain_of_property, load_domain

    if domain is not None and box is not None:
        raise ArgumentError("box", "give domain= or box=, not both")
    if box is not None:
        if not isinstance(box, str):
            raise ArgumentError("box", f'expected a text "lo,hi;...", got {type(box).__name__}')
        try:
            return box_of_text(box, dim), "box"
        except InputError as e:  # named --box TEXT: here it is the argument box
            raise ArgumentError("box", e.message) from None
    if domain is None:
        return None, None
    if isinstance(domain, Box | Polyhedron):
        return _exact_domain(domain), None
    if not isinstance(domain, str | os.PathLike):
        raise ArgumentError(
            "domain",
            f"expected a path, a Box or a Polyhedron, got {type(domain).__name__}",
        )
    path = _path("domain", domain)
    if path.startswith("--"):
        raise ArgumentError("domain", f'expected a path, got {path!r} (a box: box="lo,hi;...")')
    if path.lower().endswith(".vnnlib"):
        return domain_of_property(path, dim), path
    return load_domain(path, dim), path


def _exact_domain(domain: Domain) -> Domain:
    """A Box or Polyhedron made of the backend's exact rationals (ints, Fractions and fmpq
    accepted; a float is refused: it is not the number it looks like)."""
    from .kernel.rational import rational

    def vector(values, what: str) -> tuple:
        try:
            return tuple(rational(v) for v in values)
        except TypeError as e:
            raise ArgumentError("domain", f"{what}: {str(e).removeprefix('exactmax: ')}") from None

    if isinstance(domain, Box):
        lower, upper = vector(domain.lower, "lower"), vector(domain.upper, "upper")
        if len(lower) != len(upper):
            raise ArgumentError(
                "domain", f"a box with {len(lower)} lower and {len(upper)} upper bounds"
            )
        return Box(lower, upper)
    A = tuple(vector(row, f"A[{i}]") for i, row in enumerate(domain.A))
    b = vector(domain.b, "b")
    if len(A) != len(b) or any(len(row) != domain.dim for row in A):
        raise ArgumentError(
            "domain",
            f"a polyhedron of dimension {domain.dim} needs rows of {domain.dim} numbers in A, "
            f"one per entry of b ({len(A)} rows, {len(b)} entries)",
        )
    return Polyhedron(A, b, domain.dim)


def _seconds(argument: str, value) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value < float("inf")
    ):
        raise ArgumentError(argument, f"expected a positive number of seconds, got {value!r}")
    return float(value)


def _count(argument: str, value, least: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ArgumentError(argument, f"expected an integer >= {least}, got {value!r}")
    return value


def _count_or_none(argument: str, value) -> int | None:
    return None if value is None else _count(argument, value)


def _choice(argument: str, value, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ArgumentError(
            argument, f"expected one of {', '.join(map(repr, choices))}, got {value!r}"
        )
    return value


def _exact(argument: str, value):
    """An exact number >= 0 (int, Fraction, FLINT's fmpq, or text: "1/100", "0.01"); a float
    is refused (it is not the number it looks like)."""
    from .io.numbers import NumberSyntaxError, parse_rational
    from .kernel.rational import Q, rational

    if isinstance(value, str):
        try:
            q = parse_rational(value)
        except NumberSyntaxError as e:
            raise ArgumentError(argument, str(e)) from None
    elif isinstance(value, float):
        raise ArgumentError(
            argument,
            f"expected an exact number (an int, a Fraction or a text such as "
            f'"1/100"), got the float {value!r}',
        )
    else:
        try:
            q = rational(value)
        except TypeError:
            raise ArgumentError(
                argument, f"expected an exact number, got {type(value).__name__}"
            ) from None
    if q < 0:
        raise ArgumentError(argument, f"expected a number >= 0, got {q_str(Q(q))}")
    return q


def _within(
    command: str, seconds: float | None, started: float, body: Callable[[], T], unknown
) -> T:
    """``body()`` within the time limit of ``seconds`` from ``started`` (None: none), as the
    command runs within ``--timeout`` (``interruption.time_limit``); reaching it is
    ``unknown(reason, elapsed)``.  A usage error of the commands' functions is an
    ArgumentError naming the ``command``."""
    from . import interruption

    interruption.current_phase = None  # the phases of this call only
    interruption.current_stats.clear()
    deadline = None if seconds is None else started + seconds
    try:
        with interruption.time_limit(deadline, seconds, "timeout"):
            return body()
    except interruption.TimeLimit as e:
        return unknown(e.reason(), round(time.monotonic() - started, 3))
    except UsageError as e:
        raise ArgumentError(command, str(e)) from None


def _unknown(command: str):
    def answer(reason: str, time_s: float) -> Result:
        return Result(command, "unknown", None, reason, None, None, {}, {}, time_s)

    return answer


def _vacuous(command: str, about: dict, started: float) -> Result:
    from .prove.about import about_json

    return Result(
        command,
        "vacuous",
        "kernel-checked",
        "the domain is empty",
        None,
        None,
        {},
        about_json(about)["sha256"],
        round(time.monotonic() - started, 3),
        summary="every claim about it holds and says nothing",
    )


def _json_writer(document: Callable[[], dict], inputs: list[tuple[str, str | None]]):
    """A certificate writer: ``document()`` written compactly (as ``--cert`` does) to a path
    that names none of the files read (``inputs``)."""

    def write(path: str) -> None:
        from .io import write_json_atomic
        from .io.models import check_outputs

        check_outputs([("path", path)], inputs)
        write_json_atomic(path, document(), compact=True)

    return write


def _plural(n, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


# ------------------------------------------------------------------------------- reading


def load(path: str | os.PathLike[str]) -> Model:
    """The model of a file: an exactmax/maxout or exactmax/transformer JSON file, or an ONNX
    file read as the exact Maxout network it denotes (the reader of every command,
    ``io.load_model``)."""
    from .io import load_model

    return load_model(_path("path", path))


def import_onnx(
    path: str | os.PathLike[str],
    drop_final_softmax: bool = False,
    domain=None,
    *,
    box: str | None = None,
    report: bool = False,
):
    """The exact Maxout network of an ONNX file (``exactmax import``: every weight the dyadic
    rational it denotes, every piecewise-linear operator lowered to Maxout units), with
    ``domain`` / ``box`` recorded as its domain when given.  ``report=True``: the pair
    (network, report), the report being the dict ``exactmax import --json`` prints (layers,
    operators read, denominators, pass-through units, rounded BatchNormalization scales)."""
    import dataclasses

    from .io.onnxfile import import_onnx as read_onnx

    net, rep = read_onnx(_path("path", path), bool(drop_final_softmax))
    dom, _ = _domain(domain, box, net.input_dim)
    net = net if dom is None else dataclasses.replace(net, domain=dom)
    return (net, rep.as_json(net)) if report else net


# ------------------------------------------------------------------------ verify, equiv


def verify(
    net,
    transformer=None,
    domain=None,
    timeout: float = 60,
    *,
    box: str | None = None,
    max_leaves: int = 20000,
    strategy: str = "auto",
    certificate_kind: str = "auto",
    search: bool = True,
) -> Result:
    """``exactmax verify``: the Transformer (``transformer``; by default ``net`` compiled on
    the domain) equals the Maxout network ``net`` at every point of the domain (``domain`` /
    ``box``, else the network's own).  Verdict proved (trust "kernel-checked", or
    "solver-only": z3 alone), refuted (an exact counterexample the kernel evaluated), unknown
    (the reason) or vacuous (the domain is empty)."""
    from .prove.command import compiled_to_verify, network_to_verify

    started = time.monotonic()
    seconds = _seconds("timeout", timeout)
    options = _equality_options(max_leaves, strategy, certificate_kind)

    def body() -> Result:
        a, a_name, a_path = _model("net", net)
        network_to_verify(a, a_name)
        dom, dom_name = _domain(domain, box, a.input_dim)
        if transformer is None:
            assert isinstance(a, MaxoutNetwork)
            dom = dom if dom is not None else a.domain
            b: Model = compiled_to_verify(a, dom, a_name, dom_name)
            names, b_path = (a_name, "its compiled Transformer"), None
        else:
            b, b_name, b_path = _model("transformer", transformer)
            names = (a_name, b_name)
        inputs = [("net", a_path), ("transformer", b_path)]
        return _equal("verify", a, b, dom, names, inputs, seconds, started, search, options)

    return _within("verify", seconds, started, body, _unknown("verify"))


def _equality_options(max_leaves, strategy, certificate_kind) -> dict:
    from .prove.command import CERTIFICATE_KINDS

    return {
        "max_leaves": _count("max_leaves", max_leaves),
        "strategy": _choice("strategy", strategy, ("auto", "layerwise", "monolithic")),
        "certificate_kind": _choice("certificate_kind", certificate_kind, CERTIFICATE_KINDS),
    }


def _no_domain(dom, a, b) -> Domain:
    dom = dom if dom is not None else (a.domain or b.domain)
    if dom is None:
        raise ArgumentError(
            "domain",
            "none given and the models have none: pass domain= (a file, a Box or a "
            'Polyhedron) or box="lo,hi;..."',
        )
    return dom


def _equal(command, a, b, dom, names, inputs, seconds, started, search, options) -> Result:
    """verify / equiv of two loaded models (``decide_equal``), as a Result."""
    from .prove.command import decide_equal, equality_certificate, equality_json

    dom = _no_domain(dom, a, b)
    v, about, facts = decide_equal(
        a, b, dom, names, timeout=seconds, search=bool(search), started=started, **options
    )
    if v is None:
        return _vacuous(command, about, started)
    out = equality_json(v, about, names, None, None)
    proved = v.verdict == "proved" and v.trust == "kernel-checked"
    cex, summary = None, ""
    if v.verdict == "refuted":
        assert v.x is not None and v.outputs is not None
        outputs = {n: _fractions(y) for n, y in zip(names, v.outputs)}
        cex = Counterexample(_fractions(v.x), outputs, {"found_by": v.stats.get("strategy")})
        if v.stats.get("differs_in_layer"):
            summary = f"where layer {v.stats['differs_in_layer']} differs"
    elif proved and v.stats.get("certificate_kind") == "correspondence":
        summary = f"a layer correspondence of {_plural(v.stats.get('leaves_checked'), 'unit')}"
    elif proved:
        summary = _plural(v.stats.get("leaves_checked"), "cell")
    writer = None
    if proved:
        writer = _json_writer(lambda: equality_certificate(a, b, dom, v, facts), inputs)
    return Result(
        command,
        out["verdict"],
        out["trust"],
        out["reason"],
        cex,
        v.certificate if proved else None,
        out["stats"],
        out["sha256"],
        out["time_s"],
        out["certificate_kind"],
        summary,
        writer,
    )


def equiv(
    a,
    b,
    domain=None,
    epsilon=None,
    top1: bool = False,
    timeout: float = 60,
    *,
    box: str | None = None,
    max_leaves: int = 20000,
    strategy: str = "auto",
    certificate_kind: str = "auto",
    search: bool = True,
    workers: int | None = 1,
    scheduler: str | None = None,
    split_depth: int = 0,
    unit_cells: int | None = None,
) -> Result:
    """``exactmax equiv``: two models (Maxout or Transformer, paths or loaded) equal on the
    domain (``domain`` / ``box``, else the first model's, else the second's); with ``epsilon``
    (exact: an int, a Fraction or a text such as "1/100"), |A(x) - B(x)|_inf <= epsilon; with
    ``top1``, the same arg max sets.  The tolerance forms run their work units on ``workers``
    processes (1: in this process; None: every core) or a Dask ``scheduler``."""
    started = time.monotonic()
    seconds = _seconds("timeout", timeout)
    tolerant = epsilon is not None or bool(top1)
    options = _equality_options(max_leaves, strategy, certificate_kind)
    if tolerant:
        if epsilon is not None and top1:
            raise ArgumentError("epsilon", "epsilon and top1 ask different questions; give one")
        if strategy != "auto":
            raise ArgumentError("strategy", "is for equality (no epsilon, no top1)")
        eps = None if epsilon is None else _exact("epsilon", epsilon)
        parallel = _parallel(workers, scheduler, split_depth, unit_cells)
    elif (workers, scheduler, split_depth, unit_cells) != (1, None, 0, None):
        raise ArgumentError(
            "workers",
            "workers, scheduler, split_depth and unit_cells go with epsilon or top1 "
            "(equality is decided in this process)",
        )

    def body() -> Result:
        ma, a_name, a_path = _model("a", a)
        mb, b_name, b_path = _model("b", b)
        dom, _ = _domain(domain, box, ma.input_dim)
        names = (a_name, b_name)
        inputs = [("a", a_path), ("b", b_path)]
        if tolerant:
            return _tolerance(
                ma, mb, dom, eps, names, inputs, seconds, started, search, options, parallel
            )
        return _equal("equiv", ma, mb, dom, names, inputs, seconds, started, search, options)

    return _within("equiv", seconds, started, body, _unknown("equiv"))


def _parallel(workers, scheduler, split_depth, unit_cells) -> SimpleNamespace:
    """The work units' executor, as ``engine.parallel.workers_of`` reads it."""
    if scheduler is not None and not isinstance(scheduler, str):
        raise ArgumentError("scheduler", f"expected an address tcp://HOST:PORT, got {scheduler!r}")
    return SimpleNamespace(
        workers=_count_or_none("workers", workers),
        scheduler=scheduler,
        split_depth=_count("split_depth", split_depth, least=0),
        unit_cells=_count_or_none("unit_cells", unit_cells),
    )


def _tolerance(a, b, dom, eps, names, inputs, seconds, started, search, options, parallel):
    """equiv with epsilon / top1 of two loaded models (``decide_tolerance``), as a Result."""
    from .prove.tolerance_command import (
        decide_tolerance,
        tolerance,
        tolerance_certificate,
        tolerance_json,
    )
    from .prove.verify import Verdict

    epsilon = tolerance(None if eps is None else q_str(eps), eps is None)
    dom = _no_domain(dom, a, b)
    v, about, _ = decide_tolerance(
        a,
        b,
        dom,
        epsilon,
        names,
        timeout=seconds,
        parallel=parallel,
        max_leaves=options["max_leaves"],
        search=bool(search),
        started=started,
    )
    if v is None:
        return _vacuous("equiv", about, started)
    out = tolerance_json(v, about, epsilon, names, None, None, round(time.monotonic() - started, 3))
    everywhere = isinstance(v, Verdict)
    proved = out["verdict"] == "proved"
    cex, summary = None, ""
    if everywhere:
        summary = (
            f"A = B everywhere: a layer correspondence of {_plural(out['stats']['units'], 'unit')}"
        )
    elif proved:
        summary = _plural(v.stats.get("leaves_checked"), "cell")
    elif v.verdict == "refuted":
        outputs = {n: _fractions(y) for n, y in zip(names, v.outputs)}
        details: dict[str, Any] = {"found_by": v.stats.get("found_by")}
        if epsilon is None:
            details["argmax"] = {n: tuple(s) for n, s in zip(names, v.argmax)}
            details["ties"] = any(len(s) > 1 for s in v.argmax)
            summary = "arg max " + " vs ".join("{" + ", ".join(map(str, s)) + "}" for s in v.argmax)
        else:
            details["gap"], details["output"] = _fractions([v.gap])[0], v.output
            summary = f"gap {_number(v.gap)} > {_number(epsilon)} in output {v.output}"
        cex = Counterexample(_fractions(v.x), outputs, details)
    writer = None
    if proved:
        writer = _json_writer(lambda: tolerance_certificate(a, b, dom, epsilon, v), inputs)
    return Result(
        "equiv",
        out["verdict"],
        out["trust"],
        out["reason"],
        cex,
        (v.certificate if everywhere else v.tree) if proved else None,
        out["stats"],
        out["sha256"],
        out["time_s"],
        out["certificate_kind"],
        summary,
        writer,
    )


# --------------------------------------------------------------------------------- check


def check(
    net,
    prop,
    timeout: float = 60,
    workers: int | None = 1,
    *,
    max_leaves: int = 20000,
    search: bool = True,
    relax: bool = True,
    scheduler: str | None = None,
    split_depth: int = 0,
    unit_cells: int | None = None,
) -> Result:
    """``exactmax check``: a VNN-LIB property (1.0 or 2.0; a path, or a property read by
    ``io.vnnlib2.read_property``) of a Maxout or ReLU network (a path, .onnx or .json, or
    loaded).  Verdict sat (an exact counterexample in the input set, f(x) evaluated by the
    kernel), unsat (a certificate the kernel checked; writing it needs the network and the
    property as paths, which it records), or unknown (the reason).  The work units run on
    ``workers`` processes (1, the default: in this process; None: every core) or a Dask
    ``scheduler``; ``relax=False``: no relaxed leaves (a certificate export-coq takes)."""
    from .io.vnnlib import VnnProperty
    from .prove.property_command import (
        check_json,
        decide_check,
        network_of_property,
        property_certificate,
        property_hashes,
        property_matched,
    )

    started = time.monotonic()
    seconds = _seconds("timeout", timeout)
    leaves = _count("max_leaves", max_leaves)
    parallel = _parallel(workers, scheduler, split_depth, unit_cells)

    def body() -> Result:
        from .interruption import phase
        from .io.vnnlib2 import read_property

        model, name, model_path = _model("net", net)
        network_of_property(model, name)
        if isinstance(prop, VnnProperty):
            p, prop_name, prop_path = prop, "prop", None
        else:
            prop_path = prop_name = _path("prop", prop)
            with phase(f"reading the property {prop_path}"):
                p = read_property(prop_path)
        property_matched(model, p, prop_name)
        sha = property_hashes(model, model_path, p)
        a, timed_out = decide_check(
            model,
            p,
            timeout=seconds,
            parallel=parallel,
            max_leaves=leaves,
            search=bool(search),
            relaxed=bool(relax),
            started=started,
        )
        out = check_json(a, sha, round(time.monotonic() - started, 3), timed_out)
        cex, summary, writer = None, "", None
        if a.result == "sat":
            details = {
                "case": a.where[0],
                "conjunction": a.where[1],
                "margin": _fractions([a.margin])[0],
                "found_by": a.stats.get("found_by"),
            }
            cex = Counterexample(_fractions(a.x), {"y": _fractions(a.y)}, details)
            summary = _point("y", a.y) + f", margin {_number(a.margin)}"
        elif a.result == "unsat":
            summary = _plural(a.stats.get("leaves_checked"), "cell")
            writer = _property_writer(model, model_path, prop_path, a, property_certificate)
        return Result(
            "check",
            out["verdict"],
            out["trust"],
            out["reason"],
            cex,
            a.trees if a.result == "unsat" else None,
            out["stats"],
            out["sha256"],
            out["time_s"],
            None,
            summary,
            writer,
        )

    return _within("check", seconds, started, body, _unknown("check"))


def _property_writer(net, model_path, prop_path, answer, document):
    """The writer of check's certificate, which records the network's file and the
    property's text: both must have been given as paths."""

    def write(path: str) -> None:
        from .io.models import check_outputs
        from .io.property_certificate import write_property_certificate

        if model_path is None or prop_path is None:
            raise ArgumentError(
                "write_certificate",
                "a property certificate records the network's file and the property's "
                "text: give check() the network and the property as paths",
            )
        check_outputs([("path", path)], [("net", model_path), ("prop", prop_path)])
        write_property_certificate(path, document(net, model_path, prop_path, answer))

    return write


# ------------------------------------------------------------------------ compile, regions


def compile(
    net,
    domain=None,
    *,
    box: str | None = None,
    merged: bool = False,
    positional: str = "onehot",
    bounds: str = "auto",
    slack=0,
    timeout: float | None = None,
) -> Compilation:
    """``exactmax compile``: the hardmax Transformer of the Maxout network ``net`` on the
    domain (``domain`` / ``box``, else the network's own; bounded and non-empty), gate
    constants from sound exact bounds over it, and its size.  ``merged``: 2D + 1 sub-layers;
    ``positional`` "onehot" or "scalar"; ``bounds`` "auto", "interval" or "lp"; ``slack``
    S >= 0 (exact): C_l = max(1, ceil((1 + S) * bound)).  ``timeout`` seconds (None: no
    limit): past it, ``TimeoutError`` (a compilation has no "unknown")."""
    started = time.monotonic()
    seconds = None if timeout is None else _seconds("timeout", timeout)
    from .construct.command import (
        compile_checked,
        compile_report,
        domain_to_compile,
        network_to_compile,
    )
    from .construct.transformer import CompileOptions

    positional = _choice("positional", positional, ("onehot", "scalar"))
    bounds = _choice("bounds", bounds, ("auto", "interval", "lp"))
    s = _exact("slack", slack)
    model, name, _ = _model("net", net)
    network_to_compile(model, name)
    assert isinstance(model, MaxoutNetwork)
    dom, dom_name = _domain(domain, box, model.input_dim)
    dom = domain_to_compile(dom if dom is not None else model.domain, name)
    opts = CompileOptions(merged=bool(merged), positional=positional, bounds=bounds, slack=s)

    def body() -> Compilation:
        c = compile_checked(model, dom, opts, name, dom_name)
        size = compile_report(model, c, None)
        size.pop("output")
        return Compilation(c.transformer, size, _fractions(c.gates), c.bounds_method)

    def too_long(reason: str, time_s: float) -> Compilation:
        raise TimeoutError(f"compile: {reason} ({time_s} s)")

    return _within("compile", seconds, started, body, too_long)


def regions(
    net,
    domain=None,
    *,
    box: str | None = None,
    timeout: float | None = None,
    max_cells: int = 200000,
    all_units: bool = False,
) -> Regions:
    """``exactmax regions``: the exact numbers of activation regions and linear regions of a
    Maxout network or hardmax Transformer on a bounded, full-dimensional domain (``domain`` /
    ``box``, else the model's own), the cells, maps and merges checked by the kernel; unknown
    past ``max_cells`` cells or ``timeout`` seconds.  ``all_units``: patterns over every unit
    (default: the units the outputs depend on)."""
    from .regions.certfile import certificate_to_json
    from .regions.command import (
        count_checked,
        counted_json,
        region_counts,
        region_domain,
        unknown_json,
    )

    started = time.monotonic()
    seconds = None if timeout is None else _seconds("timeout", timeout)
    cells = _count("max_cells", max_cells)

    def unknown(reason: str, time_s: float, sha: dict | None = None) -> Regions:
        return Regions(
            "unknown",
            None,
            reason,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            {},
            sha or {},
            time_s,
        )

    def body() -> Regions:
        model, name, path = _model("net", net)
        dom, dom_name = _domain(domain, box, model.input_dim)
        where = dom_name or name
        dom = region_domain(model, dom if dom is not None else model.domain, name, where)
        rc = count_checked(
            model, dom, name, where, max_cells=cells, timeout=seconds, all_units=bool(all_units)
        )
        if isinstance(rc, str):
            out = unknown_json(model, name, rc)
            return unknown(rc, round(time.monotonic() - started, 3), out["sha256"])
        out = counted_json(model, name, rc, bool(all_units))
        counts = region_counts(rc)

        def document() -> dict:
            return certificate_to_json(model, dom, rc.certificate, counts, bool(all_units))

        return Regions(
            out["verdict"],
            out["trust"],
            None,
            rc.activation_regions,
            rc.linear_regions,
            len(rc.cells),
            rc.distinct_maps,
            rc.merge_components,
            out["linear_certified"],
            rc,
            rc.certificate,
            out["stats"],
            out["sha256"],
            out["time_s"],
            _json_writer(document, [("net", path), ("domain", dom_name if box is None else None)]),
        )

    return _within("regions", seconds, started, body, unknown)
