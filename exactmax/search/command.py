"""``exactmax search``: look for a point where two models differ (hypothesis strategies;
every point evaluated by the kernel)."""

from __future__ import annotations

from typing import Any

from .. import jsonout
from ..exits import EXIT_REFUTED, EXIT_UNKNOWN, UsageError
from ..io import InputError, load_model
from ..io.models import model_domain
from ..io.numbers import approx_point, difference_lines, q_str, quote
from ..kernel.polyhedron import Box
from ..kernel.transformer import HARDMAX, Attention


def _positive_int(text: str, option: str, minimum: int) -> int:
    try:
        n = int(text, 10)
    except ValueError:
        raise UsageError(f"{option}: expected an integer >= {minimum}, got {quote(text)}") from None
    if n < minimum:
        raise UsageError(f"{option}: expected an integer >= {minimum}, got {n}")
    return n


def run(args) -> int:
    """``search A B``: an exact point of the domain where A and B differ (exit 1), or none
    found (exit 3: a search proves nothing)."""
    from . import SearchOptions, find_counterexample

    max_examples = _positive_int(args.max_examples, "--max-examples", 1)
    seed = None if args.seed is None else _positive_int(args.seed, "--seed", 0)
    a, b = load_model(args.a), load_model(args.b)
    names = (args.a, args.b)
    if a.input_dim != b.input_dim:
        raise UsageError(
            f"{names[0]} has input dimension {a.input_dim} but {names[1]} has {b.input_dim}"
        )
    if a.out_dim != b.out_dim:
        raise UsageError(
            f"{names[0]} has output dimension {a.out_dim} but {names[1]} has {b.out_dim}"
        )
    dom = model_domain(a, args.domain) if args.domain else (a.domain or b.domain)
    if dom is None:
        raise UsageError("no domain: give one with --domain FILE or in the first model")
    if dom.dim != a.input_dim:
        raise UsageError(f"the domain has dimension {dom.dim}, the models {a.input_dim}")
    for model, name in zip((a, b), names):
        bad = [
            i
            for i, s in enumerate(getattr(model, "sublayers", ()))
            if isinstance(s, Attention) and s.kind != HARDMAX
        ]
        if bad:
            raise InputError(
                name,
                f"sublayers[{bad[0]}]",
                "softmax attention has no exact "
                "value; search compares Maxout networks and hardmax Transformers",
            )
    from ..engine.lp import analyze_domain

    if dom.is_empty() if isinstance(dom, Box) else analyze_domain(dom).empty:
        raise UsageError("the domain is empty: there is no point to search; give a non-empty one")
    r = find_counterexample(a, b, dom, SearchOptions(max_examples=max_examples, seed=seed))
    from ..prove.about import pair_hashes

    out: dict[str, Any] = {
        "verdict": "refuted" if r.found else "unknown",
        "trust": None,  # a point found is the evidence, not a proof
        "reason": None
        if r.found
        else f"none found in {r.tried} tries; a search proves nothing (exactmax equiv decides)",
        "sha256": pair_hashes(a, b, dom) if args.json else {},  # printed with --json only
        "found": r.found,
        "x": None,
        "outputs": None,
        "tried": r.tried,
        "phase": r.phase,
        "max_examples": max_examples,
        "seed": seed,
        "time_s": round(r.time_s, 3),
        "stats": r.stats,
    }
    if r.found:
        assert r.x is not None and r.outputs is not None  # a point found comes with them
        out["x"] = [q_str(t) for t in r.x]
        out["outputs"] = {
            names[0]: [q_str(t) for t in r.outputs[0]],
            names[1]: [q_str(t) for t in r.outputs[1]],
        }
        out["x_approx"] = approx_point(r.x)
        out["outputs_approx"] = {n: approx_point(y) for n, y in zip(names, r.outputs)}
    if args.json:
        print(jsonout.dumps(out))
    elif r.found:
        print(
            f"counterexample: {names[0]} and {names[1]} differ at a point of the domain "
            f"(evaluated by the kernel; met in the {r.phase} phase after {r.tried} "
            f"{'try' if r.tried == 1 else 'tries'}"
            f"{', then shrunk' if r.stats.get('shrunk') else ''})"
        )
        assert r.x is not None and r.outputs is not None
        print(difference_lines(r.x, names, r.outputs))
    else:
        print(
            f"none found in {r.tried} tries ({r.time_s:.2f} s): {names[0]} and {names[1]} "
            "agree at every point tried; a search proves nothing (exactmax equiv decides)"
        )
    return EXIT_REFUTED if r.found else EXIT_UNKNOWN
