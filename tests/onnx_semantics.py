"""An independent exact interpreter of the ONNX operators exactmax imports (tests only).

It runs the graph node by node on numpy object arrays of ``fractions.Fraction``, following
the operator definitions directly (no symbolic affine tensors, no Maxout units), so that
``evaluate_maxout(import_onnx(f), x) == run_exact(f, x)`` compares two independent readings.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import onnx
from onnx import helper, numpy_helper

_frac = np.frompyfunc(lambda v: Fraction(v) if not isinstance(v, Fraction) else v, 1, 1)


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
        i = [env[k] if k else None for k in n.input]
        env[n.output[0]] = _op(n.op_type, i, a, opset)
    return [v for v in np.asarray(env[g.output[0].name]).reshape(-1)]


def _axes(i, a, opset, since):
    if opset >= since:
        return [int(v) for v in i[1]] if len(i) > 1 and i[1] is not None else None
    return a.get("axes")


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
    if op == "Relu":
        return np.vectorize(lambda v: max(v, Fraction(0)), otypes=[object])(x)
    if op == "Max":
        out = i[0]
        for other in i[1:]:
            b = np.broadcast_arrays(out, other)
            out = np.vectorize(max, otypes=[object])(*b)
        return out
    if op == "ReduceMax":
        axes = _axes(i, a, opset, 18)
        axes = tuple(range(x.ndim)) if not axes else tuple(v % x.ndim for v in axes)
        return np.max(x, axis=axes, keepdims=bool(a.get("keepdims", 1)))
    if op == "MaxPool":
        k, s = a["kernel_shape"], a.get("strides", [1] * len(a["kernel_shape"]))
        pads = a.get("pads", [0] * 2 * len(k))
        sp = x.shape[2:]
        outs = [(sp[d] + pads[d] + pads[len(k) + d] - k[d]) // s[d] + 1 for d in range(len(k))]
        y = np.empty(x.shape[:2] + tuple(outs), dtype=object)
        for nc in itertools.product(range(x.shape[0]), range(x.shape[1])):
            for o in itertools.product(*map(range, outs)):
                vals = [x[nc + p] for off in itertools.product(*map(range, k))
                        for p in [tuple(o[d] * s[d] - pads[d] + off[d] for d in range(len(k)))]
                        if all(0 <= p[d] < sp[d] for d in range(len(k)))]
                y[nc + o] = max(vals)
        return y
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
        axes = sorted(v % (x.ndim + len(_axes(i, a, opset, 13)))
                      for v in _axes(i, a, opset, 13))
        for ax in axes:
            x = np.expand_dims(x, ax)
        return x
    if op == "Transpose":
        return np.transpose(x, a.get("perm"))
    if op == "Concat":
        return np.concatenate(i, axis=a["axis"])
    raise NotImplementedError(op)
