"""exactmax cpwl (Theorem 4.2 conversions) and approx-convex (the convex Lipschitz corollary).

Each conversion is tested against the specification's semantics computed here, independently
of exactmax (interpolation by locating the segment, max/min of affine maps, ReLU layers), at
random exact points, then end to end: NET = literal reference = compiled Transformer, proved
by kernel-checked certificates; a network off by one number must be refuted."""

from __future__ import annotations

import json
import random
from fractions import Fraction as F

import pytest

from exactmax.cli import main
from exactmax.cpwl.convert import (
    compile_cpwl,
    compile_lattice,
    compile_lattice_dc,
    dc_split,
    reference_json,
)
from exactmax.cpwl.convex import approximate_convex, parse_polynomial, sqrt_upper
from exactmax.cpwl.spec import AffineMap, BreakpointSpec, LatticeSpec, load_spec
from exactmax.io import load_model
from exactmax.io.certificates import content_hash
from exactmax.io.numbers import to_fraction
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.prove.verify import VerifyOptions, verify_equal
from exactmax.vectorized.scaled import MaxoutEvaluator

EXAMPLES = "examples"
KINDS = ("breakpoints", "relu", "lattice", "dc")


def ev(net, x):
    return [to_fraction(v) for v in MaxoutEvaluator(net).evaluate(tuple(Q(t.numerator, t.denominator) for t in x))]


def rnd(rng, den=12, lo=-2, hi=2):
    return F(rng.randint(lo * den, hi * den), den)


def write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return str(p)


# ------------------------------------------------------------------ semantics, independently

def interpolate(xs, ys, t):
    """The interpolant of (xs, ys), linear beyond the ends."""
    i = 1
    while i < len(xs) - 1 and t > xs[i]:
        i += 1
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (t - x0) / (x1 - x0)


def random_breakpoints(rng, n):
    xs = sorted(set(rnd(rng, 8) for _ in range(n + 3)))[: n + 1]
    while len(xs) < 2:
        xs.append(xs[-1] + 1 if xs else F(0))
    ys = [rnd(rng, 5, -3, 3) for _ in xs]
    return xs, ys


def breakpoint_spec(xs, ys, lo=None, hi=None):
    q = lambda v: Q(v.numerator, v.denominator)
    lo = xs[0] if lo is None else lo
    hi = xs[-1] if hi is None else hi
    return BreakpointSpec(tuple(map(q, xs)), tuple(map(q, ys)), Box((q(lo),), (q(hi),)))


@pytest.mark.parametrize("seed", range(25))
def test_breakpoints_dc_network_is_the_interpolant_everywhere(seed):
    rng = random.Random(seed)
    xs, ys = random_breakpoints(rng, rng.randint(1, 7))
    spec = breakpoint_spec(xs, ys)
    net = compile_cpwl(spec)
    assert [l.width for l in net.layers] == [2]
    for t in xs + [rnd(rng, 97, -4, 4) for _ in range(30)]:
        assert ev(net, [t]) == [interpolate(xs, ys, t)]


def test_dc_split_puts_increasing_hinges_in_g_and_the_others_in_h():
    # slopes 4, -2, 1, -4: slope changes -6 at 1/4, +3 at 1/2, -5 at 3/4
    spec = load_spec(f"{EXAMPLES}/cpwl_breakpoints.json")
    g, h = dc_split(spec)
    assert len(g) == 2 and len(h) == 3      # one increase, two decreases (plus the base piece)
    for pieces in (g, h):                   # convex: slopes strictly increase piece by piece
        slopes = [p.w[0] for p in pieces]
        assert slopes == sorted(slopes) and len(set(slopes)) == len(slopes)
    assert [p.w[0] for p in g] == [4, 7] and [p.w[0] for p in h] == [0, 6, 11]


def test_a_straight_line_gives_one_piece_per_unit():
    spec = breakpoint_spec([F(0), F(1), F(3)], [F(1), F(3), F(7)])
    g, h = dc_split(spec)
    assert len(g) == 1 and len(h) == 1


@pytest.mark.parametrize("seed", range(10))
def test_lattice_both_routes_equal_max_min(seed):
    rng = random.Random(100 + seed)
    d = rng.randint(1, 3)
    maps = [AffineMap(tuple(Q(rng.randint(-4, 4), rng.randint(1, 3)) for _ in range(d)),
                      Q(rng.randint(-3, 3), 2)) for _ in range(rng.randint(2, 5))]
    sets = tuple(tuple(rng.sample(range(len(maps)), rng.randint(1, len(maps))))
                 for _ in range(rng.randint(1, 3)))
    spec = LatticeSpec(d, tuple(maps), sets, None)
    two, one = compile_lattice(spec), compile_lattice_dc(spec)
    assert len(two.layers) == 2 and [l.width for l in one.layers] == [2]
    for _ in range(30):
        x = [rnd(rng, 7) for _ in range(d)]
        want = max(min(sum(to_fraction(w) * v for w, v in zip(maps[j].w, x)) +
                       to_fraction(maps[j].b) for j in S) for S in sets)
        assert ev(two, x) == [want] and ev(one, x) == [want]


def test_relu_and_dc_conversions_match_their_semantics():
    rng = random.Random(7)
    relu = load_spec(f"{EXAMPLES}/cpwl_relu.json")
    dc = load_spec(f"{EXAMPLES}/cpwl_dc.json")
    nr, nd = compile_cpwl(relu), compile_cpwl(dc)
    fr = lambda M: [[to_fraction(v) for v in row] for row in M]
    for _ in range(40):
        x = [rnd(rng, 9, -1, 1) for _ in range(2)]
        h = x
        for A in relu.layers:
            h = [max(F(0), sum(w * v for w, v in zip(row, h)) + to_fraction(c))
                 for row, c in zip(fr(A.W), A.b)]
        y = [sum(w * v for w, v in zip(row, h)) + to_fraction(c)
             for row, c in zip(fr(relu.output.W), relu.output.b)]
        assert ev(nr, x) == y
        aff = lambda m: sum(to_fraction(w) * v for w, v in zip(m.w, x)) + to_fraction(m.b)
        assert ev(nd, x) == [max(map(aff, dc.plus)) - max(map(aff, dc.minus))]


# ------------------------------------------------------------------------- end to end (CLI)

@pytest.mark.parametrize("kind", KINDS)
def test_chain_cpwl_maxout_transformer_is_proved(kind, tmp_path, capsys):
    net, ref = tmp_path / "net.json", tmp_path / "ref.json"
    code = main(["cpwl", f"{EXAMPLES}/cpwl_{kind}.json", "-o", str(net), "--reference",
                 str(ref), "--check", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    for part in ("spec", "transformer"):
        assert out["check"][part]["verdict"] == "proved"
        assert out["check"][part]["trust"] == "kernel-checked"
    # the reference is built differently from the conversion; for a ReLU spec it is the ReLU
    # layers themselves, which the Maxout format reads as the same rank-2 network
    if kind == "relu":
        assert "relu" in json.loads(ref.read_text())["layers"][0]
        assert "units" in json.loads(net.read_text())["layers"][0]
    else:
        assert load_model(str(net)) != load_model(str(ref))
    # and the saved files prove equal with the ordinary commands
    assert main(["equiv", str(net), str(ref), "--no-search"]) == 0
    assert main(["verify", str(net), "--no-search"]) == 0


def test_lattice_dc_route_is_proved_equal_to_the_two_layer_route(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["cpwl", f"{EXAMPLES}/cpwl_lattice.json", "-o", str(a)]) == 0
    assert main(["cpwl", f"{EXAMPLES}/cpwl_lattice.json", "-o", str(b), "--route", "dc",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert out["network"]["widths"] == [2] and out["route"] == "dc"
    assert main(["equiv", str(a), str(b), "--no-search"]) == 0


EVERYWHERE = {"relu": "correspondence", "lattice": "lattice", "dc": "lattice"}


@pytest.mark.parametrize("kind", KINDS)
def test_the_conversion_writes_a_certificate_check_cert_accepts(kind, tmp_path, capsys):
    """NET = the specification's literal encoding, as a certificate file: on all of Q^d (a
    correspondence or one lattice normal form) for the relu, lattice and dc kinds, on the
    domain for breakpoints; check-cert accepts it about the files written, and rejects it once
    the reference inside is changed."""
    net, ref, cert = (tmp_path / f for f in ("net.json", "ref.json", "c.json"))
    code = main(["cpwl", f"{EXAMPLES}/cpwl_{kind}.json", "-o", str(net), "--reference",
                 str(ref), "--cert", str(cert), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["cert"] == str(cert)
    assert list(out["check"]) == ["spec"]  # --cert alone proves NET = spec, nothing else
    spec = out["check"]["spec"]
    assert spec["verdict"] == "proved" and spec["everywhere"] == (kind in EVERYWHERE)
    if kind in EVERYWHERE:
        assert spec["certificate_kind"] == EVERYWHERE[kind]
        assert json.loads(cert.read_text())["domain"]["domain"] == {"polyhedron": {"A": [], "b": []}}
    assert main(["check-cert", str(cert), "--models", str(net), str(ref), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "valid"
    c = json.loads(cert.read_text())
    first = c["models"]["b"]["model"]["layers"][0]  # the reference's first layer, one bias moved
    if "relu" in first:
        first["relu"]["b"][-1] = str(F(first["relu"]["b"][-1]) + F(1, 1000))
    else:
        piece = first["units"][-1]["pieces"][0]
        piece["b"] = str(F(piece["b"]) + F(1, 1000))
    c["models"]["b"]["sha256"] = content_hash(c["models"]["b"]["model"])  # so the kernel decides
    cert.write_text(json.dumps(c))
    assert main(["check-cert", str(cert)]) == 1
    capsys.readouterr()


def test_without_a_domain_the_certificate_holds_on_all_of_qd_or_is_not_written(tmp_path, capsys):
    spec = json.loads(open(f"{EXAMPLES}/cpwl_lattice.json").read())
    del spec["domain"]
    path = write(tmp_path, "spec.json", spec)
    net, cert = tmp_path / "net.json", tmp_path / "c.json"
    assert main(["cpwl", path, "-o", str(net), "--cert", str(cert)]) == 0
    assert "on all of Q^2; one lattice normal form" in capsys.readouterr().out
    assert main(["check-cert", str(cert)]) == 0
    capsys.readouterr()
    # the DC route is not one lattice normal form with the spec, and no domain: unknown, exit
    # 3, the network written, no certificate
    cert2 = tmp_path / "c2.json"
    assert main(["cpwl", path, "--route", "dc", "-o", str(net), "--cert", str(cert2)]) == 3
    out = capsys.readouterr().out
    assert "unknown:" in out and "no domain" in out and not cert2.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_a_network_off_by_one_number_is_refuted(kind, tmp_path):
    spec = load_spec(f"{EXAMPLES}/cpwl_{kind}.json")
    net = compile_cpwl(spec)
    layer = net.layers[0]
    u0 = layer.units[0]
    bad_piece = Piece(u0.pieces[0].w, u0.pieces[0].b + Q(1, 1000))
    bad = MaxoutNetwork(net.input_dim, (Layer((Unit((bad_piece,) + u0.pieces[1:]),) +
                                              layer.units[1:]),) + net.layers[1:],
                        net.output, net.domain)
    ref = load_model(write(tmp_path, "ref.json", reference_json(spec)))
    v = verify_equal(bad, ref, net.domain, VerifyOptions(timeout_s=30))
    assert v.verdict == "refuted"
    assert MaxoutEvaluator(bad).evaluate(v.x) != MaxoutEvaluator(ref).evaluate(v.x)


# -------------------------------------------------------------------------- bad input

BAD = [
    ({"format": "exactmax/cpwl", "version": 1, "kind": "breakpoints", "x": [0, 1], "y": [0, 1],
      "extra": 1}, 'unknown key "extra"'),
    ({"format": "exactmax/cpwl", "version": 1, "kind": "breakpoints", "x": [0, "1/2", "1/2"],
      "y": [0, 1, 2]}, "x[2]: breakpoints must increase strictly"),
    ({"format": "exactmax/cpwl", "version": 1, "kind": "breakpoints", "x": [0, 1],
      "y": [0, 1, 2]}, "y: expected 2 values (one per breakpoint), got 3"),
    ({"format": "exactmax/cpwl", "version": 1, "kind": "breakpoints", "x": [0, 1],
      "y": [0, "NaN"]}, 'y[1]: expected an integer, a decimal or "p/q"'),
    ({"format": "exactmax/cpwl", "version": 1, "kind": "breakpoints", "x": [0, 1], "y": [0, 1],
      "interval": [1, 0]}, "interval: expected lo < hi"),
    ({"format": "exactmax/cpwl", "version": 1, "kind": "lattice", "input_dim": 1,
      "affine": [{"w": [1], "b": 0}], "sets": [[0, 1]]}, "sets[0][1]: expected an index below 1"),
    ({"format": "exactmax/cpwl", "version": 1, "kind": "lattice", "input_dim": 1,
      "affine": [{"w": [1], "b": 0}], "sets": [[0, 0]]}, "sets[0][1]: index 0 given twice"),
    ({"format": "exactmax/cpwl", "version": 1, "kind": "dc", "input_dim": 2,
      "plus": [{"w": [1], "b": 0}], "minus": [{"w": [1, 0], "b": 0}]},
     "plus[0].w: expected 2 weights (input_dim is 2), got 1"),
    ({"format": "exactmax/cpwl", "version": 1, "kind": "relu", "input_dim": 2,
      "layers": [{"W": [[1, 0]], "b": [0]}], "output": {"W": [[1, 2]], "b": [0]}},
     "output.W[0]: expected 1 number"),
    ({"format": "exactmax/cpwl", "version": 1, "kind": "spline"}, 'kind: expected one of'),
    ({"format": "exactmax/maxout", "version": 1, "kind": "dc"}, 'format: "exactmax/maxout" is a '
     'Maxout network file (what cpwl writes), not a CPWL spec; a spec has "format": '
     '"exactmax/cpwl", "version": 1 and a "kind"'),
    ({"format": "exactmax/maxout", "version": 1, "layers": []}, "is a Maxout network file"),
    ({"format": "exactmax/whatever", "version": 1, "kind": "dc"}, 'format: expected one of '
                                                                   '"exactmax/cpwl"'),
    ({"format": "exactmax/cpwl", "version": 2, "kind": "dc"}, "version 2 is not supported"),
]


@pytest.mark.parametrize("obj,message", BAD)
def test_bad_specs_give_one_line_naming_the_place(obj, message, tmp_path, capsys):
    spec = write(tmp_path, "spec.json", obj)
    assert main(["cpwl", spec, "-o", str(tmp_path / "n.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"exactmax: error: {spec}: ")
    assert message in err
    assert not (tmp_path / "n.json").exists()


def test_route_and_size_limits_are_usage_errors(tmp_path, capsys):
    assert main(["cpwl", f"{EXAMPLES}/cpwl_dc.json", "-o", str(tmp_path / "n.json"),
                 "--route", "lattice"]) == 2
    assert "kind 'dc' has route(s) dc" in capsys.readouterr().err
    assert main(["cpwl", f"{EXAMPLES}/cpwl_lattice.json", "-o", str(tmp_path / "n.json"),
                 "--route", "dc", "--max-pieces", "5"]) == 2
    assert "more than the limit 5" in capsys.readouterr().err
    spec = write(tmp_path, "s.json", {"format": "exactmax/cpwl", "version": 1, "kind": "dc",
                                      "input_dim": 1, "plus": [{"w": [1], "b": 0}],
                                      "minus": [{"w": [0], "b": 0}]})
    assert main(["cpwl", spec, "-o", str(tmp_path / "n.json"), "--check"]) == 2
    assert "has no domain" in capsys.readouterr().err


# ---------------------------------------------------------------------------- approx-convex

def frac_eval(f, x):
    return sum(to_fraction(c) * eval_mono(e, x) for e, c in f.terms)


def eval_mono(e, x):
    v = F(1)
    for xi, k in zip(x, e):
        v *= xi ** k
    return v


CONVEX = [("x^2 + x*y/2 + y^2", ((-1, 1), (-1, 1)), F(1, 2)),
          ("2*x^2 - 2*x*y + y^2 + x - y/3", ((0, 1), (-1, 2)), F(1, 3)),
          ("0.5*x^2 - x", ((0, 1),), F(1, 10)),
          ("x^4 + x", ((-1, 1),), F(1, 4)),
          ("x^3", ((0, 2),), F(1, 2))]


@pytest.mark.parametrize("expr,box,h", CONVEX)
def test_tangent_network_is_below_f_within_the_exact_error(expr, box, h):
    f = parse_polynomial(expr)
    B = Box(tuple(Q(lo) for lo, _ in box), tuple(Q(hi) for _, hi in box))
    a = approximate_convex(f, B, Q(h.numerator, h.denominator))
    rng = random.Random(expr)
    err, at = to_fraction(a.max_error[0]), [to_fraction(v) for v in a.max_error[1]]
    assert 0 <= err <= to_fraction(a.bound)
    # attained where it says
    assert frac_eval(f, at) - ev(a.net, at)[0] == err
    # below f everywhere, within err, touching at the grid points
    for _ in range(200):
        x = [F(rng.randint(lo * 120, hi * 120), 120) for lo, hi in box]
        gap = frac_eval(f, x) - ev(a.net, x)[0]
        assert 0 <= gap <= err
    corner = [F(lo) for lo, _ in box]
    assert frac_eval(f, corner) == ev(a.net, corner)[0]


def test_quadratic_error_in_one_dimension_is_the_textbook_value():
    # f = c x^2 with tangents at spacing h: the error peaks at the midpoints, c (h/2)^2
    f = parse_polynomial("3*x^2")
    a = approximate_convex(f, Box((Q(0),), (Q(1),)), Q(1, 4))
    assert a.max_error[0] == Q(3, 64)
    assert a.bound == Q(6 * 1, 4) and a.bound_exact   # L = 6, d = 1


def test_sqrt_upper_is_exact_for_squares_and_never_below():
    assert sqrt_upper(Q(49, 4)) == (Q(7, 2), True)
    for r in (Q(2), Q(1, 3), Q(10 ** 6 + 1, 7)):
        s, exact = sqrt_upper(r)
        assert not exact and s * s > r and (s - Q(1, 10 ** 5)) ** 2 < r


@pytest.mark.parametrize("expr,box,message", [
    ("exp(x)", "0,1", "column 1: the function 'exp' is not allowed"),
    ("1/x", "1,2", "is not a polynomial"),
    ("sqrt(2)*x^2", "0,1", "sqrt(2) is not rational"),
    ("pi*x^2", "0,1", "pi is irrational"),
    ("x^2 - y^2", "0,1;0,1", "not positive semidefinite"),
    ("x^3", "-1,1", "not convex on the interval"),
    ("x^4 + x^3 + x", "-1,1", "not convex on the interval"),   # f'' < 0 on (-1/2, 0)
    ("x^4 - x^2", "1/4,1", "not convex on the interval"),      # f'' = 12x^2 - 2 < 0 below 0.41
    ("x^4 + y^4", "0,1;0,1", "cannot be checked exactly"),
    ("x^2", "0,1;0,1", "--box: expected 1 side(s) \"lo,hi\" separated by ';', one per variable "
                       "(x, from EXPR), got 2"),
    ("x^2 +", "0,1", "cannot read the expression"),
])
def test_approx_convex_refuses_with_one_line(expr, box, message, tmp_path, capsys):
    out = tmp_path / "n.json"
    assert main(["approx-convex", expr, f"--box={box}", "--h", "1/4", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err and not out.exists()


def test_approx_convex_cli_json_and_verify(tmp_path, capsys):
    out = tmp_path / "n.json"
    assert main(["approx-convex", "x^2 + y^2", "--box=-1,1;0,1", "--h", "1/2", "-o", str(out),
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["grid_points"] == 5 * 3 and rep["rank"] == 15
    assert rep["bound_is"] in ("exact", "upper bound") and rep["max_error"] == "1/8"
    assert main(["approx-convex", "x^2", "--box", "0,1", "--h", "0", "-o", str(out)]) == 2
    assert main(["approx-convex", "x^2", "--box", "0,1", "--h", "1/1000", "--max-points",
                 "10", "-o", str(out)]) == 2
    assert main(["verify", str(out), "--no-search"]) == 0


def test_convexity_is_decided_by_the_interval_not_the_polynomial():
    # f'' = 12x^2 - 2 vanishes at 1/sqrt(6) ~ 0.408: convex on [1/2, 1], not on [1/4, 1]
    f = parse_polynomial("x^4 - x^2")
    a = approximate_convex(f, Box((Q(1, 2),), (Q(1),)), Q(1, 8))
    assert a.max_error[0] >= 0


# ------------------------------------------------------------- review: safe, bounded parsing

@pytest.mark.parametrize("expr,message", [
    ("__import__('os').system('echo PWNED')", "EXPR: column 12: \"'\" is not allowed"),
    ("__import__(\"pathlib\").Path(\"PWNED\").touch() or x^2",
     "EXPR: column 12: '\"' is not allowed"),
    ("0*__import__(pathlib) + x^2", "EXPR: column 3: the function '__import__' is not allowed"),
    ("0*__import__(pathlib).Path", "EXPR: column 22: '.' is not allowed"),   # whitelist first
    ("x.real", "EXPR: column 2: "),
    ("x[0]^2", "EXPR: column 2: '[' is not allowed"),
    ("lambda: x", "EXPR: column 7: ':' is not allowed"),
    ("x; y", "EXPR: column 2: ';' is not allowed"),
    ("2x^2", "cannot read the expression at column 2: expected an operator"),
    ("x^y", "EXPR: column 2: an exponent with variables"),
    ("x^(1/2)", "is not a polynomial in x"),
])
def test_approx_convex_expr_is_never_evaluated(expr, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "n.json"
    assert main(["approx-convex", expr, "--box=0,1;0,1", "--h", "1/2", "-o", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and message in err, err
    assert not out.exists() and not (tmp_path / "PWNED").exists()
    assert "PWNED" not in captured.out


def test_pwned_in_a_subprocess_prints_nothing_but_the_error(tmp_path):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "exactmax", "approx-convex",
                        "__import__('os').system('echo PWNED')", "--box", "0,1;0,1", "--h",
                        "1/2", "-o", str(tmp_path / "o.json")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""   # `echo PWNED` would print to stdout
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("exactmax: error: EXPR: column 12")


def test_approx_convex_unknown_name_with_vars(tmp_path, capsys):
    out = tmp_path / "n.json"
    assert main(["approx-convex", "x^2 + z", "--vars", "x,y", "--box=0,1;0,1", "--h", "1/2",
                 "-o", str(out)]) == 2
    assert "EXPR: column 7: 'z' is not among the variables x, y (--vars)" in \
        capsys.readouterr().err
    assert main(["approx-convex", "x^2", "--vars", "x,y", "--box=0,1", "--h", "1/2",
                 "-o", str(out)]) == 2
    assert "--box: expected 2 side(s)" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("text,names,terms", [
    ("x^2 + x*y/2 + y^2", None, {(2, 0): Q(1), (1, 1): Q(1, 2), (0, 2): Q(1)}),
    ("-x^2", None, {(2,): Q(-1)}),                    # -(x^2), as in Python
    ("2^-1*x^2^2", None, {(4,): Q(1, 2)}),            # right-associative powers
    ("x**3 - 0.25*x", None, {(3,): Q(1), (1,): Q(-1, 4)}),
    ("1e2*(x + 1)^2", None, {(2,): Q(100), (1,): Q(200), (0,): Q(100)}),
    ("sqrt(9/4)*x + 4^(1/2)", None, {(1,): Q(3, 2), (0,): Q(2)}),
    ("(x - y)^2 - x^2 + 2*x*y", None, {(0, 2): Q(1)}),
    ("pi^2", ("pi",), {(2,): Q(1)}),                  # a declared name is a variable
    ("y^2", ("x", "y"), {(0, 2): Q(1)}),
])
def test_polynomial_parser_reads_what_sympy_syntax_meant(text, names, terms):
    f = parse_polynomial(text, names)
    assert dict(f.terms) == terms


@pytest.mark.parametrize("expr,message", [
    ("x^1000000", "EXPR: column 2: degree 1000000, above the limit 64"),
    ("x^65", "degree 65, above the limit 64"),
    ("x^40*x^40", "EXPR: column 5: degree 80, above the limit 64"),
    ("(x^8)^9", "degree 72, above the limit 64"),
    ("(x+y+z+w+v)^64", "terms, more than the limit 10000"),
    ("2^(10^6)*x^2", "bits, more than the limit 100000"),
    ("x^2 + " + "1+" * 5000 + "1", "characters, more than the limit 10000"),
    ("(" * 150 + "x^2" + ")" * 150, "nested deeper than 100"),
])
def test_approx_convex_size_limits_are_one_line_and_fast(expr, message, tmp_path, capsys):
    import time
    out = tmp_path / "n.json"
    t0 = time.monotonic()
    assert main(["approx-convex", expr, "--box=0,1", "--h", "1/2", "-o", str(out)]) == 2
    assert time.monotonic() - t0 < 5
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err, err
    assert not out.exists()


def test_approx_convex_degree_64_is_accepted():
    f = parse_polynomial("x^64 + (x + 1)^32")
    assert f.degree == 64 and dict(f.terms)[(0,)] == 1
    a = approximate_convex(f, Box((Q(0),), (Q(1),)), Q(1, 2))
    assert a.pieces == 3


def test_approx_convex_expr_starting_with_minus(tmp_path, capsys):
    out = tmp_path / "n.json"
    # as is (argparse alone would read "-x+x^2" as an unknown option)
    assert main(["approx-convex", "-x+x^2", "--box=-1,1", "--h", "1/2", "-o", str(out),
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["expr"] == "-x+x^2" and rep["max_error"] == "1/16"
    # last, after "--" (the documented form that works for every EXPR)
    assert main(["approx-convex", "--box=-1,1", "--h", "1/2", "-o", str(out), "--json", "--",
                 "-x+x^2"]) == 0
    assert json.loads(capsys.readouterr().out)["expr"] == "-x+x^2"
    # options after the value of an option are still options; "-x^2" itself is concave
    assert main(["approx-convex", "--vars", "x", "-x^2", "--box", "0,1", "--h", "1/2",
                 "-o", str(out)]) == 2
    assert "EXPR: not convex" in capsys.readouterr().err


# ------------------------------------------------------------------- review: cpwl --check, -o

DC_1D = {"format": "exactmax/cpwl", "version": 1, "kind": "dc", "input_dim": 2,
         "plus": [{"w": [1, 0], "b": 0}], "minus": [{"w": [0, 1], "b": 0}]}


@pytest.mark.parametrize("domain,message", [
    ({"polyhedron": {"A": [["1", "0"]], "b": ["1"]}}, "the domain polyhedron is unbounded"),
    ({"polyhedron": {"A": [["1", "0"], ["-1", "0"], ["0", "1"], ["0", "-1"]],
                     "b": ["-1", "0", "1", "1"]}}, "the domain polyhedron is empty"),
])
def test_check_on_an_unbounded_or_empty_domain_is_an_input_error(domain, message, tmp_path,
                                                                 capsys):
    spec = write(tmp_path, "s.json", dict(DC_1D, domain=domain))
    net, ref = tmp_path / "n.json", tmp_path / "r.json"
    assert main(["cpwl", spec, "-o", str(net), "--reference", str(ref), "--check"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(
        f"exactmax: error: {spec}: domain: --check needs a bounded, non-empty domain: "), err
    assert message in err
    assert not net.exists() and not ref.exists()
    # without --check the network is still written (the domain is the network's)
    assert main(["cpwl", spec, "-o", str(net)]) == 0 and net.exists()


def test_check_preconditions_are_refused_before_writing(tmp_path, capsys):
    spec = write(tmp_path, "s.json", DC_1D)
    net = tmp_path / "n.json"
    assert main(["cpwl", spec, "-o", str(net), "--check"]) == 2
    assert "has no domain" in capsys.readouterr().err and not net.exists()
    assert main(["cpwl", f"{EXAMPLES}/cpwl_dc.json", "-o", str(net), "--check", "--timeout",
                 "0"]) == 2
    assert "--timeout: expected a positive number" in capsys.readouterr().err
    assert not net.exists()


def test_output_equal_to_the_spec_is_refused(tmp_path, capsys, monkeypatch):
    spec = write(tmp_path, "s.json", DC_1D)
    before = open(spec).read()
    monkeypatch.chdir(tmp_path)
    for argv in (["-o", spec], ["-o", "s.json"], ["-o", "./s.json"],
                 ["-o", str(tmp_path / "n.json"), "--reference", "s.json"]):
        assert main(["cpwl", spec] + argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "the same file as SPEC.json" in err, err
        assert "would overwrite that" in err
    assert main(["cpwl", spec, "-o", "n.json", "--reference", "n.json"]) == 2
    assert "--reference names the same file as -o" in capsys.readouterr().err
    assert open(spec).read() == before and not (tmp_path / "n.json").exists()
