"""The VNN-LIB 2.0 verifier interface: ``exactmax vnnlib verify`` and ``exactmax vnnlib
supports`` (the standard's solver command-line interface, with ``exactmax vnnlib`` as the
solver's executable).

``verify QUERY --network NAME=FILE ... [--timeout N] [--serialise-assignments DIR]`` prints
one of ``sat``, ``unsat``, ``unknown``, ``timed-out`` as the first line of stdout; after
``sat`` the assignment: for every declared tensor in declaration order (per network: its
input, then its output) a line ``NAME TYPE [d_0,...,d_k]``, then one value a line in
row-major order.  Every answer is exact:

- one network: ``prove.property.decide_property`` (sat: a point x of the input set with
  (x, f(x)) satisfying a disjunct, f evaluated by the kernel; unsat: split-tree
  certificates the kernel accepted);
- two networks (``io.vnnlib2.Equivalence``): ``prove.verify.verify_equal`` on each input
  set (sat: a point where the kernel evaluated a(x) != b(x); unsat: a(x) = b(x) on every
  set, certificates the kernel accepted; a proof by z3 alone is reported as unknown).

Values print as exact decimals when their denominators have no prime but 2 and 5 (a
counterexample with another denominator is first replaced, if one exists, by a decimal
point nearby that the kernel confirms), otherwise as "p/q"; each parses exactly with
Python's ``fractions.Fraction``.  With ``--serialise-assignments DIR`` the assignment is
written instead as DIR/NAME.pb, one ONNX TensorProto of element type DOUBLE per tensor
(float64 rounds a value that is not a dyadic rational of 53 bits; stderr says when).

Exit status: 0 for every answer (the standard defines none; the answer is the first line),
2 for a bad query, a bad model or command line, with one line on stderr and nothing on
stdout.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass

from ..exits import EXIT_OK, UsageError
from ..io import InputError, load_model
from ..io.onnxfile import OPSETS, SUPPORTED
from ..io.property_certificate import decimal_text
from ..io.vnnlib2 import Query, Tensor, read_query
from ..kernel.maxout import MaxoutNetwork
from ..kernel.rational import Q

NAME = "exactmax"
VNNLIB_VERSIONS = ("2.0", "2.0")

CAPABILITIES: dict[str, tuple[str, ...] | bool] = {
    "--onnx-opset-versions": (str(OPSETS[0]), str(OPSETS[1])),
    "--onnx-element-types": ("real",),
    "--onnx-operators": tuple(op for op in SUPPORTED if " " not in op),
    "--vnnlib-versions": VNNLIB_VERSIONS,
    "--hidden-node-theories": ("NH",),
    "--multiple-input-output-theories": ("SIO",),
    "--multiple-network-theories": ("SNET", "MENET", "MINET"),
    "--multiple-node-comparison-theories": ("SNC", "MNC"),
    "--arithmetic-complexity-theories": ("BND", "OUTC", "LIN"),
    "--optimised-disjunctive-reasoning": False,
    "--serialise-assignments": True,
    "--unsat-proofs": False,
}
"""The answers of ``supports``: what exactmax reads and decides exactly.  Element type
``real`` only: the analysis is over the reals, so no float type is claimed soundly;
operators are those of the ONNX import (``io/onnxfile.py``) but the final Softmax, which
needs --drop-final-softmax; multi-network queries of the equivalence shape only."""

ALIASES = {"--multiple-inputs-output-theories": "--multiple-input-output-theories"}


def supports(capability: str) -> str:
    """The stdout text answering one capability (lines ending in a newline)."""
    answer = CAPABILITIES[ALIASES.get(capability, capability)]
    if isinstance(answer, bool):
        return "true\n" if answer else "false\n"
    return "".join(f"{v}\n" for v in answer)


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer, the assignment of a sat answer (tensor, values) in declaration order,
    and the reason of an unknown one."""

    result: str  # "sat", "unsat", "unknown" or "timed-out"
    assignment: tuple[tuple[Tensor, tuple[Q, ...]], ...] = ()
    reason: str | None = None


# ------------------------------------------------------------------------- the models


def network_files(query: Query, given: list[str]) -> dict[str, str]:
    """NAME -> FILE for every declared network: one --network for each network not
    declared equal-to another (the standard's rule), which takes the other's file."""
    files: dict[str, str] = {}
    names = {n.name: n for n in query.networks}
    for item in given:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--network: expected NAME=FILE, got {item!r}")
        if name not in names:
            raise UsageError(
                f"--network {name}: the query declares no network {name} (it declares "
                + ", ".join(names)
                + ")"
            )
        if name in files:
            raise UsageError(f"--network {name}: given twice")
        if names[name].equal_to:
            raise UsageError(
                f"--network {name}: {name} is declared (equal-to {names[name].equal_to}), so "
                f"it is that network's model; give no file for it"
            )
        files[name] = path
    for n in query.networks:
        if n.equal_to is None and n.name not in files:
            raise UsageError(f"no model for network {n.name}: add --network {n.name}=FILE.onnx")
    for n in query.networks:
        if n.equal_to is not None:
            files[n.name] = files[n.equal_to]
    return files


def load_networks(query: Query, files: dict[str, str]) -> list[MaxoutNetwork]:
    """The Maxout network of each declared network, its dimensions checked against the
    declared tensors' sizes."""
    cache: dict[str, MaxoutNetwork] = {}
    out = []
    for n in query.networks:
        path = files[n.name]
        if path not in cache:
            net = load_model(path)
            if not isinstance(net, MaxoutNetwork):
                raise InputError(
                    path,
                    "format",
                    "expected a Maxout or ReLU network (an .onnx file or an exactmax/maxout "
                    "one), got a Transformer",
                )
            cache[path] = net
        net = cache[path]
        if (n.input.size, n.output.size) != (net.input_dim, net.out_dim):
            raise InputError(
                path,
                "",
                f"network {n.name} is declared with an input of {n.input.size} and an output "
                f"of {n.output.size} elements, but the model has {net.input_dim} inputs and "
                f"{net.out_dim} outputs",
            )
        out.append(net)
    return out


# ---------------------------------------------------------------------------- decide


def decide(query: Query, nets: list[MaxoutNetwork], timeout_s: float) -> Outcome:
    """The answer to the query for the loaded networks within ``timeout_s`` seconds."""
    start = time.monotonic()
    if query.property is not None:
        return _decide_property(query, nets[0], timeout_s, start)
    return _decide_equivalence(query, nets, timeout_s, start)


def _late(start: float, timeout_s: float) -> bool:
    return time.monotonic() - start >= 0.95 * timeout_s


def _decide_property(query: Query, net: MaxoutNetwork, timeout_s: float, start: float) -> Outcome:
    from ..engine.casetree import violation
    from .property import decide_property

    prop = query.property
    assert prop is not None
    a = decide_property(net, prop, timeout_s)
    if a.result == "unsat":
        return Outcome("unsat")
    if a.result == "sat":
        assert a.x is not None

        def still(x):
            return violation(net, prop.cases, x)[0] is not None

        x = decimal_nearby(a.x, still)
        y = violation(net, prop.cases, x)[2]  # f(x), evaluated by the kernel
        (decl,) = query.networks
        return Outcome("sat", ((decl.input, tuple(x)), (decl.output, tuple(y))))
    timed = _late(start, timeout_s) or "time limit" in (a.reason or "")
    return Outcome("timed-out" if timed else "unknown", reason=a.reason)


def _decide_equivalence(
    query: Query, nets: list[MaxoutNetwork], timeout_s: float, start: float
) -> Outcome:
    from .verify import VerifyOptions, evaluate, refute, verify_equal

    eq = query.equivalence
    assert eq is not None
    a, b = nets[eq.a], nets[eq.b]
    why = None
    for k, dom in enumerate(eq.domains):
        left = timeout_s - (time.monotonic() - start)
        if left <= 0:
            return Outcome("timed-out", reason="the time limit was reached")
        v = verify_equal(a, b, dom, VerifyOptions(timeout_s=left))
        if v.verdict == "refuted":
            assert v.x is not None

            def still(x, dom=dom):
                return refute(a, b, dom, x) is not None

            x = decimal_nearby(v.x, still)
            ya, yb = evaluate(a, x), evaluate(b, x)
            da, db = query.networks[eq.a], query.networks[eq.b]
            return Outcome(
                "sat",
                _in_declaration_order(query, {da.name: (x, ya), db.name: (x, yb)}),
            )
        if v.verdict == "proved" and v.trust == "kernel-checked":
            continue
        why = f"input set {k}: " + (
            v.reason or "proved by z3 alone, without a certificate the kernel checked"
        )
        if "timeout" in (v.reason or "") or _late(start, timeout_s):
            return Outcome("timed-out", reason=why)
        return Outcome("unknown", reason=why)
    return Outcome("unsat")


def _in_declaration_order(query: Query, values: dict) -> tuple:
    out = []
    for n in query.networks:
        x, y = values[n.name]
        out += [(n.input, tuple(x)), (n.output, tuple(y))]
    return tuple(out)


def is_decimal(v: Q) -> bool:
    q = int(v.q)
    q >>= (q & -q).bit_length() - 1
    while q % 5 == 0:
        q //= 5
    return q == 1


def decimal_nearby(x, accept, digits=(3, 6, 9, 12, 17, 25, 40)):
    """x itself if every coordinate is a decimal, else the first rounding of x to k decimal
    places (k in ``digits``) that ``accept`` (an exact check by the kernel) still takes,
    else x."""
    if all(is_decimal(v) for v in x):
        return tuple(x)
    for k in digits:
        scale = 10**k
        r = tuple(
            Q((2 * int(v.p) * scale + int(v.q)) // (2 * int(v.q)), scale) for v in x
        )  # to nearest
        if accept(r):
            return r
    return tuple(x)


def value_text(v: Q) -> str:
    """The exact value: a decimal when it has one, else "p/q"."""
    return decimal_text(v) if is_decimal(v) else f"{int(v.p)}/{int(v.q)}"


def assignment_text(outcome: Outcome) -> str:
    lines = []
    for tensor, values in outcome.assignment:
        dims = ",".join(str(s) for s in tensor.shape)
        lines.append(f"{tensor.name} {tensor.dtype} [{dims}]")
        lines += [value_text(v) for v in values]
    return "".join(line + "\n" for line in lines)


def _float(v) -> float:
    """The nearest float64, or an infinity beyond its range (float() would raise)."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def serialise(outcome: Outcome, folder: str) -> int:
    """DIR/NAME.pb for every tensor (ONNX TensorProto, DOUBLE, the declared shape);
    returns how many values float64 rounded."""
    import numpy as np
    from onnx import numpy_helper

    from ..io.models import write_bytes_atomic

    os.makedirs(folder, exist_ok=True)
    rounded = 0
    for tensor, values in outcome.assignment:
        floats = [_float(v) for v in values]
        rounded += sum(
            1
            for f, v in zip(floats, values)
            if not math.isfinite(f) or Q(*f.as_integer_ratio()) != v
        )
        arr = np.array(floats, dtype=np.float64).reshape(tensor.shape)
        data = numpy_helper.from_array(arr, tensor.name).SerializeToString()
        write_bytes_atomic(os.path.join(folder, f"{tensor.name}.pb"), data)
    return rounded


# ---------------------------------------------------------------------------- commands


def _timeout(text: str | None) -> float:
    if text is None:
        return math.inf
    try:
        t = float(text)
    except ValueError:
        raise UsageError(f"--timeout: expected a number of seconds, got {text!r}") from None
    if not t > 0 or not math.isfinite(t):
        raise UsageError(f"--timeout: expected a positive number of seconds, got {text}")
    return t


def run_verify(args) -> int:
    """``exactmax vnnlib verify``: the answer's line, then the assignment of a sat one."""
    timeout_s = _timeout(args.timeout)
    if (
        args.serialise_assignments
        and os.path.exists(args.serialise_assignments)
        and not (os.path.isdir(args.serialise_assignments))
    ):
        raise UsageError(
            f"--serialise-assignments {args.serialise_assignments}: exists and is not a folder"
        )
    query = read_query(args.query)
    nets = load_networks(query, network_files(query, args.network or []))
    outcome = decide(query, nets, timeout_s if math.isfinite(timeout_s) else 1e9)
    if outcome.result == "sat" and args.serialise_assignments:
        rounded = serialise(outcome, args.serialise_assignments)
        print("sat")
        if rounded:
            print(
                f"exactmax: note: {rounded} values of the assignment are not float64 numbers "
                "and were rounded in the .pb files",
                file=sys.stderr,
            )
        return EXIT_OK
    print(outcome.result)
    if outcome.result == "sat":
        sys.stdout.write(assignment_text(outcome))
    elif outcome.reason:
        print(f"exactmax: {outcome.result}: {outcome.reason}", file=sys.stderr)
    return EXIT_OK


def run_supports(args) -> int:
    """``exactmax vnnlib supports --CAPABILITY``."""
    asked = [c for c in CAPABILITIES if getattr(args, _dest(c), False)]
    asked += [c for c in ALIASES if getattr(args, _dest(c), False)]
    if len(asked) != 1:
        raise UsageError("supports: expected one capability: " + ", ".join(CAPABILITIES))
    sys.stdout.write(supports(asked[0]))
    return EXIT_OK


def _dest(flag: str) -> str:
    return "cap_" + flag[2:].replace("-", "_")


def add_parser(sub) -> None:
    """``exactmax vnnlib`` with its commands verify and supports, and --name / --version."""
    from .. import __version__

    v = sub.add_parser(
        "vnnlib",
        help="the VNN-LIB 2.0 solver interface (verify, supports)",
        description="The VNN-LIB 2.0 standard's solver command-line interface, with "
        "'exactmax vnnlib' as the solver: 'verify QUERY --network NAME=FILE' prints sat, "
        "unsat, unknown or timed-out as its first line (sat: then the exact assignment); "
        "'supports --CAPABILITY' answers what exactmax reads (element type real only: the "
        "analysis is exact over the reals).",
    )
    v.add_argument("--name", action="store_true", help="print the solver's name")
    v.add_argument("--version", action="version", version=__version__)
    cmds = v.add_subparsers(dest="vnnlib_command", metavar="COMMAND")
    ver = cmds.add_parser(
        "verify",
        help="decide a VNN-LIB 2.0 query",
        description="Decide a VNN-LIB 2.0 query exactly: one network (input and output "
        "constraints, with and/or), or two of which one is declared equal-to or "
        "isomorphic-to the other and asked to differ somewhere (equivalence). First line "
        "of stdout: sat, unsat, unknown or timed-out; after sat the assignment, one line "
        "'NAME TYPE [dims]' per declared tensor, then its values (exact), row-major. Exit "
        "status 0 for every answer, 2 for an error (one line on stderr).",
    )
    ver.add_argument("query", metavar="QUERY.vnnlib")
    ver.add_argument(
        "--network",
        action="append",
        metavar="NAME=FILE",
        help="the model (.onnx or exactmax/maxout JSON) of a declared network; once per "
        "network not declared equal-to another",
    )
    ver.add_argument(
        "--timeout", metavar="N", help="seconds before answering timed-out (default: none)"
    )
    ver.add_argument(
        "--serialise-assignments",
        metavar="DIR",
        help="write a sat assignment as DIR/NAME.pb (ONNX TensorProto, float64) instead of "
        "on stdout",
    )
    sup = cmds.add_parser(
        "supports",
        help="what exactmax supports, per the standard's capabilities",
        description="Answer one capability of the VNN-LIB 2.0 standard.",
    )
    group = sup.add_mutually_exclusive_group(required=True)
    for flag in list(CAPABILITIES) + list(ALIASES):
        group.add_argument(
            flag,
            dest=_dest(flag),
            action="store_true",
            help="alias of " + ALIASES[flag] if flag in ALIASES else None,
        )
    v.set_defaults(run=run_vnnlib)
    # --timeout a hard limit (cli.py, supervisor.py), answered in the interface's words
    ver.set_defaults(whole_timeout=True, timeout_answer=_timed_out)


def _timed_out(reason: str) -> int:
    """The answer of a verify stopped by its time limit in any phase (reading the networks,
    the proof, writing the assignment): timed-out, with the reason on stderr."""
    print("timed-out")
    print(f"exactmax: timed-out: {reason}", file=sys.stderr)
    return EXIT_OK


def run_vnnlib(args) -> int:
    """``exactmax vnnlib [--name] COMMAND ...``."""
    if args.vnnlib_command == "verify":
        return run_verify(args)
    if args.vnnlib_command == "supports":
        return run_supports(args)
    if args.name:
        print(NAME)
        return EXIT_OK
    raise UsageError(
        "vnnlib: expected a command: verify QUERY --network NAME=FILE ..., "
        "supports --CAPABILITY, or the option --name or --version"
    )
