"""The ``exactmax`` command: its parser, and the dispatch (``_command``) to the module of each
command's subject, where its logic lives (construct/command.py, prove/command.py, ...).

Exit codes: 0 success / proved with a kernel-checked certificate, 1 refuted (check-cert:
rejected), 2 usage or input error, 3 unknown, 4 proved by z3 alone (no certificate), 5 vacuous
(the domain is empty, by a kernel-checked Farkas proof).  Expected failures print one line
``exactmax: error: ...``; anything else is a bug: it keeps its
traceback and exits 70, never a code that carries a verdict.
"""

from __future__ import annotations

import argparse
import sys
import time

from . import __version__, jsonout, supervisor
from .exits import (  # noqa: F401
    EXIT_BUG,
    EXIT_INPUT,
    EXIT_OK,
    EXIT_REFUTED,
    EXIT_SOLVER_ONLY,
    EXIT_UNKNOWN,
    EXIT_VACUOUS,
    UsageError,
)
from .interruption import Terminated, TimeLimit
from .io import InputError
from .io.models import domain_arguments, domain_source

# --------------------------------------------------------------------------------- parser


def _command(module: str, name: str = "run"):
    """Dispatch: the function ``name`` of ``exactmax.<module>`` (where the command's logic
    lives, with its subject), imported only when that command runs, so that one command's
    dependencies (z3, hypothesis, FLINT's balls) do not slow the start of another."""

    def run(args) -> int:
        import importlib

        return getattr(importlib.import_module(f"exactmax.{module}"), name)(args)

    return run


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="exactmax",
        description="Exact, checked statements about Maxout networks and Transformers. "
        'Numbers are exact rationals throughout: integers, "p/q" or decimals.',
        epilog="Exit status: 0 success or proved (kernel-checked), 1 refuted, 2 usage or "
        "input error, 3 unknown, 4 proved by z3 alone (no certificate), 5 vacuous "
        "(the domain is empty).",
    )
    p.add_argument("--version", action="version", version=f"exactmax {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    e = sub.add_parser(
        "eval",
        help="exact output of a Maxout network or hardmax Transformer",
        description="Evaluate a model exactly at one rational input, or at "
        "every point of a file (--inputs, evaluated as one batch). Hardmax "
        "ties are averaged. A point outside the domain is still evaluated, "
        "with a note on stderr.",
    )
    e.add_argument("model", metavar="MODEL.json", help="exactmax/maxout or exactmax/transformer")
    given = e.add_mutually_exclusive_group(required=True)
    given.add_argument(
        "--input",
        metavar="X",
        help='comma-separated exact numbers, e.g. "1/2,-3,0.25" (a leading '
        "minus works too: --input -1/2,3)",
    )
    given.add_argument(
        "--inputs",
        metavar="FILE",
        help="a file with one point per line in the syntax of --input (blank "
        "lines and # comments skipped); prints one output per point, or "
        '{"outputs": [[...], ...]} with --json',
    )
    domain_arguments(e, "the model's")
    e.add_argument("--json", action="store_true", help='print {"output": ["p/q", ...]}')
    e.add_argument(
        "--softmax-lambda",
        metavar="L",
        help="evaluate a Transformer with softmax attention at scale L (times each "
        "head's scale) in ball arithmetic; the output is approximate, with radii",
    )
    e.add_argument(
        "--precision",
        type=int,
        default=256,
        metavar="BITS",
        help="working precision of the softmax ball arithmetic (default 256)",
    )
    e.set_defaults(run=_command("model_command", "run_eval"))

    c = sub.add_parser(
        "compile",
        help="build the hardmax Transformer of a Maxout network",
        description="Compile a Maxout network into the hardmax Transformer of "
        "docs/notes/construction.md §2: tokens = pieces, one head per unit, one-hot "
        "positions, three sub-layers (FF, attention, FF) per Maxout layer. Gate "
        "constants come from sound exact bounds over the domain, which must be "
        "bounded and non-empty.",
    )
    c.add_argument("model", metavar="NET.json", help="an exactmax/maxout network")
    c.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="TF.json",
        help="where to write the exactmax/transformer file (written atomically)",
    )
    domain_arguments(c, "the network's")
    c.add_argument(
        "--report",
        action="store_true",
        help="print the parameter table: Maxout vs Transformer, per layer and total",
    )
    c.add_argument("--json", action="store_true", help="print the report as one JSON object")
    c.add_argument(
        "--merged",
        action="store_true",
        help="variant: fuse each clean-up FF with the next layer's first FF (2D + 1 sub-layers)",
    )
    c.add_argument(
        "--positional",
        choices=("onehot", "scalar"),
        default="onehot",
        help="one-hot position block (default) or one scalar coordinate t + 1",
    )
    c.add_argument(
        "--bounds",
        choices=("auto", "interval", "lp"),
        default="auto",
        help="how the gate constants are bounded: interval arithmetic over the "
        "bounding box, or exact LP over the polyhedron for the first layer "
        "(auto: LP for polyhedra, interval for boxes)",
    )
    c.add_argument(
        "--slack",
        default="0",
        metavar="S",
        help="gate constants C_l = max(1, ceil((1 + S) * bound)), room for softmax "
        "perturbations (default 0)",
    )
    c.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="give up after S seconds (unknown, exit 3, nothing written): bounds "
        "over a polyhedron are exact LPs, which take minutes on numbers of 10^5 "
        "digits (default: no limit)",
    )
    c.set_defaults(whole_timeout=True)
    c.set_defaults(run=_command("construct.command"))

    def coq_options(p, answer: str):
        p.add_argument(
            "--coq",
            action="store_true",
            help=f"also prove the answer in Coq before printing it: the certificate (--cert's, "
            f"else a temporary one) is exported as export-coq does and checked by coqc "
            f"against the library in proofs/; the answer then reads '{answer} (kernel and "
            f"Coq)' (--json: trust kernel-and-coq-checked), or unknown (exit 3) with coqc's "
            f"reason. Needs coqc (apt-get install coq libcoq-bignums); the library is built "
            f"on first use",
        )
        p.add_argument(
            "--coq-timeout",
            type=float,
            default=600.0,
            metavar="S",
            help="with --coq: give coqc at most S seconds (default 600)",
        )

    def verify_options(p):
        domain_arguments(p, "the model's")
        p.add_argument(
            "--cert",
            metavar="OUT.json[.gz]",
            help="write the kernel-checked certificate here (models and domain "
            "embedded, bound by SHA-256)",
        )
        coq_options(p, "proved")
        p.add_argument(
            "--timeout",
            type=float,
            default=60.0,
            metavar="S",
            help="give up after S seconds with 'unknown', counted from the "
            "command's start (default 60); it holds inside a long exact step too",
        )
        p.set_defaults(whole_timeout=True)
        p.add_argument(
            "--max-leaves",
            type=int,
            default=20000,
            metavar="N",
            help="largest certificate to build (default 20000 cells)",
        )
        p.add_argument(
            "--strategy",
            choices=("auto", "layerwise", "monolithic"),
            default="auto",
            help="layerwise: one small certificate per Maxout layer and output "
            "group over certified boxes (for a Transformer with three sub-layers "
            "per Maxout layer, or 2D + 1 for the merged construction, with units "
            "of any ranks, on a box or a polyhedron; a layer that differs yields "
            "a counterexample); monolithic: one certificate over the whole domain, "
            "for any two models; auto tries layerwise first where it applies, "
            "then monolithic, then z3 alone",
        )
        p.add_argument(
            "--certificate-kind",
            choices=("auto", "equivalence", "pair-property"),
            default="auto",
            help="which certificate proves A = B: equivalence (an "
            "exactmax/certificate, layerwise or a split tree for A - B = 0; "
            "export-coq reads it), pair-property (a split tree for the pair "
            "program x -> (A(x), B(x)) with no output where A and B differ, an "
            "exactmax/pair-property-certificate; faster where the layers are not "
            "aligned), auto (default: a layer correspondence of two Maxout "
            "networks of the same depth, A = B on all of Q^d, where one exists, "
            "or one lattice normal form, A = B on all of Q^d, whatever the depths; "
            "else layerwise where it applies, else pair-property, else "
            "equivalence); --json says which was written",
        )
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument(
            "--no-search",
            action="store_true",
            help="skip the short counterexample search (vertices, tie sets, a few "
            "random points; well under a second) that runs before the proof",
        )

    def parallel_options(p, what):
        p.add_argument(
            "--workers",
            type=int,
            metavar="N",
            help=f"{what} on N processes of this machine (default: its cores; 1: "
            "in this process); the certificate is the same for every N",
        )
        p.add_argument(
            "--scheduler",
            metavar="tcp://HOST:8786",
            help=f"{what} on a Dask distributed cluster (pip install "
            "'exactmax[dask]'; workers started with --nthreads 1)",
        )
        p.add_argument(
            "--split-depth",
            type=int,
            default=0,
            metavar="K",
            help="split the input set K levels deep before solving: 2^K first "
            "work units per case (default 0)",
        )
        p.add_argument(
            "--unit-cells",
            type=int,
            metavar="N",
            help="a work unit certifies at most N cells, then hands back its open "
            "cells as new units (default: 128 cells, 4 relaxed leaves)",
        )

    v = sub.add_parser(
        "verify",
        help="prove a Maxout network equal to its Transformer",
        description="Prove that the Transformer (compiled from NET, or given "
        "with --transformer) equals the Maxout network at every point of the "
        "domain. Answers: proved (exit 0, 'certificate checked by the kernel'), "
        "proved by z3 alone with no certificate (exit 4), refuted (exit 1, with "
        "an exact counterexample evaluated by the kernel), unknown (exit 3, with "
        "the reason), vacuous (exit 5: the domain is empty). Every answer names "
        "both models' and the domain's sha256 and the domain's kind and "
        "dimension.",
    )
    v.add_argument("model", metavar="NET.json", help="an exactmax/maxout network")
    v.add_argument(
        "--transformer", metavar="TF.json", help="the Transformer to check (default: compile NET)"
    )
    verify_options(v)
    v.set_defaults(run=_command("prove.command", "run_verify"))

    q = sub.add_parser(
        "equiv",
        help="prove two models equal on a domain",
        description="Like verify, for any two models in exactmax's formats "
        "(Maxout or Transformer) with the same input and output dimensions. The "
        "domain is --domain, else the first model's, else the second's.",
    )
    q.add_argument("a", metavar="A.json")
    q.add_argument("b", metavar="B.json")
    verify_options(q)
    q.add_argument(
        "--epsilon",
        metavar="E",
        help="instead of equality, prove |A(x) - B(x)|_inf <= E on the domain "
        "(E exact, e.g. 1/100), or refute it at an exact point with the exact gap; "
        "--cert writes an exactmax/pair-property-certificate",
    )
    q.add_argument(
        "--norm",
        choices=("inf",),
        help="the norm of --epsilon: inf, the largest gap over the outputs (the "
        "only one, and the default)",
    )
    q.add_argument(
        "--top1",
        action="store_true",
        help="instead of equality, prove that A(x) and B(x) have the same arg max "
        "set at every x of the domain (ties included), or refute it at a point",
    )
    parallel_options(q, "with --epsilon or --top1, solve the work units (sub-boxes of the domain)")
    q.set_defaults(run=_command("prove.command", "run_equiv"))

    s = sub.add_parser(
        "search",
        help="look for a point where two models differ",
        description="Search the domain for an exact point x with A(x) != B(x) "
        "(hypothesis: the domain's vertices and points on both models' tie sets "
        "first, then random and targeted points; a found point is shrunk to "
        "small denominators). Every point is evaluated exactly by the kernel. "
        "Exit 1 with the counterexample, 3 when none is found: a search proves "
        "nothing (use equiv for that). The domain is --domain, else A's, else "
        "B's.",
    )
    s.add_argument("a", metavar="A.json", help="a Maxout network or hardmax Transformer")
    s.add_argument("b", metavar="B.json", help="the model to compare it with")
    domain_arguments(s, "A's, else B's")
    s.add_argument(
        "--max-examples",
        default="1000",
        metavar="N",
        help="random examples after the explicit ones (default 1000)",
    )
    s.add_argument(
        "--seed",
        metavar="S",
        help="seed of hypothesis's random generator (default: derandomized, the "
        "same examples on every run); the database is never used",
    )
    s.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="stop after S seconds with none found (exit 3), even inside one long "
        "exact step such as an LP over a polyhedron of huge numbers (default: no "
        "limit)",
    )
    s.set_defaults(whole_timeout=True)
    s.add_argument(
        "--json",
        action="store_true",
        help='print {"found": ..., "x": [...] or null, "outputs": ..., "tried": N, ...}',
    )
    s.set_defaults(run=_command("search.command"))

    k = sub.add_parser(
        "check-cert",
        help="re-check a certificate with the kernel alone",
        description="Check an exactmax/certificate (or a property or "
        "pair-property certificate: its kind is read from the file) with the "
        "trusted kernel only (z3 at most finds a point or Farkas multipliers about the domain, "
        "which the kernel checks). Exit 0 when valid, 1 when rejected, 2 when "
        "unreadable, 5 when the domain is empty (vacuous: never valid). The "
        "answer names both models' and the domain's sha256, the domain's kind "
        "and dimension, and whether it is full-dimensional. With --models and "
        "--domain (an equivalence or pair-property certificate) or --model and "
        "--property (a property certificate), also confirm that the certificate "
        "speaks about these files: their sha256 is recomputed, and a file that does "
        "not match is rejected (exit 1); files not given are reported as not compared.",
    )
    k.add_argument("cert", metavar="CERT.json[.gz]")
    k.add_argument(
        "--models",
        nargs="+",
        metavar="MODEL",
        help="the model files the certificate should be about: A.json B.json (equivalence "
        "and pair-property certificates), or NET (a property certificate, as --model)",
    )
    k.add_argument(
        "--domain",
        metavar="D.json",
        help="the domain file (exactmax/domain) the certificate should be about",
    )
    k.add_argument(
        "--model",
        metavar="NET",
        help="the network file (.onnx or JSON) a property certificate should be about",
    )
    k.add_argument(
        "--property",
        metavar="PROP.vnnlib",
        help="the VNN-LIB file (1.0 or 2.0) a property certificate should be about",
    )
    k.add_argument("--json", action="store_true", help="print one JSON object")
    k.set_defaults(run=_command("prove.command", "run_check_cert"))

    x = sub.add_parser(
        "export-coq",
        help="write a certificate as a Coq proof (and check it)",
        description="Write a Coq file that defines both networks readably, the "
        "domain and the certificate, and proves with the library in proofs/ "
        "that forall x : list R, length x = d -> x in the domain -> "
        "net_b x = net_a x. Monolithic certificates (verify --strategy monolithic) "
        "between Maxout networks and hardmax Transformers are supported, and "
        "layerwise ones (verify's default; equiv's for two Maxout networks of the "
        "same widths), proved by the composition theorems of "
        "proofs/Layerwise.v. A property certificate (check --cert) is written as "
        "the network, the property's cases and the split trees, and proves "
        "net_property: no x of a case's input set has (x, net x) satisfying a "
        "forbidden output conjunction (proofs/Property.v; relaxed leaves and phase "
        "splits: proofs/Relaxed.v). A pair certificate of two Maxout networks (equiv "
        "--epsilon E / --top1 --cert) proves net_pair: |net_a x - net_b x|_inf <= E, "
        "or the same arg max sets, at every x of the domain (proofs/Pair.v). "
        "With --check, run coqc on it: exit 0 when Coq "
        "accepts, 1 when it rejects (coqc's message is printed), 2 on bad input.",
    )
    x.add_argument(
        "cert",
        metavar="CERT.json[.gz]",
        nargs="?",
        help="an exactmax/certificate, property certificate or pair-property certificate "
        "(not with --construction)",
    )
    x.add_argument(
        "--construction",
        metavar="NET.json",
        help="instead of a certificate: prove the Transformer (--transformer, "
        "default: compile NET) equal to NET on the domain (--domain, default: "
        "NET's) through the construction theorem of proofs/ConstructionSound.v "
        "(construct_sound): Coq computes that the Transformer is construct NET C "
        "and that the gate constants C hold, no split tree",
    )
    x.add_argument("--transformer", metavar="TF.json", help="with --construction")
    x.add_argument("--domain", metavar="D.json", help="with --construction")
    x.add_argument(
        "--packed",
        action="store_true",
        help="with --construction: the models as one array of machine integers",
    )
    x.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="NetEquiv.v",
        help="the Coq file to write (its name is the Coq module name)",
    )
    x.add_argument(
        "--check",
        action="store_true",
        help="read the written file back and compare it with the certificate "
        "(models, domain, tree, sha256), then compile it with coqc and check "
        "Print Assumptions net_equiv against the allowed axioms",
    )
    x.add_argument(
        "--existing",
        action="store_true",
        help="do not write: --check the file already at -o against CERT",
    )
    x.add_argument(
        "--coq-lib",
        metavar="DIR",
        help="the built Coq library (default: $EXACTMAX_COQ_LIB, else the proofs/ "
        "folder of this exactmax checkout, else the per-user cache built on first "
        "use; see exactmax coq-lib)",
    )
    x.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="give coqc at most S seconds (default 600)",
    )
    x.add_argument(
        "--parts",
        type=int,
        default=1,
        metavar="N",
        help="a property certificate in up to N parts: NAME_data.v, NAME_part1.v .. "
        "(checked side by side by --check, one coqc per part) and NAME.v, which "
        "proves the theorem from them (default 1: one file); for certificates that take "
        "coqc minutes, N = the number of cores",
    )
    x.add_argument("--json", action="store_true", help="print one JSON object")
    x.set_defaults(run=_command("export.command", "run_export_coq"))

    c = sub.add_parser(
        "coq-lib",
        help="where the Coq library is; build it",
        description="The Coq library export-coq --check compiles against: "
        "--coq-lib DIR, else $EXACTMAX_COQ_LIB, else the proofs/ folder of this "
        "exactmax checkout, else a per-user cache "
        "($XDG_CACHE_HOME/exactmax/coq/<version>-<sources>-coq<version>/) built "
        "from the sources installed with exactmax by the installed coqc. Prints "
        "where it is and whether it is current (every .v file as it was when "
        "built, by sha256); exit 0 when current, 2 when not.",
    )
    c.add_argument("--build", action="store_true", help="build it unless it is current")
    c.add_argument("--path", action="store_true", help="print only its folder (exit 0)")
    c.add_argument("--coq-lib", metavar="DIR", help="a library folder of your own")
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(run=_command("export.command", "run_coq_lib"))

    m = sub.add_parser(
        "import",
        help="read an ONNX network as an exact Maxout network",
        description="Import an ONNX file (opsets 7 to 21) as an exactmax/maxout network, "
        "every piecewise-linear operator lowered exactly: affine ones (Gemm, MatMul, Add, "
        "Sub, Sum, Mul/Div by constants, Conv, ConvTranspose, BatchNormalization, "
        "AveragePool, GlobalAveragePool, ReduceSum/Mean, Pad, Slice, Gather, Reshape, "
        "Flatten, Squeeze/Unsqueeze, Transpose, Concat, Identity, Dropout, Constant) are "
        "composed exactly; Relu, Max, Min, ReduceMax/Min, MaxPool, GlobalMaxPool, Abs, "
        "LeakyRelu, PRelu and Clip become Maxout units (a ReLU is a rank-2 unit max(z, 0)); "
        "tensors of different depths (residual connections) meet through rank-1 "
        "pass-through units. Every float weight becomes the exact dyadic rational it "
        "denotes (a BatchNormalization scale with an irrational square root: the nearest "
        "double, reported). Sigmoid, Tanh and other operators that are not piecewise linear "
        "are refused. Every command that reads a model also accepts an .onnx file directly.",
    )
    m.add_argument("model", metavar="NET.onnx")
    m.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="NET.json",
        help="the exactmax/maxout file to write (atomically)",
    )
    m.add_argument(
        "--drop-final-softmax",
        action="store_true",
        help="drop a Softmax that produces the output (it keeps the argmax: for "
        "properties about the largest output only)",
    )
    domain_arguments(m, "none: the ONNX graph has none")
    m.add_argument(
        "--lift",
        action="store_true",
        help="write the lattice network's shallow Maxout form instead (exactmax lift: proved "
        "equal by the kernel); exit 3, nothing written, when the network computes no max/min "
        "expression",
    )
    m.add_argument("--json", action="store_true", help="print the import report as JSON")
    m.set_defaults(run=_command("model_command", "run_import"), supervised=True)

    lf = sub.add_parser(
        "lift",
        help="rewrite a lattice network written in ReLUs as a shallow Maxout network",
        description="Read the max/min expression a network computes (max and min written "
        "in ReLUs, as lattice networks are: a - ReLU(a - b), b + ReLU(a - b), (a + b)/2 -+ "
        "|a - b|/2, pass-throughs ReLU(a) - ReLU(-a), and trees of these) and write the "
        "Maxout network of the fewest layers that computes it: a max of mins of affine maps "
        "becomes two layers. The kernel proves the two equal on all of Q^d (both rewrite, "
        "by identities, to one lattice normal form) before anything is written. Exit 0 "
        "when lifted, 3 when the network computes no expression of that kind (a sum of "
        "maxima of mixed signs).",
    )
    lf.add_argument("model", metavar="NET", help="an .onnx file or an exactmax/maxout network")
    lf.add_argument("-o", "--output", metavar="LIFTED.json", help="write the lifted network")
    lf.add_argument(
        "--cert",
        metavar="C.json",
        help="write the equivalence certificate (kind lattice, NET = LIFTED on all of Q^d); "
        "re-check it with exactmax check-cert",
    )
    lf.add_argument("--json", action="store_true", help="print one JSON object")
    lf.set_defaults(run=_command("model_command", "run_lift"), supervised=True)

    xo = sub.add_parser(
        "export-onnx",
        help="write a Maxout network or hardmax Transformer as ONNX",
        description="Write a Maxout network or a hardmax Transformer as "
        "an ONNX model (opset 18, IR 8; checked by onnx.checker) computing in "
        "float32 or float64. Every exact rational weight becomes the nearest "
        "float of that type; the report gives the largest absolute rounding "
        "error, or says the weights are exact. Hardmax attention averages over "
        "ties (ReduceMax, Equal, Cast, ReduceSum, Div). The ONNX reader "
        "(exactmax import) reads an exported Maxout network back.",
    )
    xo.add_argument("model", metavar="MODEL.json")
    xo.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="M.onnx",
        help="the ONNX file to write (atomically)",
    )
    xo.add_argument(
        "--dtype",
        choices=("float32", "float64"),
        default="float64",
        help="the graph's floating-point type (default float64)",
    )
    xo.add_argument("--json", action="store_true", help="print the export report as JSON")
    xo.set_defaults(run=_command("export.onnxmodel", "cmd_export_onnx"))

    ck = sub.add_parser(
        "check",
        help="decide a VNN-LIB property: sat, unsat or unknown",
        description="Decide a VNN-LIB 1.0 property (the negation of a safety "
        "property: input constraints and output constraints, with and/or) of "
        "a Maxout or ReLU network (.onnx or exactmax/maxout JSON). Answers: "
        "sat (exit 1) with an exact counterexample inside the input set, "
        "evaluated by the kernel; unsat (exit 0) with a certificate (split "
        "tree with Farkas multipliers) checked by the kernel; unknown (exit 3) "
        "with the reason. A short counterexample search runs first.",
    )
    ck.add_argument("model", metavar="NET", help="an .onnx file or an exactmax/maxout network")
    ck.add_argument("property", metavar="PROP.vnnlib")
    ck.add_argument(
        "--cert",
        metavar="C.json[.gz]",
        help="write the kernel-checked certificate of an unsat answer here (the "
        "network and the property embedded, bound by SHA-256); re-check it with "
        "exactmax check-cert",
    )
    coq_options(ck, "unsat")
    ck.add_argument(
        "--counterexample",
        metavar="FILE",
        help="write a sat answer's counterexample in VNN-COMP's format "
        "((X_0 v) ... (Y_0 v) ...), exact decimals",
    )
    ck.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="give up after S seconds with unknown, exit 3 (default 60), counted from "
        "the command's start: a hard limit on every phase (reading the files, the work "
        "units, the kernel's check, writing); the answer names the phase it stopped",
    )
    ck.add_argument(
        "--max-leaves",
        type=int,
        default=20000,
        metavar="N",
        help="largest certificate to build (default 20000 cells)",
    )
    ck.add_argument(
        "--no-search",
        action="store_true",
        help="skip the counterexample search that runs before the proof",
    )
    ck.add_argument(
        "--no-lift",
        action="store_true",
        help="decide on the network as given: by default a network that computes a max/min "
        "expression in ReLUs (a lattice network) is lifted to its shallower Maxout form "
        "(exactmax lift), proved equal by the kernel, and decided there (not with --no-relax); "
        "a certificate about the lifted form has no Coq export yet: --no-lift makes one that "
        "export-coq exports",
    )
    ck.add_argument(
        "--no-relax",
        action="store_true",
        help="no relaxed leaves (every ReLU/Max fixed on each cell), in this "
        "process, and no lifting: a larger certificate (export-coq exports both kinds)",
    )
    ck.add_argument(
        "--json",
        action="store_true",
        help='print {"verdict": "sat" | "unsat" | "unknown", "trust": ..., "reason": ..., '
        '"stats": ..., ...}',
    )
    parallel_options(ck, "solve the work units (sub-boxes of the input set)")
    ck.set_defaults(run=_command("prove.property_command", "run_check"), whole_timeout=True)

    rp = sub.add_parser(
        "replay",
        help="check another tool's counterexample exactly",
        description="Read a VNN-COMP counterexample file ((X_0 v) ... (Y_0 v) "
        "...; every value read exactly from its text) and decide exactly "
        "whether x is in the property's input set and f(x), evaluated by the "
        "kernel, satisfies its output constraints, with the exact margin. "
        "Exit 0 when it is a counterexample, 1 when it is not.",
    )
    rp.add_argument("model", metavar="NET", help="an .onnx file or an exactmax/maxout network")
    rp.add_argument("property", metavar="PROP.vnnlib")
    rp.add_argument("counterexample", metavar="CEX")
    rp.add_argument("--json", action="store_true", help="print one JSON object")
    rp.set_defaults(run=_command("prove.property_command", "run_replay"), supervised=True)

    i = sub.add_parser(
        "info",
        help="summary of a model and its domain",
        description="Describe a model file and decide exactly whether its "
        "domain is empty or unbounded (z3 over the rationals, witnesses "
        "checked by the kernel).",
    )
    i.add_argument("model", metavar="MODEL.json")
    domain_arguments(i, "the model's")
    i.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds for deciding a polyhedron domain (exact LPs, slow on numbers "
        "of many thousands of digits); past them the domain is reported undecided, "
        "with the reason, and the exit status is 3 (default 10)",
    )
    i.add_argument("--json", action="store_true", help="print one JSON object")
    i.set_defaults(run=_command("model_command", "run_info"))
    from .cpwl import command as cpwl_command

    cpwl_command.add_parser(sub)
    cpwl_command.add_approx_parser(sub)
    from .regions import theorem44 as theorem44_command

    theorem44_command.add_parser(sub)
    from .regions import command as regions_command

    regions_command.add_parser(sub)
    from .softmax import command as softmax_command

    softmax_command.add_parser(sub)
    from . import schemas as schema_command

    schema_command.add_parser(sub)
    from .prove import vnnlib_interface

    vnnlib_interface.add_parser(sub)
    from . import vnncomp_command

    vnncomp_command.add_parser(sub)
    return p


NUMBER_OPTIONS = (
    "--input",
    "--slack",
    "--softmax-lambda",
    "--box",
    "--lambda",
    "--epsilon",
    "--tolerance",
    "--h",
)


def _join_negative_values(argv: list[str]) -> list[str]:
    """``--input -1/2,3`` would read to argparse as a new option: join such values
    (``--input=-1/2,3``), so a point whose first coordinate is negative can be given."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if (
            a in NUMBER_OPTIONS
            and i + 1 < len(argv)
            and argv[i + 1][:1] == "-"
            and argv[i + 1][1:2] in "0123456789."
        ):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


APPROX_VALUE_OPTIONS = ("--box", "--h", "--vars", "-o", "--output", "--max-points")


def _protect_expr(argv: list[str]) -> list[str]:
    """``exactmax approx-convex "-x + x^2" ...``: argparse would read an EXPR that starts
    with '-' (and has no space) as an unknown option.  Such an argument (not an option's
    value, not -o... or -h..., before any "--") gets a leading space, which argparse reads as
    a positional and the parser ignores.  Otherwise put EXPR last, after "--"."""
    if not argv or argv[0] != "approx-convex":
        return argv
    out, skip = [argv[0]], False
    for i, a in enumerate(argv[1:], 1):
        if a == "--":
            return out + argv[i:]
        if not skip and a[:1] == "-" and a[1:2] not in ("-", "o", "h", ""):
            a = " " + a
        skip = a in APPROX_VALUE_OPTIONS
        out.append(a)
    return out


_IO_ERRNOS = {28, 122, 5, 27, 30}  # ENOSPC, EDQUOT, EIO, EFBIG, EROFS


class _Stdout:
    """Standard output that cannot lose a command's exit status: once the reader has gone
    (a broken pipe) or the device is full, later writes are dropped and the failure is kept
    (``error``: the OSError, None for a closed reader) for ``main`` to report."""

    def __init__(self, stream):
        self.stream, self.error, self.closed_reader = stream, None, False

    def _guard(self, op, *a):
        if self.closed_reader or self.error is not None:
            return None
        try:
            return op(*a)
        except BrokenPipeError:
            self.closed_reader = True
        except OSError as e:
            if e.errno not in _IO_ERRNOS:
                raise
            self.error = e
        _silence(self.stream)
        return None

    def write(self, text):
        self._guard(self.stream.write, text)
        return len(text)

    def flush(self):
        self._guard(self.stream.flush)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _silence(stream) -> None:
    """Point the stream's file at /dev/null, so that Python's final flush cannot fail too."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _run_within_limit(args) -> int:
    """``args.run(args)``, for a command whose ``--timeout`` bounds the whole command
    (``set_defaults(whole_timeout=True)``) within ``interruption.time_limit``: the limit holds
    within about a second even inside one long exact step."""
    from . import interruption

    interruption.current_phase = None  # the phases of this command only
    domain_source(args)  # --box / --domain-from: read through load_domain as args.domain
    seconds = supervisor.whole_timeout(args)
    if seconds is None:
        return args.run(args)
    with interruption.time_limit(time.monotonic() + seconds, seconds):
        return args.run(args)


_STARTED = time.monotonic()


def _time_limit_answer(args, reason: str) -> int:
    return supervisor.time_limit_answer(args, reason, _STARTED)


def main(argv: list[str] | None = None) -> int:
    from_command_line = argv is None
    argv = _join_negative_values(list(sys.argv[1:] if argv is None else argv))
    argv = _protect_expr(argv)
    args = build_parser().parse_args(argv)
    global _STARTED
    _STARTED = time.monotonic()
    from . import interruption

    interruption.current_stats.clear()  # how far this command's search gets
    jsonout.start(args.command)
    if from_command_line and supervisor.wanted(args):  # ended from outside: supervisor.py
        return supervisor.run_command(args, lambda: _run(args, True), _STARTED, _Stdout)
    return _run(args, from_command_line)


def _run(args, from_command_line: bool) -> int:
    out = _Stdout(sys.stdout)
    sys.stdout = out
    try:
        if from_command_line:  # inside the try: a signal landing here is an interruption too
            from .interruption import install

            install()
        code = _run_within_limit(args)
        out.flush()
        if out.error is not None:  # a full disk, not a closed reader: an I/O error
            print(
                f"exactmax: error: cannot write the output: {out.error.strerror}", file=sys.stderr
            )
            return EXIT_INPUT
        return code  # a closed reader (| head) keeps the verdict's status
    except (InputError, UsageError) as e:
        print(f"exactmax: error: {e}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("exactmax: interrupted", file=sys.stderr)
        return 130
    except TimeLimit as e:
        return _time_limit_answer(args, e.reason())
    except MemoryError:  # not a bug: the answer is unknown, and why
        from . import interruption

        where = interruption.current_phase or "the command's work"
        return _time_limit_answer(
            args, f"out of memory in {where}: the process could not get the memory it needed"
        )
    except Terminated:
        print("exactmax: interrupted (terminated)", file=sys.stderr)
        return 143
    except Exception:
        from . import interruption

        if interruption.received is not None:  # raised because of the signal
            print("exactmax: interrupted", file=sys.stderr)
            return 143 if interruption.received == 15 else 130
        if interruption.expired():  # wrapped (by ctypes) as it was raised
            return _time_limit_answer(args, interruption.TimeLimit().reason())
        import traceback

        traceback.print_exc()
        print(
            "exactmax: internal error (a bug; please report it with the traceback above)",
            file=sys.stderr,
        )
        return EXIT_BUG
    finally:
        sys.stdout = out.stream
