"""export-onnx: the exported graph, run in onnxruntime, agrees with the kernel's exact
evaluation (float64: relative error below 1e-9, at random points and at tie points of Maxout
units and of hardmax attention; float32: within a forward error bound); a dyadic Maxout network
exported in float64 is read back by the ONNX reader as the same network; bad input refused."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from exactmax.export.onnxmodel import OPSET, export_onnx, nearest_float, nearest_floats
from exactmax.io import load_model, model_to_json
from exactmax.io.onnxfile import import_onnx
from exactmax.kernel.affine import Affine
from exactmax.kernel.maxout import Layer, MaxoutNetwork, Piece, Unit, evaluate_maxout
from exactmax.kernel.polyhedron import Box
from exactmax.kernel.rational import Q
from exactmax.kernel.transformer import (
    SOFTMAX,
    Attention,
    FeedForward,
    Head,
    Readout,
    Transformer,
    evaluate_transformer,
)

TOL64 = 1e-9


def _run(*args):
    """The command run in-process (stdout, stderr and exit status)."""
    from exactmax.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


# ----------------------------------------------------------------------------- models


def _rat(rng, dyadic=False, big=6):
    den = rng.choice([1, 2, 4, 8]) if dyadic else rng.choice([1, 2, 3, 5, 7, 10])
    return Q(rng.randint(-big, big), den)


def maxout(rng, d=3, widths=(4, 3), ranks=None, dyadic=False, output=True) -> MaxoutNetwork:
    """A random Maxout network; ``ranks`` per layer, a list of per-unit piece counts or None
    (random ranks 1..3, so that runs of unequal ranks occur)."""
    layers, width = [], d
    for l, n in enumerate(widths):
        ks = ranks[l] if ranks else [rng.randint(1, 3) for _ in range(n)]
        units = tuple(
            Unit(
                tuple(
                    Piece(tuple(_rat(rng, dyadic) for _ in range(width)), _rat(rng, dyadic))
                    for _ in range(k)
                )
            )
            for k in ks
        )
        layers.append(Layer(units))
        width = n
    out = None
    if output:
        W = tuple(tuple(_rat(rng, dyadic) for _ in range(width)) for _ in range(2))
        out = Affine(W, tuple(_rat(rng, dyadic) for _ in range(2)), width)
    return MaxoutNetwork(d, tuple(layers), out)


def _mat(rng, rows, cols, dyadic=False):
    return tuple(tuple(_rat(rng, dyadic, 3) for _ in range(cols)) for _ in range(rows))


def transformer(rng, d=3, dm=5, n=4, token=0, dyadic=False) -> Transformer:
    """A random hardmax Transformer: FF, attention (2 heads), FF, attention (1 head)."""

    def ff(width):
        return FeedForward(
            Affine(
                _mat(rng, width, dm, dyadic), tuple(_rat(rng, dyadic, 3) for _ in range(width)), dm
            ),
            Affine(
                _mat(rng, dm, width, dyadic), tuple(_rat(rng, dyadic, 3) for _ in range(dm)), width
            ),
        )

    def att(heads):
        hs = []
        for _ in range(heads):
            s = rng.randint(1, 2)
            scale = Q(rng.choice([1, 2, 3]), rng.choice([1, 2, 3]))
            hs.append(
                Head(
                    _mat(rng, s, dm, dyadic),
                    _mat(rng, s, dm, dyadic),
                    _mat(rng, s, dm, dyadic),
                    _mat(rng, dm, s, dyadic),
                    scale,
                )
            )
        return Attention(tuple(hs))

    return Transformer(
        d,
        dm,
        _mat(rng, dm, d, dyadic),
        _mat(rng, n, dm, dyadic),
        (ff(6), att(2), ff(3), att(1)),
        Readout(
            Affine(_mat(rng, 2, dm, dyadic), (_rat(rng, dyadic), _rat(rng, dyadic)), dm), token
        ),
    )


def tie_transformer(scale=None, token=0) -> Transformer:
    """Tokens (x, p_t) with p_0 = (1, 0), p_1 = (0, 1), p_2 = (0, 3); one head scores
    s(t', t) = scale * x_0 * p_t'[0]: for x_0 < 0 keys 1 and 2 tie (value 1 and 3: the average
    is 2, ArgMax would give 1), for x_0 = 0 all three tie (average 4/3), for x_0 > 0 key 0 wins.
    The tied keys are bit-identical, so the float scores tie too.  (Scale 1/3 by default.)"""
    z, o = Q(0), Q(1)
    scale = Q(1, 3) if scale is None else scale
    E = ((o, z), (z, o), (z, z), (z, z))
    P = ((z, z, o, z), (z, z, z, o), (z, z, z, Q(3)))
    head = Head(((o, z, z, z),), ((z, z, o, z),), ((z, z, z, o),), ((z,), (z,), (z,), (o,)), scale)
    second = Head(((z, o, z, z),), ((z, z, z, o),), ((z, z, o, z),), ((o,), (z,), (z,), (z,)), Q(1))
    R = Affine(((z, z, z, o), (o, z, z, z), (z, o, z, z)), (z, z, z), 4)
    return Transformer(2, 4, E, P, (Attention((head, second)),), Readout(R, token))


# ----------------------------------------------------------------------------- running


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def run(model_proto, points, dtype=np.float64) -> np.ndarray:
    x = np.array([[float(Fraction(int(v.p), int(v.q))) for v in p] for p in points], dtype=dtype)
    return session(model_proto).run(None, {"x": x})[0].astype(np.float64)


def exact(model, points) -> np.ndarray:
    ev = evaluate_maxout if isinstance(model, MaxoutNetwork) else evaluate_transformer
    return np.array([[float(Fraction(int(v.p), int(v.q))) for v in ev(model, p)] for p in points])


def dyadic_points(rng, d, count, bits=10):
    """Points with coordinates k / 2^bits in [-1, 1]: exactly float32 and float64 numbers."""
    return [[Q(rng.randint(-(2**bits), 2**bits), 2**bits) for _ in range(d)] for _ in range(count)]


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max(1, |want|), per output, the largest."""
    return float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))))


# ----------------------------------------------------------------------------- float64


@pytest.mark.parametrize("seed", range(4))
def test_maxout_float64_matches_exact_evaluation_at_random_points(seed):
    rng = random.Random(seed)
    net = maxout(rng, d=3, widths=(5, 4, 3))
    m, rep = export_onnx(net, "float64")
    assert not rep.rounding.exact  # thirds, fifths, sevenths, tenths
    pts = dyadic_points(rng, 3, 40)
    assert rel_error(run(m, pts), exact(net, pts)) < TOL64


def with_ties(net: MaxoutNetwork, x0, all_pieces_every=2) -> MaxoutNetwork:
    """The network with its biases moved so that at x0, in every unit, pieces 0 and 1 tie and
    are the maximum (every ``all_pieces_every``-th unit: all its pieces tie)."""
    layers, h = [], tuple(x0)
    for layer in net.layers:
        units = []
        for i, u in enumerate(layer.units):
            vals = [sum((a * b for a, b in zip(p.w, h)), Q(0)) + p.b for p in u.pieces]
            top = vals[0]
            ps = [u.pieces[0]]
            for j, p in enumerate(u.pieces[1:], 1):
                if j == 1 or i % all_pieces_every == 0:
                    shift = top - vals[j]
                else:
                    shift = min(Q(0), top - vals[j] - 1)
                ps.append(Piece(p.w, p.b + shift))
            units.append(Unit(tuple(ps)))
        layers.append(Layer(tuple(units)))
        h = evaluate_maxout(MaxoutNetwork(net.input_dim, tuple(layers)), x0)
    return MaxoutNetwork(net.input_dim, tuple(layers), net.output)


@pytest.mark.parametrize("seed", range(4))
def test_maxout_float64_at_tie_points_of_its_units(seed):
    rng = random.Random(100 + seed)
    base = maxout(rng, d=3, widths=(4, 4, 3), ranks=[[2, 3, 3, 2], [3, 2, 2, 3], [2, 2, 3]])
    for x0 in dyadic_points(rng, 3, 3):
        net = with_ties(base, x0)
        # the construction ties pieces: checked exactly before trusting it as a tie point
        h = tuple(x0)
        for layer in net.layers:
            for u in layer.units:
                v = [sum((a * b for a, b in zip(p.w, h)), Q(0)) + p.b for p in u.pieces]
                assert v[0] == v[1] == max(v)
            h = tuple(
                max(sum((a * b for a, b in zip(p.w, h)), Q(0)) + p.b for p in u.pieces)
                for u in layer.units
            )
        m, _ = export_onnx(net, "float64")
        assert rel_error(run(m, [x0]), exact(net, [x0])) < TOL64


@pytest.mark.parametrize("seed,token", [(0, 0), (1, 2), (2, None), (3, 1)])
def test_transformer_float64_matches_exact_evaluation_at_random_points(seed, token):
    rng = random.Random(seed)
    tf = transformer(rng, token=token)
    m, rep = export_onnx(tf, "float64")
    ops = rep.operators
    assert ops["ReduceMax"] == 3 and ops["Equal"] == 3 and ops["ReduceSum"] == 3
    assert "ArgMax" not in ops
    pts = dyadic_points(rng, 3, 40)
    assert rel_error(run(m, pts), exact(tf, pts)) < TOL64


@pytest.mark.parametrize("token", [0, 1, None])
def test_transformer_float64_at_attention_ties_averages_the_tied_keys(token):
    tf = tie_transformer(token=token)
    m, _ = export_onnx(tf, "float64")
    rng = random.Random(5)
    # x_0 < 0: keys 1 and 2 tie; x_0 = 0: all three tie; x_0 > 0: no tie
    pts = [[Q(-k, 8), Q(j, 16)] for k in (1, 5, 8) for j in (-3, 0, 7)]
    pts += [[Q(0), Q(j, 16)] for j in (-3, 0, 7)] + [[Q(k, 8), Q(1, 4)] for k in (1, 3)]
    pts += dyadic_points(rng, 2, 10)
    want, got = exact(tf, pts), run(m, pts)
    assert rel_error(got, want) < TOL64
    if token == 0:  # the tied head's value mean, read directly: 2 (x_0 < 0), 4/3 (x_0 = 0)
        assert list(want[:3, 0]) == [2.0] * 3 and want[9, 0] == float(Fraction(4, 3))


def test_argmax_would_fail_the_tie_test():
    """The tie points discriminate: the same graph with ArgMax (one index) in place of the
    averaged hardmax differs from the exact value there."""
    tf = tie_transformer()
    m, _ = export_onnx(tf, "float64")
    g = m.graph
    eq = [n for n in g.node if n.op_type == "Equal"][0]
    top = eq.input[1]
    scores = eq.input[0]
    # one-hot of ArgMax over the keys instead of the tie set
    nodes = list(g.node)
    i = nodes.index(eq)
    am = onnx.helper.make_node("ArgMax", [scores], ["am"], axis=-1, keepdims=1)
    shape = onnx.helper.make_node("Shape", [scores], ["sh"])
    zeros = onnx.helper.make_node(
        "ConstantOfShape",
        ["sh"],
        ["zz"],
        value=onnx.helper.make_tensor("v", onnx.TensorProto.DOUBLE, [1], [0.0]),
    )
    ones = onnx.helper.make_node(
        "Constant",
        [],
        ["one"],
        value=onnx.helper.make_tensor("o", onnx.TensorProto.DOUBLE, [1, 1, 1], [1.0]),
    )
    scatter = onnx.helper.make_node("ScatterElements", ["zz", "am", "one_b"], ["onehot"], axis=-1)
    expand = onnx.helper.make_node("Expand", ["one", "amshape"], ["one_b"])
    amshape = onnx.helper.make_node("Shape", ["am"], ["amshape"])
    eqb = onnx.helper.make_node("Cast", ["onehot"], [eq.output[0]], to=onnx.TensorProto.BOOL)
    del top
    nodes[i : i + 1] = [am, shape, zeros, ones, amshape, expand, scatter, eqb]
    del g.node[:]
    g.node.extend(nodes)
    pts = [[Q(-1, 8), Q(0)], [Q(0), Q(1, 4)]]
    assert rel_error(run(m, pts), exact(tf, pts)) > 0.1


# ----------------------------------------------------------------------------- float32

U32 = 2.0**-24  # float32's unit roundoff


def float32_bound(net: MaxoutNetwork, x) -> float:
    """A bound on |N_float32(x) - N(x)| (inf norm) for the exported float32 graph at a point x
    that float32 represents exactly.  Per layer, with h the exact input of the layer, e a bound
    on the computed input's error, n its length and gamma = (n+1)u / (1 - (n+1)u) (a dot product
    of n terms plus a bias, in any order, FMA or not):
        |z^ - z| <= |w| e + (u + gamma (1 + u)) (|w| (|h| + e) + |b|)
    (u for rounding w and b to float32, gamma for the arithmetic); max is 1-Lipschitz and exact
    in floats.  Doubled against the float64 arithmetic of the bound itself."""
    h, e = [abs(float(Fraction(int(v.p), int(v.q)))) for v in x], 0.0
    maps = [[(p.w, p.b) for u in l.units for p in u.pieces] for l in net.layers]
    exact_h = [tuple(x)]
    for i in range(len(net.layers)):
        exact_h.append(evaluate_maxout(MaxoutNetwork(net.input_dim, net.layers[: i + 1]), x))
    if net.output is not None:
        maps.append(list(zip(net.output.W, net.output.b)))
    for k, pieces in enumerate(maps):
        h = [abs(float(Fraction(int(v.p), int(v.q)))) for v in exact_h[k]]
        n = len(h)
        gamma = (n + 1) * U32 / (1 - (n + 1) * U32)
        e = max(
            sum(abs(float(a)) for a in w) * e
            + (U32 + gamma * (1 + U32))
            * (sum(abs(float(a)) * (hv + e) for a, hv in zip(w, h)) + abs(float(b)))
            for w, b in pieces
        )
    return 2 * e


@pytest.mark.parametrize("seed", range(3))
def test_maxout_float32_within_the_forward_error_bound(seed):
    rng = random.Random(seed)
    net = maxout(rng, d=3, widths=(5, 4, 3))
    m, rep = export_onnx(net, "float32")
    assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    pts = dyadic_points(rng, 3, 20)
    got, want = run(m, pts, np.float32), exact(net, pts)
    for g_, w_, p in zip(got, want, pts):
        bound = float32_bound(net, p)
        assert np.max(np.abs(g_ - w_)) <= bound, (g_, w_, bound)
    assert rel_error(got, want) > 0  # float32 really is used: not exact at these points


def test_float32_bound_can_fail():
    """The bound is not vacuous: the float32 graph of a network whose output bias is off by
    1/100 is caught (and the bound stays below 10^-4 relative to the outputs)."""
    rng = random.Random(0)
    net = maxout(rng, d=3, widths=(5, 4, 3))
    m, _ = export_onnx(net, "float32")
    A = net.output
    off = MaxoutNetwork(
        net.input_dim, net.layers, Affine(A.W, (A.b[0] + Q(1, 100),) + A.b[1:], A.in_dim)
    )
    for p in dyadic_points(rng, 3, 5):
        got, want = run(m, [p], np.float32)[0], exact(off, [p])[0]
        assert float32_bound(off, p) < 1e-4 * max(1.0, float(np.max(np.abs(want))))
        assert np.max(np.abs(got - want)) > float32_bound(off, p)


TOL32_TF = 2.0**10 * U32  # see test_transformer_float32


def test_transformer_float32():
    """float32: 4 sub-layers of dot products of at most 6 terms with weights |w| <= 3 and
    sums over 4 tokens; each sub-layer multiplies the relative error by at most about
    (terms + 2) * (1 + max |w|) < 40, so 2^10 u (6e-5) relative to max(1, |y|) bounds the
    error, unless a hardmax winner changes: the random points' score gaps are far above 1e-4
    (a flipped winner would show as an O(1) error and fail)."""
    rng = random.Random(11)
    tf = transformer(rng, token=None)
    m, _ = export_onnx(tf, "float32")
    pts = dyadic_points(rng, 3, 30)
    err = rel_error(run(m, pts, np.float32), exact(tf, pts))
    assert 0 < err < TOL32_TF


def test_transformer_float32_ties_stay_ties():
    tf = tie_transformer(scale=Q(1))
    m, rep = export_onnx(tf, "float32")
    assert rep.rounding.exact
    pts = [[Q(-1, 8), Q(3, 4)], [Q(0), Q(1, 4)], [Q(1, 2), Q(0)]]
    assert rel_error(run(m, pts, np.float32), exact(tf, pts)) < 1e-6


# ----------------------------------------------------------------------------- rounding


def test_nearest_float32_is_correctly_rounded_where_double_rounding_is_not():
    v = Q(2**60 + 2**36 + 1, 2**60)  # 1 + 2^-24 + 2^-60: nearer 1 + 2^-23 than 1
    assert float(np.float32(float(Fraction(int(v.p), int(v.q))))) == 1.0  # double rounding
    assert nearest_float(v, "float32") == 1 + 2.0**-23
    assert nearest_float(Q(2**24 + 1, 2**24), "float32") == 1.0  # a tie: to even
    assert nearest_float(Q(2**24 + 3, 2**24), "float32") == 1 + 2.0**-22  # a tie: to even
    rng = random.Random(3)
    for _ in range(300):
        v = Q(rng.randint(-(10**12), 10**12), rng.randint(1, 10**9))
        f = np.float32(nearest_float(v, "float32"))
        err = abs(Fraction(float(f)) - Fraction(int(v.p), int(v.q)))
        for nb in (np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))):
            assert err <= abs(Fraction(float(nb)) - Fraction(int(v.p), int(v.q)))
    with pytest.raises(OverflowError):
        nearest_float(Q(2**128), "float32")
    assert nearest_float(Q(2**128 - 2**104), "float32") == float(np.finfo(np.float32).max)


def test_the_vectorised_rounding_is_the_scalar_one():
    """nearest_floats (used for every tensor) rounds each value as nearest_float does, the
    float64 half-way cases of float32 included, and reports which values changed."""
    rng = random.Random(9)
    tricky = [
        Q(2**60 + 2**36 + 1, 2**60),
        Q(-(2**60 + 2**36 + 1), 2**60),
        Q(2**24 + 1, 2**24),
        Q(3 * 2**29 + 1, 2**54),
        Q(1, 3),
        Q(5),
        Q(3, 2**150),
    ]
    values = tricky + [
        Q(rng.randint(-(10**15), 10**15), rng.randint(1, 10**12)) for _ in range(500)
    ]
    for dtype in ("float32", "float64"):
        out, changed, overflow = nearest_floats(values, dtype)
        assert overflow is None
        want = [nearest_float(v, dtype) for v in values]
        assert out.tolist() == want
        assert changed == [k for k, v in enumerate(values) if Q(*want[k].as_integer_ratio()) != v]
    assert nearest_floats([Q(1), Q(2**130), Q(2**1100)], "float32")[2] == 1
    assert nearest_floats([Q(1), Q(2**130), Q(2**1100)], "float64")[2] == 2


def test_the_report_gives_the_largest_rounding_error_exactly():
    z, o = Q(0), Q(1)
    net = MaxoutNetwork(
        2,
        (Layer((Unit((Piece((Q(1, 3), o), z), Piece((z, Q(-1, 10)), Q(1, 2)))),)),),
        Affine(((Q(7),),), (Q(2, 7),), 1),
    )
    for dtype, cast in (("float64", float), ("float32", lambda f: float(np.float32(f)))):
        _, rep = export_onnx(net, dtype)
        errs = {
            place: abs(Fraction(cast(float(v))) - v)
            for place, v in [
                ("layers[0].units[0].pieces[0].w[0]", Fraction(1, 3)),
                ("layers[0].units[0].pieces[1].w[1]", Fraction(-1, 10)),
                ("output.b[0]", Fraction(2, 7)),
            ]
        }
        place = max(errs, key=errs.get)
        js = rep.as_json()
        assert (js["weights"], js["weights_rounded"], js["exact"]) == (8, 3, False)
        assert js["max_rounding_error_at"] == place
        assert Fraction(js["max_abs_rounding_error_exact"]) == errs[place]


# ----------------------------------------------------------------------------- round trip


def _dyadic_net(seed, output=True):
    rng = random.Random(seed)
    return maxout(
        rng, d=3, widths=(5, 4), ranks=[[2, 2, 1, 3, 3], [1, 2, 2, 2]], dyadic=True, output=output
    )


@pytest.mark.parametrize("output", [True, False])
def test_dyadic_maxout_float64_round_trips_through_the_onnx_reader(tmp_path, output):
    net = _dyadic_net(1, output)
    src = tmp_path / "net.json"
    src.write_text(json.dumps(model_to_json(net)))
    r = _run("export-onnx", src, "-o", tmp_path / "net.onnx", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["exact"] is True
    back, _ = import_onnx(str(tmp_path / "net.onnx"))
    assert back == net  # layers, pieces, weights and output map, exactly
    r = _run("import", tmp_path / "net.onnx", "-o", tmp_path / "back.json")
    assert r.returncode == 0, r.stderr
    assert load_model(str(tmp_path / "back.json")) == net


def test_a_rounded_network_reads_back_as_its_rounded_weights(tmp_path):
    net = maxout(random.Random(2), d=2, widths=(3,))
    m, _ = export_onnx(net, "float32")
    p = tmp_path / "n.onnx"
    p.write_bytes(m.SerializeToString())
    back, _ = import_onnx(str(p))
    assert back != net
    for u, v in zip(back.layers[0].units, net.layers[0].units):
        for a, b in zip(u.pieces, v.pieces):
            assert a.b == Q(*float(np.float32(nearest_float(b.b, "float32"))).as_integer_ratio())


def test_an_exported_transformer_is_refused_by_the_reader_naming_the_node(tmp_path):
    """The reader's operator set has no product of two input-dependent tensors (the attention
    scores) nor Equal/Cast/ReduceSum: a Transformer does not round-trip."""
    m, _ = export_onnx(tie_transformer(), "float64")
    p = tmp_path / "t.onnx"
    p.write_bytes(m.SerializeToString())
    r = _run("import", p, "-o", tmp_path / "t.json")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "MatMul" in r.stderr and "bilinear" in r.stderr


# ----------------------------------------------------------------------------- command


def test_the_command_writes_a_checked_model_and_reports(tmp_path):
    net = maxout(random.Random(4), d=2, widths=(3,))
    net = MaxoutNetwork(net.input_dim, net.layers, net.output, Box((Q(-1), Q(-1)), (Q(1), Q(1))))
    src = tmp_path / "n.json"
    src.write_text(json.dumps(model_to_json(net)))
    out = tmp_path / "n.onnx"
    r = _run("export-onnx", src, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "rounded to the nearest float64" in r.stdout and "largest absolute rounding" in r.stdout
    m = onnx.load(str(out))
    onnx.checker.check_model(m, full_check=True)
    assert [o.version for o in m.opset_import] == [OPSET]
    props = {p.key: p.value for p in m.metadata_props}
    assert json.loads(props["exactmax_domain"]) == {
        "box": {"lower": ["-1", "-1"], "upper": ["1", "1"]}
    }
    r = _run("export-onnx", src, "-o", out, "--dtype", "float32", "--json")
    js = json.loads(r.stdout)
    assert js["dtype"] == "float32" and js["opset"] == OPSET and "exactmax_version" in js
    assert onnx.load(str(out)).graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    exact_src = tmp_path / "e.json"
    exact_src.write_text(json.dumps(model_to_json(_dyadic_net(0))))
    r = _run("export-onnx", exact_src, "-o", out)
    assert "weights: exact" in r.stdout


def _refused(r, expect):
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("exactmax: error: ") and expect in lines[0], (
        lines
    )


def test_bad_input_is_refused_and_nothing_is_written(tmp_path):
    src = tmp_path / "n.json"
    src.write_text(json.dumps(model_to_json(_dyadic_net(0))))
    before = src.read_bytes()
    _refused(_run("export-onnx", src, "-o", src), "names the same file")
    link = tmp_path / "link.json"
    os.symlink(src, link)
    _refused(_run("export-onnx", src, "-o", link), "names the same file")
    assert src.read_bytes() == before
    out = tmp_path / "out.onnx"
    dom = tmp_path / "dom.json"
    dom.write_text(
        '{"format": "exactmax/domain", "version": 1, "box": {"lower": [0], "upper": [1]}}'
    )
    _refused(_run("export-onnx", dom, "-o", out), "domain file")
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    _refused(_run("export-onnx", text, "-o", out), "notes.txt")
    _refused(_run("export-onnx", tmp_path / "missing.json", "-o", out), "missing.json")
    _refused(_run("export-onnx", src, "-o", tmp_path / "no" / "dir.onnx"), "does not exist")
    # a softmax Transformer, and a weight beyond float32
    tf = tie_transformer()
    soft = Transformer(
        tf.input_dim,
        tf.d_model,
        tf.embedding,
        tf.positions,
        (Attention(tf.sublayers[0].heads, SOFTMAX),),
        tf.readout,
    )
    sp = tmp_path / "soft.json"
    sp.write_text(json.dumps(model_to_json(soft)))
    _refused(_run("export-onnx", sp, "-o", out), "sublayers[0].attention.kind: softmax attention")
    big = MaxoutNetwork(1, (Layer((Unit((Piece((Q(2**200),), Q(0)),)),)),))
    bp = tmp_path / "big.json"
    bp.write_text(json.dumps(model_to_json(big)))
    _refused(
        _run("export-onnx", bp, "-o", out, "--dtype", "float32"),
        "layers[0].units[0].pieces[0].w[0]: ",
    )
    assert not out.exists() and not [f for f in os.listdir(tmp_path) if f.startswith(".exactmax-")]
    assert _run("export-onnx", bp, "-o", out).returncode == 0  # float64 holds 2^200
    with pytest.raises(SystemExit) as e:  # argparse's usage error
        _run("export-onnx", src, "-o", out, "--dtype", "float16")
    assert e.value.code == 2


def test_the_compiled_transformer_exported_computes_its_maxout_network(tmp_path):
    """exactmax compile's Transformer (docs/notes/construction.md §2), exported in float64, agrees with
    the exact Maxout network at random points (its one-hot positions and gate constants
    included)."""
    rng = random.Random(21)
    net = maxout(rng, d=2, widths=(3, 2), ranks=[[2, 3, 2], [2, 2]])
    net = MaxoutNetwork(net.input_dim, net.layers, net.output, Box((Q(-1), Q(-1)), (Q(1), Q(1))))
    src, tf = tmp_path / "n.json", tmp_path / "t.json"
    src.write_text(json.dumps(model_to_json(net)))
    assert _run("compile", src, "-o", tf).returncode == 0
    r = _run("export-onnx", tf, "-o", tmp_path / "t.onnx", "--json")
    assert r.returncode == 0, r.stderr
    m = onnx.load(str(tmp_path / "t.onnx"))
    pts = dyadic_points(rng, 2, 30)
    assert rel_error(run(m, pts), exact(net, pts)) < TOL64
    assert rel_error(run(m, pts), exact(load_model(str(tf)), pts)) < TOL64


def test_rounding_places_name_the_transformer_entry():
    tf = tie_transformer(scale=Q(1, 3))
    _, rep = export_onnx(tf, "float64")
    assert rep.rounding.rounded == 1
    assert rep.rounding.max_place == "sublayers[0].attention.heads[0].scale"
    tf2 = Transformer(tf.input_dim, tf.d_model, tf.embedding,
                      tf.positions[:1] + ((Q(0), Q(0), Q(0), Q(1000, 3)),) + tf.positions[2:],
                      tf.sublayers, tf.readout)  # fmt: skip
    _, rep = export_onnx(tf2, "float32")
    assert rep.rounding.rounded == 2 and rep.rounding.max_place == "positions[1][3]"
