"""An independent exact interpreter of the ONNX operators exactmax imports (tests only).

It runs the graph node by node on numpy object arrays of ``fractions.Fraction``, following
the operator definitions directly (no symbolic affine tensors, no Maxout units), so that
``evaluate_maxout(import_onnx(f), x) == run_exact(f, x)`` compares two independent readings.

Every float (weight, attribute, default) is the exact dyadic rational it denotes; a float
attribute is stored as a float32, so an absent one means the float32 of the spec's default
(LeakyRelu's alpha 0.01, BatchNormalization's epsilon 1e-5, Clip-6's bounds -+FLT_MAX).

Choices where the spec leaves room, is unclear or has no exact value:

- BatchNormalization: y = m (x - mean) + B with m = scale / sqrt(var + epsilon), exact when
  var + epsilon is the square of a rational, otherwise the float64 nearest to that irrational
  m (correctly rounded, ``nearest_scale_over_sqrt``): the same rule as the importer, computed
  here by integer square roots.
- Pools with ``ceil_mode``: a window that would start in the right padding is dropped (ONNX's
  reference implementation, onnxruntime, PyTorch); AveragePool's ``count_include_pad`` counts
  the window's positions inside the padded input [-pad_begin, size + pad_end).
- ConvTranspose's pads derived from ``output_shape`` / ``auto_pad``: as the spec's text states
  (SAME_UPPER: the smaller half first, otherwise the larger half first), as onnxruntime 1.32
  does (onnx.reference ignores ``output_shape`` when ``auto_pad`` is NOTSET).
- Clip: a bound left out at opset >= 11 is no bound; Clip-6's absent attributes are its
  defaults -+FLT_MAX (float32), which matter only beyond the float32 range.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import onnx
from onnx import helper, numpy_helper

_frac = np.frompyfunc(lambda v: Fraction(v) if not isinstance(v, Fraction) else v, 1, 1)
FLT_MAX = Fraction(float(np.finfo(np.float32).max))


def _exact(a):
    a = np.asarray(a)
    if a.dtype == object:
        return a
    if a.dtype.kind == "f":
        return np.asarray(_frac(a.astype(np.float64)), dtype=object)
    return a


def run_exact(path_or_model, x):
    m = onnx.load(path_or_model) if isinstance(path_or_model, str) else path_or_model
    g = m.graph
    opset = max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    env = {t.name: _exact(numpy_helper.to_array(t)) for t in g.initializer}
    inp = [i for i in g.input if i.name not in env][0]
    shape = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
    env[inp.name] = np.array([Fraction(v) for v in x], dtype=object).reshape(shape)
    for n in g.node:
        a = {at.name: helper.get_attribute_value(at) for at in n.attribute}
        a = {k: v.decode() if isinstance(v, bytes) else v for k, v in a.items()}
        i = [env[k] if k else None for k in n.input]
        env[n.output[0]] = _op(n.op_type, i, a, opset)
    return [v for v in np.asarray(env[g.output[0].name]).reshape(-1)]


def _axes(i, a, opset, since):
    if opset >= since:
        return [int(v) for v in i[1]] if len(i) > 1 and i[1] is not None else None
    return a.get("axes")


def _input(i, k):
    """The k-th input, None if absent or left empty."""
    return i[k] if len(i) > k else None


# ------------------------------------------------------------------ square roots


def _is_square(n: int) -> bool:
    return n >= 0 and math.isqrt(n) ** 2 == n


def nearest_scale_over_sqrt(scale: Fraction, v: Fraction) -> Fraction:
    """scale / sqrt(v) for v > 0: exact if v is the square of a rational, otherwise the
    float64 nearest to it (as a Fraction).  The irrational value r = sign * sqrt(t), with
    t = scale^2 / v, is enclosed in [a, a + 1] / 2^k by an integer square root; the bracket is
    narrowed until both ends round to the same float64, which is then r's rounding (rounding
    is monotone, and an irrational r is never a midpoint between two floats)."""
    if v <= 0:
        raise ValueError("var + epsilon must be positive")
    if _is_square(v.numerator) and _is_square(v.denominator):
        return scale / Fraction(math.isqrt(v.numerator), math.isqrt(v.denominator))
    if scale == 0:
        return Fraction(0)
    t = scale * scale / v
    sign = 1 if scale > 0 else -1
    k = 80 + max(0, t.denominator.bit_length() - t.numerator.bit_length())
    while True:
        a = math.isqrt(t.numerator * 4**k // t.denominator)
        lo, hi = float(Fraction(a, 2**k)), float(Fraction(a + 1, 2**k))
        if lo == hi:
            return sign * Fraction(lo)
        k *= 2


# ------------------------------------------------------------------ sliding windows


def _window_geometry(sizes, kernel, strides, dilations, pads, auto_pad, ceil_mode):
    """(pads before, pads after, output sizes) of a window sliding over each spatial axis
    (Conv and the pools)."""
    n = len(sizes)
    span = [(kernel[d] - 1) * dilations[d] + 1 for d in range(n)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        outs = [-(-sizes[d] // strides[d]) for d in range(n)]
        total = [max(0, (outs[d] - 1) * strides[d] + span[d] - sizes[d]) for d in range(n)]
        # an odd total: the extra pad at the end (SAME_UPPER) or the beginning (SAME_LOWER)
        before = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
        return before, [t - b for t, b in zip(total, before)], outs
    if auto_pad == "VALID":
        return [0] * n, [0] * n, [(sizes[d] - span[d]) // strides[d] + 1 for d in range(n)]
    assert auto_pad in (None, "NOTSET"), auto_pad
    pads = list(pads) if pads is not None else [0] * (2 * n)
    before, after = pads[:n], pads[n:]
    outs = []
    for d in range(n):
        num = sizes[d] + before[d] + after[d] - span[d]
        o = (-(-num // strides[d]) if ceil_mode else num // strides[d]) + 1
        if ceil_mode and (o - 1) * strides[d] >= sizes[d] + before[d]:
            o -= 1  # the last window would start in the right padding: dropped
        outs.append(o)
    return before, after, outs


def _windows(x, a, kernel, ceil_mode=False):
    """For each output position o (over the spatial axes) the window's positions: those inside
    the input, and how many lie inside the padded input."""
    sizes = x.shape[2:]
    n = len(sizes)
    st = list(a.get("strides", [1] * n))
    dl = list(a.get("dilations", [1] * n))
    before, after, outs = _window_geometry(
        sizes, kernel, st, dl, a.get("pads"), a.get("auto_pad", "NOTSET"), ceil_mode
    )
    for o in itertools.product(*map(range, outs)):
        inside, padded = [], 0
        for off in itertools.product(*map(range, kernel)):
            p = tuple(o[d] * st[d] - before[d] + off[d] * dl[d] for d in range(n))
            if all(0 <= p[d] < sizes[d] for d in range(n)):
                inside.append((off, p))
            if all(-before[d] <= p[d] < sizes[d] + after[d] for d in range(n)):
                padded += 1
        yield o, outs, inside, padded


def _pool(x, a, kind):
    k = list(a["kernel_shape"])
    y = None
    cip = int(a.get("count_include_pad", 0))
    for o, outs, inside, padded in _windows(x, a, k, bool(a.get("ceil_mode", 0))):
        if y is None:
            y = np.empty(x.shape[:2] + tuple(outs), dtype=object)
        for nc in itertools.product(range(x.shape[0]), range(x.shape[1])):
            vals = [x[nc + p] for _, p in inside]
            if kind == "max":
                y[nc + o] = max(vals)
            else:
                y[nc + o] = sum(vals, Fraction(0)) / (padded if cip else len(vals))
    return y


def _conv(x, W, B, a):
    N, C = x.shape[:2]
    M = W.shape[0]
    G = int(a.get("group", 1))
    Cg, Mg = C // G, M // G
    assert W.shape[1] == Cg and M % G == 0, (x.shape, W.shape, G)
    k = list(a.get("kernel_shape", W.shape[2:]))
    y = None
    for o, outs, inside, _ in _windows(x, a, k):
        if y is None:
            y = np.empty((N, M) + tuple(outs), dtype=object)
        for b, m in itertools.product(range(N), range(M)):
            g = m // Mg
            acc = B[m] if B is not None else Fraction(0)
            for c in range(Cg):
                for off, p in inside:
                    acc += x[(b, g * Cg + c) + p] * W[(m, c) + off]
            y[(b, m) + o] = acc
    return y


def _conv_transpose(x, W, B, a):
    N, C = x.shape[:2]
    sizes = x.shape[2:]
    n = len(sizes)
    G = int(a.get("group", 1))
    Cg, Mg = C // G, W.shape[1]
    M = Mg * G
    assert W.shape[0] == C
    k = list(a.get("kernel_shape", W.shape[2:]))
    st = list(a.get("strides", [1] * n))
    dl = list(a.get("dilations", [1] * n))
    op = list(a.get("output_padding", [0] * n))
    full = [st[d] * (sizes[d] - 1) + op[d] + (k[d] - 1) * dl[d] + 1 for d in range(n)]
    auto = a.get("auto_pad", "NOTSET")
    if "output_shape" in a or auto in ("SAME_UPPER", "SAME_LOWER"):
        out = (
            list(a["output_shape"])[-n:]
            if "output_shape" in a
            else [sizes[d] * st[d] for d in range(n)]
        )
        total = [full[d] - out[d] for d in range(n)]
        before = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
    else:
        pads = list(a.get("pads", [0] * (2 * n)))
        if auto == "VALID":
            pads = [0] * (2 * n)
        before = pads[:n]
        out = [full[d] - pads[d] - pads[n + d] for d in range(n)]
    y = np.empty((N, M) + tuple(out), dtype=object)
    for b, m in itertools.product(range(N), range(M)):
        for j in itertools.product(*map(range, out)):
            y[(b, m) + j] = B[m] if B is not None else Fraction(0)
    for b, c in itertools.product(range(N), range(C)):
        g = c // Cg
        for i in itertools.product(*map(range, sizes)):
            v = x[(b, c) + i]
            for off in itertools.product(*map(range, k)):
                j = tuple(i[d] * st[d] + off[d] * dl[d] - before[d] for d in range(n))
                if all(0 <= j[d] < out[d] for d in range(n)):
                    for ml in range(Mg):
                        y[(b, g * Mg + ml) + j] += v * W[(c, ml) + off]
    return y


def _batch_norm(x, i, a, opset):
    if int(a.get("training_mode", 0)):
        raise NotImplementedError("BatchNormalization in training mode")
    scale, bias, mean, var = i[1:5]
    eps = Fraction(a.get("epsilon", float(np.float32(1e-5))))
    m = np.vectorize(lambda s, v: nearest_scale_over_sqrt(s, v + eps), otypes=[object])(scale, var)

    def per_channel(p):  # (C,) or, with spatial=0 before opset 9, (C, D1, ...)
        return p.reshape(p.shape + (1,) * (x.ndim - 1 - p.ndim))

    return per_channel(m) * (x - per_channel(mean)) + per_channel(bias)


def _pad(x, pads, mode, value, axes):
    r = x.ndim
    axes = list(range(r)) if axes is None else [int(v) % r for v in axes]
    full = [0] * (2 * r)
    for j, ax in enumerate(axes):
        full[ax], full[r + ax] = int(pads[j]), int(pads[len(axes) + j])
    for ax in range(r):
        size = x.shape[ax]
        picks = []
        for p in range(-full[ax], size + full[r + ax]):  # negative pads crop
            if 0 <= p < size:
                picks.append(p)
            elif mode == "edge":
                picks.append(min(max(p, 0), size - 1))
            elif mode == "reflect":
                while not 0 <= p < size:
                    p = -p if p < 0 else 2 * (size - 1) - p
                picks.append(p)
            else:
                assert mode == "constant", mode
                picks.append(None)
        x = np.take(x, [0 if p is None else p for p in picks], axis=ax)
        moved = np.moveaxis(x, ax, 0)  # a view: writing it writes x
        for j, p in enumerate(picks):
            if p is None:
                moved[j, ...] = value
    return x


def _slice(x, starts, ends, axes, steps):
    r = x.ndim
    axes = list(range(len(starts))) if axes is None else [int(v) % r for v in axes]
    steps = [1] * len(starts) if steps is None else steps
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        st, en, sp, dim = int(st), int(en), int(sp), x.shape[ax]
        st, en = st + dim if st < 0 else st, en + dim if en < 0 else en
        if sp > 0:
            st, en = min(max(st, 0), dim), min(max(en, 0), dim)
        else:
            st, en = min(max(st, 0), dim - 1), min(max(en, -1), dim - 1)
        x = np.take(x, list(range(st, en, sp)), axis=ax)
    return x


def _reduce(x, axes, keepdims, noop, f):
    if not axes:
        if noop:
            return x
        axes = range(x.ndim)
    axes = tuple(sorted(int(v) % x.ndim for v in axes))
    return f(x, axes, keepdims)


def _elementwise(f, *arrays):
    return np.vectorize(f, otypes=[object])(*np.broadcast_arrays(*arrays))


def _variadic(f, arrays):
    out = arrays[0]
    for other in arrays[1:]:
        out = _elementwise(f, out, other)
    return out


def _op(op, i, a, opset):
    x = i[0] if i else None
    if op in ("Identity", "Dropout", "Softmax"):
        return x
    if op == "Constant":
        return _exact(numpy_helper.to_array(a["value"]))
    if op == "Gemm":
        A = x.T if a.get("transA", 0) else x
        B = i[1].T if a.get("transB", 0) else i[1]
        Y = Fraction(a.get("alpha", 1.0)) * np.matmul(A, B)
        return Y + Fraction(a.get("beta", 1.0)) * i[2] if len(i) > 2 else Y
    if op == "MatMul":
        return np.matmul(x, i[1])
    if op == "Add":
        return x + i[1]
    if op == "Sub":
        return x - i[1]
    if op == "Mul":
        return x * i[1]
    if op == "Div":
        return x / i[1]
    if op == "Neg":
        return -x
    if op == "Abs":
        return _elementwise(abs, x)
    if op == "Relu":
        return _elementwise(lambda v: max(v, Fraction(0)), x)
    if op == "LeakyRelu":
        alpha = Fraction(a.get("alpha", float(np.float32(0.01))))
        return _elementwise(lambda v: v if v >= 0 else alpha * v, x)
    if op == "PRelu":
        return _elementwise(lambda v, s: v if v >= 0 else s * v, x, i[1])
    if op == "Clip":
        if opset >= 11:
            lo, hi = _input(i, 1), _input(i, 2)
            lo = None if lo is None else Fraction(np.asarray(lo).reshape(-1)[0])
            hi = None if hi is None else Fraction(np.asarray(hi).reshape(-1)[0])
        else:  # attributes, default the float32 extremes
            lo, hi = Fraction(a.get("min", -FLT_MAX)), Fraction(a.get("max", FLT_MAX))
        # min(max(x, lo), hi): lo > hi gives hi everywhere, as the spec says
        lo_f = (lambda v: v) if lo is None else (lambda v: max(v, lo))
        hi_f = (lambda v: v) if hi is None else (lambda v: min(v, hi))
        return _elementwise(lambda v: hi_f(lo_f(v)), x)
    if op == "Max":
        return _variadic(max, i)
    if op == "Min":
        return _variadic(min, i)
    if op == "Sum":
        return _variadic(lambda u, v: u + v, i)
    if op in ("ReduceMax", "ReduceMin", "ReduceSum", "ReduceMean"):
        axes = _axes(i, a, opset, 13 if op == "ReduceSum" else 18)
        f = {
            "ReduceMax": lambda t, ax, kd: np.max(t, axis=ax, keepdims=kd),
            "ReduceMin": lambda t, ax, kd: np.min(t, axis=ax, keepdims=kd),
            "ReduceSum": lambda t, ax, kd: np.sum(t, axis=ax, keepdims=kd),
            "ReduceMean": lambda t, ax, kd: (
                np.sum(t, axis=ax, keepdims=kd) / Fraction(math.prod(t.shape[d] for d in ax))
            ),
        }[op]
        out = _reduce(
            x, axes, bool(a.get("keepdims", 1)), bool(a.get("noop_with_empty_axes", 0)), f
        )
        return np.asarray(out, dtype=object)
    if op == "MaxPool":
        return _pool(x, a, "max")
    if op == "AveragePool":
        return _pool(x, a, "average")
    if op == "GlobalMaxPool":
        return np.asarray(np.max(x, axis=tuple(range(2, x.ndim)), keepdims=True), dtype=object)
    if op == "GlobalAveragePool":
        axes = tuple(range(2, x.ndim))
        count = Fraction(math.prod(x.shape[2:]))
        return np.asarray(np.sum(x, axis=axes, keepdims=True) / count, dtype=object)
    if op == "Conv":
        return _conv(x, i[1], _input(i, 2), a)
    if op == "ConvTranspose":
        return _conv_transpose(x, i[1], _input(i, 2), a)
    if op == "BatchNormalization":
        return _batch_norm(x, i, a, opset)
    if op == "Pad":
        mode = a.get("mode", "constant")
        if opset >= 11:
            value = _input(i, 2)
            value = Fraction(0) if value is None else Fraction(np.asarray(value).reshape(-1)[0])
            axes = _input(i, 3)
            return _pad(x, [int(v) for v in i[1]], mode, value, axes)
        return _pad(x, a["pads"], mode, Fraction(a.get("value", 0.0)), None)
    if op == "Slice":
        if opset >= 10:
            return _slice(x, i[1], i[2], _input(i, 3), _input(i, 4))
        return _slice(x, a["starts"], a["ends"], a.get("axes"), None)
    if op == "Reshape":
        shape = [int(v) for v in i[1]]
        shape = [x.shape[j] if v == 0 else v for j, v in enumerate(shape)]
        return x.reshape(shape)
    if op == "Flatten":
        ax = a.get("axis", 1) % (x.ndim + 1) if a.get("axis", 1) < 0 else a.get("axis", 1)
        return x.reshape(int(np.prod(x.shape[:ax])), -1)
    if op == "Squeeze":
        axes = _axes(i, a, opset, 13)
        return np.squeeze(x, axis=None if axes is None else tuple(axes))
    if op == "Unsqueeze":
        axes = sorted(v % (x.ndim + len(_axes(i, a, opset, 13))) for v in _axes(i, a, opset, 13))
        for ax in axes:
            x = np.expand_dims(x, ax)
        return x
    if op == "Transpose":
        return np.transpose(x, a.get("perm"))
    if op == "Concat":
        return np.concatenate(i, axis=a["axis"])
    raise NotImplementedError(op)
