"""ONNX's spatial operators on affine tensors, exactly: Conv, ConvTranspose, AveragePool,
GlobalAveragePool, MaxPool, Pad and Slice.

Each linear one is a sparse map: the triples (output element, input element, coefficient) of
its matrix, which ``affine_tensors.apply_sparse`` applies to the rows (a convolution's output
row is the combination of its window, nothing more).  MaxPool makes one Maxout unit per output
element whose pieces are its window (positions in the padding take no part, as in ONNX).  The
shapes follow the ONNX operator definitions: ``pads`` are [x1_begin, x2_begin, ..., x1_end,
...], ``auto_pad`` SAME_UPPER puts the odd padding at the end, ``ceil_mode`` drops a window that
would start in the end padding.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, cast

import numpy as np

from ..kernel.rational import ONE, Q
from .affine_tensors import Aff, apply_sparse, const_row


class Refuse(Exception):
    """An unsupported or malformed node; the message is completed with the node's name."""


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _ints(a: dict, name: str, default: list[int]) -> list[int]:
    return [int(v) for v in a.get(name, default)]


def window_geometry(op: str, sp: tuple, ks: list[int], a: dict, ceil: bool = False):
    """(output sizes, strides, dilations, begin pads, end pads) of a window of size ``ks``
    sliding over spatial sizes ``sp``."""
    n = len(sp)
    st, dl = _ints(a, "strides", [1] * n), _ints(a, "dilations", [1] * n)
    pads = _ints(a, "pads", [0] * (2 * n))
    auto = _text(a.get("auto_pad", "NOTSET"))
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise Refuse(
            f"{op} with auto_pad {auto!r}: expected NOTSET, VALID, SAME_UPPER or SAME_LOWER"
        )
    if len(ks) != n or len(st) != n or len(dl) != n or len(pads) != 2 * n:
        raise Refuse(
            f"{op} with kernel_shape {ks}, strides {st}, dilations {dl}, pads {pads} on "
            f"{n} spatial axes: expected {n} of each and {2 * n} pads"
        )
    if min(ks + st + dl) < 1 or min(pads) < 0:
        raise Refuse(
            f"{op} with kernel_shape {ks}, strides {st}, dilations {dl}, pads {pads}: expected "
            "a positive kernel, positive strides and dilations, and pads >= 0"
        )
    if auto != "NOTSET" and "pads" in a:
        raise Refuse(f"{op} with both auto_pad {auto} and pads; ONNX allows one of them")
    span = [(k - 1) * d + 1 for k, d in zip(ks, dl)]
    if auto == "VALID":
        pads = [0] * (2 * n)
    elif auto.startswith("SAME"):
        outs = [-(-s // t) for s, t in zip(sp, st)]
        total = [max(0, (o - 1) * t + w - s) for o, t, w, s in zip(outs, st, span, sp)]
        small = [t // 2 for t in total]
        big = [t - h for t, h in zip(total, small)]
        pads = small + big if auto == "SAME_UPPER" else big + small
    pb, pe = pads[:n], pads[n:]
    outs = []
    for i in range(n):
        num = sp[i] + pb[i] + pe[i] - span[i]
        if num < 0:
            raise Refuse(
                f"{op}'s window ({span[i]} on axis {i + 2}) is larger than the padded input "
                f"({sp[i] + pb[i] + pe[i]})"
            )
        o = (-(-num // st[i]) if ceil else num // st[i]) + 1
        if ceil and (o - 1) * st[i] >= sp[i] + pb[i]:
            o -= 1  # a window starting in the end padding is dropped
        outs.append(o)
    check_size(op, outs)
    return outs, st, dl, pb, pe


MAX_ELEMENTS = 2_000_000
"""Most elements of one spatial operator's output (before anything is allocated): a pad or
stride of 2^40 in a small file is refused, not a request for terabytes."""


def check_size(op: str, shape) -> None:
    n = math.prod(int(d) for d in shape)
    if n > MAX_ELEMENTS:
        raise Refuse(
            f"{op} would make a tensor of shape {[int(d) for d in shape]} ({n} elements); the "
            f"reader handles at most {MAX_ELEMENTS} per tensor"
        )


def window_index(sp, outs, ks, st, dl, pb) -> np.ndarray:
    """idx[k, o]: the flat spatial input position of kernel offset k in output window o, or
    -1 where it falls in the padding; shape (prod(ks), prod(outs))."""
    grids = np.meshgrid(*[np.arange(o) for o in outs], indexing="ij")
    res = []
    for off in itertools.product(*(range(k) for k in ks)):
        pos = [g * st[i] - pb[i] + off[i] * dl[i] for i, g in enumerate(grids)]
        valid = np.ones(grids[0].shape if grids else (), dtype=bool)
        for i, p in enumerate(pos):
            valid &= (p >= 0) & (p < sp[i])
        clipped = [np.clip(p, 0, s - 1) for p, s in zip(pos, sp)]
        flat = np.ravel_multi_index(clipped, sp) if sp else np.zeros((), dtype=np.int64)
        res.append(np.where(valid, flat, -1).reshape(-1))
    return np.stack(res)


def _rows(x) -> tuple[np.ndarray, int]:
    """The flat rows of a value (constants as constant rows) and its level (0 for a
    constant)."""
    if isinstance(x, Aff):
        return x.E.reshape(-1), x.level
    flat = np.empty(x.size, dtype=object)
    for i, v in enumerate(x.reshape(-1)):
        flat[i] = const_row(v)
    return flat, 0


def _nonzero(W: np.ndarray) -> np.ndarray:
    return (
        np.asarray(np.frompyfunc(bool, 1, 1)(W), dtype=bool) if W.size else np.zeros(W.shape, bool)
    )


def conv(x, W: np.ndarray, B: np.ndarray | None, a: dict) -> Aff:
    """Conv: y[n, m, o] = B[m] + sum over the channels c of m's group and offsets k of
    W[m, c, k] x[n, g c, o * stride - pad + k * dilation]."""
    S = _shape(x)
    if len(S) < 3 or W.ndim != len(S):
        raise Refuse(f"Conv of a tensor of shape {list(S)} with weights of shape {list(W.shape)}")
    N, C, sp = S[0], S[1], tuple(S[2:])
    M, Cg, ks = W.shape[0], W.shape[1], list(W.shape[2:])
    G = int(a.get("group", 1))
    if "kernel_shape" in a and _ints(a, "kernel_shape", []) != ks:
        raise Refuse(f"Conv's kernel_shape {_ints(a, 'kernel_shape', [])} is not the weights' {ks}")
    if G < 1 or C != Cg * G or M % G:
        raise Refuse(
            f"Conv with {C} input channels, weights of shape {list(W.shape)} and group {G}: "
            f"expected input channels = {Cg} x group and output channels a multiple of group"
        )
    if B is not None and B.shape != (M,):
        raise Refuse(f"Conv's bias has shape {list(B.shape)}, expected [{M}]")
    outs, st, dl, pb, _ = window_geometry("Conv", sp, ks, a)
    idx = window_index(sp, outs, ks, st, dl, pb)  # (K, P)
    K, P, plane = idx.shape[0], idx.shape[1], math.prod(sp)
    rows, level = _rows(x)
    nz, Mg = _nonzero(W), M // G
    outs_i, ins_i, coefs = [], [], []
    o_base = np.arange(P)
    for n in range(N):
        for m in range(M):
            for ci in range(Cg):
                c = (m // Mg) * Cg + ci
                w, keep = W[m, ci].reshape(K), nz[m, ci].reshape(K)
                sel = idx[keep]
                mask = sel >= 0
                if not mask.any():
                    continue
                ins_i.append((n * C + c) * plane + sel[mask])
                outs_i.append(np.broadcast_to((n * M + m) * P + o_base, sel.shape)[mask])
                coefs.append(np.broadcast_to(w[keep][:, None], sel.shape)[mask])
    size = N * M * P
    const = None
    if B is not None:
        const = np.tile(np.repeat(B, P), N)
    E = _apply(rows, size, outs_i, ins_i, coefs, const)
    return Aff(E.reshape((N, M) + tuple(outs)), level)


def conv_transpose(x, W: np.ndarray, B: np.ndarray | None, a: dict) -> Aff:
    """ConvTranspose: every input element x[n, c, i] adds W[c, m', k] x[n, c, i] to
    y[n, m, i * stride - pad + k * dilation] (m = group(c) * M/group + m')."""
    S = _shape(x)
    if len(S) < 3 or W.ndim != len(S):
        raise Refuse(
            f"ConvTranspose of a tensor of shape {list(S)} with weights of shape {list(W.shape)}"
        )
    N, C, sp = S[0], S[1], tuple(S[2:])
    n = len(sp)
    G = int(a.get("group", 1))
    Mg, ks = W.shape[1], list(W.shape[2:])
    if G < 1 or W.shape[0] != C or C % G:
        raise Refuse(
            f"ConvTranspose with {C} input channels, weights of shape {list(W.shape)} and "
            f"group {G}: expected weights [{C}, M/group, ...] and channels a multiple of group"
        )
    M, Cg = Mg * G, C // G
    if "kernel_shape" in a and _ints(a, "kernel_shape", []) != ks:
        raise Refuse(f"ConvTranspose's kernel_shape is not the weights' {ks}")
    if B is not None and B.shape != (M,):
        raise Refuse(f"ConvTranspose's bias has shape {list(B.shape)}, expected [{M}]")
    st, dl = _ints(a, "strides", [1] * n), _ints(a, "dilations", [1] * n)
    op = _ints(a, "output_padding", [0] * n)
    auto = _text(a.get("auto_pad", "NOTSET"))
    if len(st) != n or len(dl) != n or len(op) != n or min(st + dl + ks) < 1 or min(op) < 0:
        raise Refuse(
            f"ConvTranspose with strides {st}, dilations {dl}, output_padding {op}: expected "
            f"{n} positive strides and dilations and {n} output paddings >= 0"
        )
    span = [(k - 1) * d + 1 for k, d in zip(ks, dl)]
    full = [t * (s - 1) + p + w for t, s, p, w in zip(st, sp, op, span)]
    if auto != "NOTSET" and "pads" in a:
        raise Refuse(f"ConvTranspose with both auto_pad {auto} and pads; ONNX allows one of them")
    if "output_shape" in a or auto in ("SAME_UPPER", "SAME_LOWER"):
        outs = (
            _ints(a, "output_shape", [])[-n:]
            if "output_shape" in a
            else [s * t for s, t in zip(sp, st)]
        )
        if len(outs) != n:
            raise Refuse(f"ConvTranspose's output_shape must give {n} spatial sizes")
        total = [f - o for f, o in zip(full, outs)]
        if min(total) < 0:
            raise Refuse(f"ConvTranspose's output_shape {outs} is larger than {full}")
        half = [t // 2 for t in total]
        pb = half if auto == "SAME_UPPER" else [t - h for t, h in zip(total, half)]
    else:
        pads = [0] * (2 * n) if auto == "VALID" else _ints(a, "pads", [0] * (2 * n))
        if len(pads) != 2 * n or min(pads) < 0:
            raise Refuse(f"ConvTranspose's pads {pads}: expected {2 * n} pads >= 0")
        pb = pads[:n]
        outs = [f - b - e for f, b, e in zip(full, pb, pads[n:])]
        if min(outs) < 1:
            raise Refuse(f"ConvTranspose's pads {pads} leave an empty output")
    check_size("ConvTranspose", [N, M] + list(outs))
    grids = np.meshgrid(*[np.arange(s) for s in sp], indexing="ij")
    rows, level = _rows(x)
    plane, P = math.prod(sp), math.prod(outs)
    nz = _nonzero(W)
    outs_i, ins_i, coefs = [], [], []
    for off in itertools.product(*(range(v) for v in ks)):
        pos = [g * st[i] - pb[i] + off[i] * dl[i] for i, g in enumerate(grids)]
        valid = np.ones(grids[0].shape, dtype=bool)
        for i, p in enumerate(pos):
            valid &= (p >= 0) & (p < outs[i])
        if not valid.any():
            continue
        target = np.ravel_multi_index([p[valid] for p in pos], outs)
        src = np.flatnonzero(valid.reshape(-1))
        for b in range(N):
            for c in range(C):
                for ml in range(Mg):
                    if not nz[(c, ml) + off]:
                        continue
                    m = (c // Cg) * Mg + ml
                    ins_i.append((b * C + c) * plane + src)
                    outs_i.append((b * M + m) * P + target)
                    coefs.append(np.full(src.shape, W[(c, ml) + off], dtype=object))
    const = None if B is None else np.tile(np.repeat(B, P), N)
    E = _apply(rows, N * M * P, outs_i, ins_i, coefs, const)
    return Aff(E.reshape((N, M) + tuple(outs)), level)


def _apply(rows, size, outs_i, ins_i, coefs, const) -> np.ndarray:
    if outs_i:
        o, i = np.concatenate(outs_i), np.concatenate(ins_i)
        c = np.concatenate([np.asarray(v, dtype=object) for v in coefs])
    else:
        o, i, c = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, dtype=object)
    return apply_sparse(rows, size, o, i, c, const)


def _shape(x) -> tuple:
    return x.shape if isinstance(x, Aff) else np.shape(x)


def _pool_geometry(op: str, x, a: dict, need_dilation: bool = True):
    S = _shape(x)
    ks = _ints(a, "kernel_shape", [])
    if len(S) != len(ks) + 2 or not ks:
        raise Refuse(f"{op} with kernel_shape {ks} on a tensor of shape {list(S)}")
    ceil = int(a.get("ceil_mode", 0))
    if ceil not in (0, 1):
        raise Refuse(f"{op} with ceil_mode {ceil}: expected 0 or 1")
    sp = tuple(S[2:])
    outs, st, dl, pb, pe = window_geometry(op, sp, ks, a, bool(ceil))
    return S, sp, ks, outs, st, dl, pb, pe


def average_pool(x, a: dict) -> Aff:
    """AveragePool: the mean over each window; its divisor counts the padding positions
    inside the declared pads when count_include_pad = 1, else only the input's."""
    S, sp, ks, outs, st, dl, pb, pe = _pool_geometry("AveragePool", x, a)
    include = int(a.get("count_include_pad", 0))
    idx = window_index(sp, outs, ks, st, dl, pb)
    if include:
        # positions inside [-pad_begin, size + pad_end) count; beyond (ceil_mode) they do not
        big = tuple(s + b + e for s, b, e in zip(sp, pb, pe))
        counts = (window_index(big, outs, ks, st, dl, [0] * len(sp)) >= 0).sum(axis=0)
    else:
        counts = (idx >= 0).sum(axis=0)
    if (counts == 0).any():
        raise Refuse("AveragePool with a window entirely in the padding")
    rows, level = _rows(x)
    plane, P = math.prod(sp), idx.shape[1]
    inv = np.array([ONE / Q(int(c)) for c in counts], dtype=object)
    outs_i, ins_i, coefs = [], [], []
    mask = idx >= 0
    o_grid = np.broadcast_to(np.arange(P), idx.shape)[mask]
    cf = np.broadcast_to(inv, idx.shape)[mask]
    for nc in range(S[0] * S[1]):
        ins_i.append(nc * plane + idx[mask])
        outs_i.append(nc * P + o_grid)
        coefs.append(cf)
    E = _apply(rows, S[0] * S[1] * P, outs_i, ins_i, coefs, None)
    return Aff(E.reshape(S[:2] + tuple(outs)), level)


def max_pool_pieces(x: Aff, a: dict) -> np.ndarray:
    """MaxPool's pieces: for each output element, the rows of its window (positions in the
    padding left out; a shorter window repeats a row, which leaves the max unchanged); shape
    (N, C, *outs, prod(kernel))."""
    S, sp, ks, outs, st, dl, pb, pe = _pool_geometry("MaxPool", x, a)
    idx = window_index(sp, outs, ks, st, dl, pb)
    valid = idx >= 0
    if not valid.any(axis=0).all():
        raise Refuse("MaxPool with a window entirely in the padding")
    first = idx[valid.argmax(axis=0), np.arange(idx.shape[1])]
    idx = np.where(valid, idx, first[None, :])
    planes = x.E.reshape(S[0] * S[1], -1)
    pieces = planes[:, idx.T]  # (NC, P, K)
    return pieces.reshape(S[:2] + tuple(outs) + (idx.shape[0],))


def pad(x, pads: list[int], mode: str, value, axes: list[int] | None):
    """Pad (or crop, for negative pads): constant (the value), reflect (mirrored on the edge
    element, not repeating it), edge (repeating it) or wrap."""
    S = _shape(x)
    r = len(S)
    axes = list(range(r)) if axes is None else axes
    if len(pads) != 2 * len(axes):
        raise Refuse(f"Pad's pads has {len(pads)} values, expected {2 * len(axes)} (2 per axis)")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise Refuse(f"Pad with mode {mode!r}: expected constant, reflect, edge or wrap")
    begin, end = [0] * r, [0] * r
    for j, ax in enumerate(axes):
        begin[ax], end[ax] = pads[j], pads[len(axes) + j]
    idx = np.arange(math.prod(S), dtype=np.int64).reshape(S)
    idx = idx[tuple(slice(max(0, -b), d - max(0, -e)) for b, e, d in zip(begin, end, S))]
    if 0 in idx.shape and (mode != "constant" or any(b > 0 or e > 0 for b, e in zip(begin, end))):
        if mode != "constant":
            raise Refuse(f"Pad with mode {mode} of an empty tensor")
    widths = [(max(0, b), max(0, e)) for b, e in zip(begin, end)]
    check_size("Pad", [d + b + e for d, (b, e) in zip(idx.shape, widths)])
    if mode != "constant":
        for (b, e), d in zip(widths, idx.shape):
            if mode == "reflect" and (b or e) and (b >= d or e >= d):
                raise Refuse(f"Pad with mode reflect by {max(b, e)} on an axis of size {d}")
    idx = (
        np.pad(idx, widths, mode="constant", constant_values=-1)
        if mode == "constant"
        else np.pad(idx, widths, mode=cast(Any, mode))
    )
    if isinstance(x, Aff):
        flat = x.E.reshape(-1)
        fill = const_row(value)
        out = np.empty(idx.shape, dtype=object)
        for pos, i in np.ndenumerate(idx):
            out[pos] = flat[i] if i >= 0 else fill
        return Aff(out, x.level)
    flat = x.reshape(-1)
    out = np.empty(idx.shape, dtype=object)
    for pos, i in np.ndenumerate(idx):
        out[pos] = flat[i] if i >= 0 else value
    return out


def slice_(x, starts, ends, axes, steps):
    """Slice: numpy's (and Python's) slicing rules, which ONNX's clamping follows."""
    S = _shape(x)
    r = len(S)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not (len(starts) == len(ends) == len(axes) == len(steps)):
        raise Refuse("Slice's starts, ends, axes and steps differ in length")
    if any(s == 0 for s in steps):
        raise Refuse("Slice with a step of 0")
    index = [slice(None)] * r
    for s, e, ax, t in zip(starts, ends, axes, steps):
        if not -r <= ax < r:
            raise Refuse(f"Slice's axis {ax} is out of range for a tensor of rank {r}")
        index[ax % r] = slice(s, e, t)
    if isinstance(x, Aff):
        return Aff(x.E[tuple(index)], x.level)
    return x[tuple(index)]
