"""``exactmax compile``: a Maxout network -> the hardmax Transformer of the construction."""

from __future__ import annotations

from .. import jsonout
from ..exits import EXIT_OK, UsageError
from ..io import InputError, load_model
from ..io.models import model_domain
from ..io.numbers import NumberSyntaxError, parse_rational, q_str
from ..kernel.maxout import MaxoutNetwork


def run(args) -> int:
    """``compile NET.json -o TF.json``: the construction's Transformer of a Maxout network
    (gate constants from sound exact bounds over the domain, ``compile_checked``), written
    atomically, and its size against the network's (``compile_report``)."""
    from ..io import model_to_json, write_json_atomic
    from ..io.models import check_outputs
    from .transformer import CompileOptions

    check_outputs([("-o", args.output)], [("NET.json", args.model), ("--domain", args.domain)])
    net = network_to_compile(load_model(args.model), args.model)
    dom = domain_to_compile(model_domain(net, args.domain), args.model)
    try:
        slack = parse_rational(args.slack)
    except NumberSyntaxError as e:
        raise UsageError(f"--slack: {e}") from None
    if slack < 0:
        raise UsageError(f"--slack: expected a number >= 0, got {slack}")
    opts = CompileOptions(
        merged=args.merged, positional=args.positional, bounds=args.bounds, slack=slack
    )
    c = compile_checked(net, dom, opts, args.model, args.domain)
    write_json_atomic(args.output, model_to_json(c.transformer))
    rep = compile_report(net, c, args.output)
    if args.json:
        rep["ratio_params"] = round(rep["ratio_params"], 4)
        rep["ratio_nonzero"] = round(rep["ratio_nonzero"], 4)
        print(jsonout.dumps(rep))
        return EXIT_OK
    print(
        f"wrote {args.output}: {rep['sublayers']} sub-layers, {rep['tokens']} tokens, "
        f"{rep['heads']} heads, d_model {rep['d_model']}; gate constants from "
        f"{rep['bounds']} bounds: " + ", ".join(rep["gate_constants"])
    )
    if args.report:
        print()
        print(
            "| layer | width | rank | Maxout params | Transformer params | non-zero | sub-layers |"
        )
        print("|---:|---:|---:|---:|---:|---:|---|")
        for l in rep["layers"]:
            print(
                f"| {l['layer']} | {l['width']} | {l['rank']} | {l['maxout_params']} | "
                f"{l['transformer_params']} | {l['transformer_nonzero']} | "
                + ", ".join(str(i) for i in l["sublayers"])
                + " |"
            )
        print(
            f"| total | | | {rep['maxout_params']} | {rep['transformer_params']} | "
            f"{rep['transformer_nonzero']} | {rep['sublayers']} |"
        )
        print(
            f"\nTransformer / Maxout parameters: {rep['ratio_params']:.2f}x in total, "
            f"{rep['ratio_nonzero']:.2f}x non-zero (totals include the embedding, the "
            "positions and the read-out)."
        )
    return EXIT_OK


def network_to_compile(net, name: str) -> MaxoutNetwork:
    """The network of compile (``name``: where it was read): a Maxout network, else an
    InputError."""
    if not isinstance(net, MaxoutNetwork):
        raise InputError(
            name,
            "format",
            'expected an "exactmax/maxout" network to compile, got a Transformer',
        )
    return net


def domain_to_compile(dom, name: str):
    """The domain of compile, if there is one; else an InputError about the network
    ``name``, which has none."""
    if dom is None:
        raise InputError(
            name,
            "",
            "the construction needs a bounded, non-empty domain "
            'and the network has none; add a "domain" entry (a box or a '
            "polyhedron) or pass --domain FILE",
        )
    return dom


def compile_checked(net: MaxoutNetwork, dom, opts, name: str, domain_name: str | None):
    """``compile_transformer(net, dom, opts)`` (a ``Compiled``), with compile's errors: no
    domain, or one that is empty or unbounded, is an InputError naming where it came from
    (``domain_name``, None: the network ``name``'s own)."""
    from .bounds import DomainError
    from .transformer import compile_transformer

    try:
        return compile_transformer(net, domain_to_compile(dom, name), opts)
    except DomainError as e:
        where, path = (domain_name, "") if domain_name else (name, "domain")
        raise InputError(
            where,
            path,
            f"the construction needs a bounded, non-empty "
            f"domain, but {e}; give a bounded one (a box, or a polyhedron "
            'A x <= b with bounded feasible set) in the "domain" entry or with '
            "--domain FILE",
        ) from None


def compile_report(net: MaxoutNetwork, c, output: str | None) -> dict:
    """What compile reports of the compilation ``c`` of ``net`` (``size_report``: sub-layers,
    tokens, heads, d_model, parameters per layer and in total), with where it was written
    (``output``), the bounds' method, the gate constants and the variant."""
    from .size import size_report

    merged = c.options.merged
    rep = size_report(net, c.transformer, merged)
    rep.update(
        output=output,
        bounds=c.bounds_method,
        gate_constants=[q_str(g) for g in c.gates],
        variant={"merged": merged, "positional": c.options.positional},
    )
    return rep
