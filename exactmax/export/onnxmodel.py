"""The ONNX model of a Maxout network or a hardmax Transformer (``exactmax export-onnx``).

The graph computes, in the floating-point type chosen (float32 or float64), the formulas of
docs/notes/construction.md §1 with every exact rational weight replaced by the nearest float of
that type (round to nearest, ties to even):

- Maxout network, input x of shape (batch, d):
  h^0 = x, h^l_i = max_j (w^l_{i,j} . h^{l-1} + b^l_{i,j}), y = A h^D + c.  Consecutive units
  of the same rank k form one run: MatMul + Add give the k pieces of each unit of the run,
  Reshape to (batch, units, k) and ReduceMax over the last axis give the units; the runs of a
  layer are concatenated.  (No unit is padded with a repeated piece, so the ONNX reader gives
  back exactly the network written: ``io/onnxfile.py`` makes one Maxout unit per element of a
  ReduceMax.)
- Transformer, input x of shape (batch, d); tokens X of shape (batch, n, d_m), row t = token t:
  X = x E^T + P; a feed-forward sub-layer X <- X + ReLU(X W_1^T + b_1) W_2^T + b_2; an attention
  sub-layer X <- X + sum_h A_h (X W_V^T) W_O^T with S_h = lambda_h (X W_Q^T)(X W_K^T)^T and
  A_h = hardmax of each row of S_h *averaged over ties*:
  A = Cast(Equal(S, ReduceMax(S, keys))) / ReduceSum(Cast(Equal(...)), keys) (never ArgMax,
  which picks one key); read-out y = R z + r with z = X[:, t*] (Gather) or the token mean
  (ReduceMean).

Opset 18 of the default domain (ReduceMax and ReduceMean take their axes as an input), IR
version 8.  The graph is float arithmetic: its outputs approximate the exact model's, and its
hardmax ties are ties of the float scores (exact ties stay ties when the float computation of
the tied scores is exact, e.g. dyadic weights and inputs of few bits, or bit-identical keys).

Untrusted output: nothing here says "proved"; the report states the weights' rounding.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..io.numbers import q_str
from ..kernel.affine import SparseVector
from ..kernel.maxout import MaxoutNetwork
from ..kernel.rational import Q
from ..kernel.transformer import HARDMAX, FeedForward, Transformer

OPSET = 18
IR_VERSION = 8
DTYPES = ("float32", "float64")


class ExportRefused(Exception):
    """A model that cannot be written as asked: ``place`` (a JSON path) and the reason."""

    def __init__(self, place: str, message: str):
        super().__init__(message)
        self.place, self.message = place, message


@dataclass
class Rounding:
    """How the exact weights became floats: how many, how many changed, the largest absolute
    change |fl(v) - v| (exact) and where it happened."""

    weights: int = 0
    rounded: int = 0
    max_error: Q = field(default_factory=lambda: Q(0))
    max_place: str | None = None
    max_value: Q | None = None

    @property
    def exact(self) -> bool:
        return self.rounded == 0


def nearest_float(v: Q, dtype: str) -> float:
    """The float of ``dtype`` nearest to the rational v (ties to an even significand), or
    OverflowError when v rounds beyond the largest finite float of that type.

    float64: p / q of Python integers is correctly rounded.  float32: rounding the float64 to
    float32 can be off by one ulp (double rounding), so the float32 neighbours are compared
    exactly."""
    p, q = int(v.p), int(v.q)
    f = p / q  # correctly rounded to float64; OverflowError beyond its range
    if dtype == "float64":
        return f
    ftype, itype = np.float32, np.uint32
    exact = Fraction(p, q)
    if abs(exact) >= 2**128 - 2**103:  # half-way between float32's largest and 2^128
        raise OverflowError
    with np.errstate(over="ignore"):
        c = ftype(f)
        around = (c, np.nextafter(c, ftype(np.inf)), np.nextafter(c, ftype(-np.inf)))
    best = None
    for cand in around:
        if not np.isfinite(cand):
            continue
        err = abs(Fraction(float(cand)) - exact)
        even = int(np.array(cand, dtype=ftype).view(itype)) % 2 == 0
        if best is None or (err, not even) < best[0]:
            best = ((err, not even), cand)
    assert best is not None
    return float(best[1])


def nearest_floats(values, dtype: str) -> tuple[np.ndarray, list[int], int | None]:
    """The nearest floats of ``dtype`` to the rationals ``values`` (as ``nearest_float``,
    vectorised), the indices of those that changed, and the index of the first one beyond the
    type's range (None if none).

    float32 without double rounding: the float64 f of v is correctly rounded, so no float32
    half-way point (a float64 number) lies strictly between v and f; rounding f to float32 is
    then correct unless f *is* a half-way point, and those (rare) values are rounded exactly."""
    pq = [(int(v.p), int(v.q)) for v in values]
    f64 = np.empty(len(pq), dtype=np.float64)
    overflow = None
    for i, (p, q) in enumerate(pq):
        try:
            f64[i] = p / q
        except OverflowError:
            overflow = i
            break
    if dtype == "float32":
        big = np.flatnonzero(np.abs(f64[:overflow]) >= float(np.finfo(np.float32).max))
        overflow = next((int(i) for i in big if abs(Fraction(*pq[i])) >= 2**128 - 2**103), overflow)
    if overflow is not None:
        return f64, [], overflow
    if dtype == "float64":
        out = f64
    else:
        with np.errstate(over="ignore"):
            out = f64.astype(np.float32)
            lo = np.minimum(out, np.nextafter(out, np.float32(-np.inf)))
            hi = np.maximum(out, np.nextafter(out, np.float32(np.inf)))
        below = f64 < out.astype(np.float64)
        other = np.where(below, lo, hi).astype(np.float64)
        half = (out.astype(np.float64) + other) / 2  # exact: float32 numbers have 24 bits
        for i in np.flatnonzero((f64 == half) & (f64 != out.astype(np.float64))):
            out[i] = nearest_float(values[i], "float32")
    changed = [
        i for i, ((p, q), x) in enumerate(zip(pq, out.tolist())) if x.as_integer_ratio() != (p, q)
    ]
    return out, changed, None


class _Builder:
    """The nodes, initializers and rounding record of one graph."""

    def __init__(self, dtype: str, source: str):
        from onnx import TensorProto

        self.dtype = dtype
        self.np_dtype = np.float32 if dtype == "float32" else np.float64
        self.elem = TensorProto.FLOAT if dtype == "float32" else TensorProto.DOUBLE
        self.source = source
        self.nodes: list = []
        self.inits: list = []
        self.rounding = Rounding()
        self._names: Counter = Counter()

    def name(self, stem: str) -> str:
        self._names[stem] += 1
        return f"{stem}_{self._names[stem]}"

    def _floats(self, values: list, place) -> np.ndarray:
        """The nearest floats of the values, recorded in ``rounding``; ``place(k)`` names value
        k (called only for the report and for errors)."""
        out, changed, overflow = nearest_floats(values, self.dtype)
        if overflow is not None:
            v = values[overflow]
            raise ExportRefused(
                place(overflow),
                f"{q_str(v) if len(q_str(v)) < 60 else 'the weight'} is beyond the largest "
                f"finite {self.dtype}"
                + ("; export with --dtype float64" if self.dtype == "float32" else ""),
            )
        r = self.rounding
        r.weights += len(values)
        r.rounded += len(changed)
        if changed:
            # |fl(v) - v| = |a q - p b| / (b q) rounded to a float (rounding is monotone)
            # finds the candidates, compared exactly
            approx = {}
            for k in changed:
                a, b = float(out[k]).as_integer_ratio()
                p, q = int(values[k].p), int(values[k].q)
                approx[k] = abs(a * q - p * b) / (b * q)
            top = max(approx.values())
            errs = {
                k: abs(Fraction(float(out[k])) - Fraction(int(values[k].p), int(values[k].q)))
                for k in changed
                if approx[k] == top
            }
            k = max(errs, key=lambda k: errs[k])
            err = Q(errs[k].numerator, errs[k].denominator)
            if err > r.max_error:
                r.max_error, r.max_place, r.max_value = err, place(k), values[k]
        return out

    def weights(self, stem: str, rows, place, transpose: bool = False) -> str:
        """An initializer from a matrix (a sequence of rows) or a vector of rationals;
        ``place(i, j)`` / ``place(i)`` names an entry for the report.  ``transpose`` stores
        M^T (for x M^T products)."""
        from onnx import numpy_helper

        if isinstance(place, str):  # the entries' names: place[i] or place[i][j]
            at = place
            place = lambda i, j=None: f"{at}[{i}]" + ("" if j is None else f"[{j}]")  # noqa: E731
        rows = list(rows)
        if rows and isinstance(rows[0], tuple | list | SparseVector):
            ncols = len(rows[0])
            flat = [v for r in rows for v in r]
            a = self._floats(flat, lambda k: place(k // ncols, k % ncols))
            a = a.astype(self.np_dtype).reshape(len(rows), ncols)
            if transpose:
                a = a.T.copy()
        else:
            a = self._floats(rows, place).astype(self.np_dtype)
        name = self.name(stem)
        self.inits.append(numpy_helper.from_array(a, name))
        return name

    def matrix(self, stem: str, M, ncols: int, place, transpose: bool = False) -> str:
        """A rational matrix with ``ncols`` columns (possibly no rows)."""
        if not M:
            from onnx import numpy_helper

            a = np.zeros((0, ncols), dtype=self.np_dtype)
            name = self.name(stem)
            self.inits.append(numpy_helper.from_array(a.T.copy() if transpose else a, name))
            return name
        return self.weights(stem, [tuple(r) for r in M], place, transpose)

    def ints(self, stem: str, values) -> str:
        from onnx import numpy_helper

        name = self.name(stem)
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def node(self, op: str, inputs: list[str], out: str | None = None, **attrs) -> str:
        from onnx import helper

        out = out or self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=self.name("n_" + op), **attrs))
        return out

    def affine(self, x: str, W, b, in_dim: int, place_w, place_b, stem: str) -> str:
        """x W^T + b (W given by rows)."""
        y = self.node("MatMul", [x, self.matrix(stem + "_W", W, in_dim, place_w, transpose=True)])
        if not b:
            return y
        return self.node("Add", [y, self.weights(stem + "_b", b, place_b)])


def _maxout_graph(g: _Builder, net: MaxoutNetwork) -> str:
    h, width = "x", net.input_dim
    axis_last = g.ints("axes_last", [2])
    for l, layer in enumerate(net.layers):
        runs: list[tuple[int, int]] = []  # (first unit, count) of consecutive units, one rank
        for i, u in enumerate(layer.units):
            if runs and len(layer.units[runs[-1][0]].pieces) == len(u.pieces):
                runs[-1] = (runs[-1][0], runs[-1][1] + 1)
            else:
                runs.append((i, 1))
        outs = []
        for first, count in runs:
            k = len(layer.units[first].pieces)
            pieces = [
                (i, j, p)
                for i in range(first, first + count)
                for j, p in enumerate(layer.units[i].pieces)
            ]
            W = [p.w for _, _, p in pieces]
            b = [p.b for _, _, p in pieces]

            def pw(r, c, l=l, pieces=pieces):
                return f"layers[{l}].units[{pieces[r][0]}].pieces[{pieces[r][1]}].w[{c}]"

            def pb(r, l=l, pieces=pieces):
                return f"layers[{l}].units[{pieces[r][0]}].pieces[{pieces[r][1]}].b"

            z = g.affine(h, W, b, width, pw, pb, f"layer{l}")
            z = g.node("Reshape", [z, g.ints("shape", [-1, count, k])])
            outs.append(g.node("ReduceMax", [z, axis_last], keepdims=0))
        h = outs[0] if len(outs) == 1 else g.node("Concat", outs, axis=1)
        width = layer.width
    if net.output is None:
        return g.node("Identity", [h], "y")
    A = net.output
    y = g.affine(
        h, A.W, A.b, width, lambda r, c: f"output.W[{r}][{c}]", lambda r: f"output.b[{r}]", "output"
    )
    return g.node("Identity", [y], "y")


def _transformer_graph(g: _Builder, tf: Transformer) -> str:
    dm = tf.d_model
    for i, s in enumerate(tf.sublayers):
        if not isinstance(s, FeedForward) and s.kind != HARDMAX:
            raise ExportRefused(
                f"sublayers[{i}].attention.kind",
                f"{s.kind} attention is not exported; only hardmax Transformers "
                "(and Maxout networks) are",
            )
    keys = g.ints("axes_keys", [-1])
    tokens = g.ints("axes_tokens", [1])

    def times(X: str, M, cols: int, at: str, stem: str) -> str:
        """X M^T, M (given by rows, ``cols`` columns) named ``at`` in the model file."""
        w = g.matrix(stem, M, cols, at, transpose=True)
        return g.node("MatMul", [X, w])

    ex = g.node("Unsqueeze", [times("x", tf.embedding, tf.input_dim, "embedding", "E"), tokens])
    P = g.weights("P", [tuple(p) for p in tf.positions], "positions")
    X = g.node("Add", [ex, P])  # (batch, n, d_m): token t = E x + p_t
    for i, s in enumerate(tf.sublayers):
        if isinstance(s, FeedForward):
            at = f"sublayers[{i}].feedforward"
            if s.inner.b:
                H = times(X, s.inner.W, dm, f"{at}.W1", f"ff{i}_W1")
                H = g.node("Add", [H, g.weights(f"ff{i}_b1", s.inner.b, f"{at}.b1")])
                H = g.node("Relu", [H])
                U = times(H, s.outer.W, len(s.inner.b), f"{at}.W2", f"ff{i}_W2")
                U = g.node("Add", [U, g.weights(f"ff{i}_b2", s.outer.b, f"{at}.b2")])
            else:  # no hidden unit: only b_2 is added
                U = g.weights(f"ff{i}_b2", s.outer.b, f"{at}.b2")
            X = g.node("Add", [X, U])
            continue
        updates = []
        for j, h in enumerate(s.heads):
            at, stem = f"sublayers[{i}].attention.heads[{j}]", f"a{i}h{j}"
            if not h.value:  # W_O W_V = 0: the head adds nothing
                continue
            V = times(X, h.value, dm, f"{at}.value", f"{stem}_V")
            if h.key:
                Qm = times(X, h.query, dm, f"{at}.query", f"{stem}_Q")
                K = times(X, h.key, dm, f"{at}.key", f"{stem}_K")
                S = g.node("MatMul", [Qm, g.node("Transpose", [K], perm=[0, 2, 1])])  # S[t, t']
                if h.scale != 1:
                    lam = g.weights(f"{stem}_scale", [h.scale], lambda r, at=at: f"{at}.scale")
                    S = g.node("Mul", [S, lam])
                # hardmax, ties averaged: the indicator of the maximal scores over its count
                top = g.node("ReduceMax", [S, keys], keepdims=1)
                win = g.node("Cast", [g.node("Equal", [S, top])], to=g.elem)
                A = g.node("Div", [win, g.node("ReduceSum", [win, keys], keepdims=1)])
                O = g.node("MatMul", [A, V])  # (batch, n, s): mean of the winners' values
            else:  # no key rows: every score is 0, every key wins
                O = g.node("ReduceMean", [V, tokens], keepdims=1)
            updates.append(times(O, h.out, len(h.value), f"{at}.out", f"{stem}_O"))
        if updates:
            U = updates[0] if len(updates) == 1 else g.node("Sum", updates)
            X = g.node("Add", [X, U])
    r = tf.readout
    if r.token is None:
        z = g.node("ReduceMean", [X, tokens], keepdims=0)
    else:
        z = g.node("Gather", [X, g.ints("token", r.token)], axis=1)
    y = g.affine(
        z, r.map.W, r.map.b, dm, lambda a, c: f"readout.W[{a}][{c}]",
        lambda a: f"readout.b[{a}]", "readout",
    )  # fmt: skip
    return g.node("Identity", [y], "y")


@dataclass
class ExportReport:
    kind: str
    dtype: str
    input_dim: int
    output_dim: int
    rounding: Rounding
    operators: Counter
    nodes: int
    domain_kept: bool

    def as_json(self) -> dict:
        r = self.rounding
        return {
            "model": self.kind,
            "dtype": self.dtype,
            "opset": OPSET,
            "ir_version": IR_VERSION,
            "input_dim": self.input_dim,
            "output_dim": self.output_dim,
            "nodes": self.nodes,
            "operators": dict(sorted(self.operators.items())),
            "weights": r.weights,
            "weights_rounded": r.rounded,
            "exact": r.exact,
            "max_abs_rounding_error": float(Fraction(int(r.max_error.p), int(r.max_error.q))),
            "max_abs_rounding_error_exact": q_str(r.max_error),
            "max_rounding_error_at": r.max_place,
            "checked": "onnx.checker.check_model(full_check=True)",
            "domain_in_metadata": self.domain_kept,
        }


def export_onnx(model: MaxoutNetwork | Transformer, dtype: str = "float64", source: str = ""):
    """(the checked ``onnx.ModelProto``, an ExportReport) of the model in ``dtype``; raises
    ExportRefused for a model that cannot be written (softmax attention, a weight beyond
    float32's range)."""
    import onnx
    from onnx import helper

    from .. import __version__
    from ..io.models import MAXOUT, TRANSFORMER, domain_to_json

    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {DTYPES}")
    g = _Builder(dtype, source)
    if isinstance(model, MaxoutNetwork):
        kind, fmt = "maxout", MAXOUT
        _maxout_graph(g, model)
    else:
        kind, fmt = "transformer", TRANSFORMER
        _transformer_graph(g, model)
    graph = helper.make_graph(
        g.nodes,
        f"exactmax_{kind}",
        [helper.make_tensor_value_info("x", g.elem, ["batch", model.input_dim])],
        [helper.make_tensor_value_info("y", g.elem, ["batch", model.out_dim])],
        g.inits,
    )
    m = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="exactmax",
        producer_version=__version__,
    )
    m.ir_version = IR_VERSION
    r = g.rounding
    m.doc_string = (
        f"{fmt} model exported from {os.path.basename(source) or 'a model'} in {dtype}: "
        + (
            "every weight is exactly representable"
            if r.exact
            else f"{r.rounded} of {r.weights} weights rounded to the nearest {dtype}, "
            f"largest absolute error {q_str(r.max_error)}"
        )
        + "; the graph computes in floating point"
    )
    props = {
        "exactmax_format": fmt,
        "exactmax_dtype": dtype,
        "exactmax_weights_exact": "true" if r.exact else "false",
        "exactmax_max_abs_rounding_error": q_str(r.max_error),
    }
    if model.domain is not None:
        props["exactmax_domain"] = json.dumps(domain_to_json(model.domain))
    helper.set_model_props(m, props)
    onnx.checker.check_model(m, full_check=True)
    report = ExportReport(
        kind,
        dtype,
        model.input_dim,
        model.out_dim,
        r,
        Counter(n.op_type for n in g.nodes),
        len(g.nodes),
        model.domain is not None,
    )
    return m, report


def cmd_export_onnx(args) -> int:
    """``export-onnx MODEL.json -o M.onnx [--dtype float32|float64] [--json]``."""
    from .. import jsonout
    from ..exits import EXIT_OK
    from ..io import InputError, load_model
    from ..io.models import check_outputs, write_bytes_atomic

    check_outputs([("-o", args.output)], [("MODEL.json", args.model)])
    model = load_model(args.model)
    try:
        m, rep = export_onnx(model, args.dtype, args.model)
    except ExportRefused as e:
        raise InputError(args.model, e.place, e.message) from None
    try:
        data = m.SerializeToString()
    except ValueError as e:  # protobuf's 2 GB limit
        raise InputError(args.output, "", f"the ONNX model is too large to write ({e})") from None
    write_bytes_atomic(args.output, data)
    if args.json:
        print(jsonout.dumps(dict(rep.as_json(), output=args.output)))
        return EXIT_OK
    r = rep.rounding
    print(
        f"wrote {args.output}: "
        + ("Maxout network" if rep.kind == "maxout" else "hardmax Transformer")
        + f", input dimension {rep.input_dim}, output dimension {rep.output_dim}; "
        f"{rep.dtype}, opset {OPSET}, IR {IR_VERSION}, {rep.nodes} nodes ("
        + ", ".join(f"{k} x{v}" for k, v in sorted(rep.operators.items()))
        + "); checked by onnx.checker"
    )
    if r.exact:
        print(f"  weights: exact (all {r.weights} are {rep.dtype} numbers)")
    else:
        err = float(Fraction(int(r.max_error.p), int(r.max_error.q)))
        print(
            f"  weights: {r.rounded} of {r.weights} rounded to the nearest {rep.dtype}; largest "
            f"absolute rounding error {err:.3g} (at {r.max_place})"
        )
    print(
        f"  the graph computes in {rep.dtype} arithmetic: its outputs approximate the exact "
        "model's"
        + ("; hardmax ties are ties of the float scores" if rep.kind == "transformer" else "")
        + (
            "; the domain is kept in the metadata (exactmax_domain), not in the graph"
            if rep.domain_kept
            else ""
        )
    )
    return EXIT_OK
