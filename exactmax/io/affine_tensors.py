"""Affine tensors: what an ONNX graph computes, as exact affine functions of one level's units.

A value that depends on the input is an array (numpy, dtype object) of *rows*; a row is a dict
``{CONST: c, v: a_v, ...}`` that means c + sum_v a_v h_v, h being the units of one *level*
(level 0: the network's input, level l: the units of layer l).  Zero entries are left out, so a
convolution's row holds its window and nothing else: storage and work are proportional to the
non-zero weights, not to the width of the level.  Rows are never changed once made (results
share them freely).

``Layers`` holds the Maxout units made so far.  ``Layers.units_of`` turns every element of an
array of pieces (rows of level l) into one unit of layer l + 1 (the max of its pieces) and gives
the array of rows "that unit" of level l + 1; an element whose pieces are all constant is the
constant max.  ``Layers.carry`` brings a value to a later level through rank-1 units (one piece:
the unit equals its row), so branches of different depths meet: a residual connection
h + F(h) is h carried through F's layers, plus F(h).  A rank-1 unit is a Maxout unit like any
other; no layer needs to be uniform in rank.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..kernel.rational import ONE, ZERO, Q, RatMatrix

CONST = -1
"""The key of a row's constant term."""

Row = dict
"""{CONST: c, v: a_v}: the affine function c + sum a_v h_v (zero entries left out)."""


def const_row(c: Q) -> Row:
    return {CONST: c} if c else {}


def is_constant(r: Row) -> bool:
    return not r or (len(r) == 1 and CONST in r)


def row_add(a: Row, b: Row) -> Row:
    if not a:
        return b
    if not b:
        return a
    out = dict(a)
    for k, v in b.items():
        s = out.get(k)
        if s is None:
            out[k] = v
        else:
            s += v
            if s:
                out[k] = s
            else:
                del out[k]
    return out


def row_scale(a: Row, c: Q) -> Row:
    if not c:
        return {}
    if c == ONE:
        return a
    return {k: v * c for k, v in a.items()}


def combination(terms: Iterable[tuple[Q, Row]]) -> Row:
    """sum c * r over the terms, exactly."""
    out: dict = {}
    get = out.get
    for c, r in terms:
        if c == ONE:
            for k, v in r.items():
                out[k] = get(k, ZERO) + v
        elif c:
            for k, v in r.items():
                out[k] = get(k, ZERO) + c * v
    return {k: v for k, v in out.items() if v}


def obj(value) -> np.ndarray:
    """``value`` as an object array (numpy's frompyfunc gives a bare object for 0-d input)."""
    if isinstance(value, np.ndarray):
        return value
    a = np.empty((), dtype=object)
    a[()] = value
    return a


_add = np.frompyfunc(row_add, 2, 1)
_scale = np.frompyfunc(row_scale, 2, 1)
_lift = np.frompyfunc(const_row, 1, 1)
_neg = np.frompyfunc(lambda r: row_scale(r, Q(-1)), 1, 1)
_constant = np.frompyfunc(is_constant, 1, 1)


def add_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b elementwise, with numpy's broadcasting."""
    return obj(_add(a, b))


def scale_rows(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * c elementwise for a constant array c, with numpy's broadcasting."""
    return obj(_scale(a, c))


def lift(c: np.ndarray) -> np.ndarray:
    """The rows of a constant array (exact rationals)."""
    return obj(_lift(c)) if c.size else np.empty(c.shape, dtype=object)


def negate(a: np.ndarray) -> np.ndarray:
    return obj(_neg(a)) if a.size else a


def constants_mask(a: np.ndarray) -> np.ndarray:
    return np.asarray(_constant(a), dtype=bool) if a.size else np.zeros(a.shape, dtype=bool)


@dataclass
class Aff:
    """A tensor of rows ``E`` (its shape is the tensor's) in the units of ``level``."""

    E: np.ndarray
    level: int

    @property
    def shape(self) -> tuple:
        return self.E.shape


class Layers:
    """The Maxout units made so far: ``layers[l]`` are the units of layer l + 1, each the list
    of its pieces (rows of level l)."""

    def __init__(self, input_dim: int):
        self.input_dim = input_dim
        self.layers: list[list[list[Row]]] = []
        self._carried: dict[int, tuple[Aff, Aff]] = {}
        self.carried_units = 0

    @property
    def depth(self) -> int:
        return len(self.layers)

    def width(self, level: int) -> int:
        return self.input_dim if level == 0 else len(self.layers[level - 1])

    def units_of(self, level: int, pieces: np.ndarray) -> Aff:
        """One unit of layer level + 1 per element of ``pieces`` (shape S + (k,), rows of
        ``level``): the max of its k pieces.  The tensor of these units, of shape S, at level
        + 1; an element whose pieces are all constant is that constant max instead (and if
        all are, no unit is made and the constants stay at ``level``)."""
        shape, k = pieces.shape[:-1], pieces.shape[-1]
        flat = pieces.reshape(-1, k)
        constant = np.asarray(constants_mask(flat).all(axis=1), dtype=bool)
        out = np.empty(flat.shape[0], dtype=object)
        if constant.all():  # no unit: the constant maxima, at this level (no empty layer)
            for e in range(flat.shape[0]):
                out[e] = const_row(max(p.get(CONST, ZERO) for p in flat[e]))
            return Aff(out.reshape(shape), level)
        if level == len(self.layers):
            self.layers.append([])
        units = self.layers[level]
        for e in range(flat.shape[0]):
            ps = list(flat[e])
            if constant[e]:
                out[e] = const_row(max(p.get(CONST, ZERO) for p in ps))
            else:
                units.append(ps)
                out[e] = {len(units) - 1: ONE}
        return Aff(out.reshape(shape), level + 1)

    def carry(self, x: Aff, level: int) -> Aff:
        """x at ``level`` >= x.level, through rank-1 units (each equal to its one piece); the
        same value carried twice gives the same units."""
        if constants_mask(x.E).all():  # constants need no unit to reach any level
            return Aff(x.E, max(level, x.level))
        while x.level < level:
            key = id(x)
            if key in self._carried:
                x = self._carried[key][1]
                continue
            before = len(self.layers[x.level]) if x.level < len(self.layers) else 0
            up = self.units_of(x.level, x.E[..., None])
            self.carried_units += len(self.layers[x.level]) - before
            self._carried[key] = (x, up)  # keeps x alive, so its id is not reused
            x = up
        return x

    def common(self, values) -> tuple[int | None, list]:
        """The deepest level among the affine values (None if all are constant) and each value
        as an array of rows at that level (constants as rows too)."""
        levels = [v.level for v in values if isinstance(v, Aff)]
        if not levels:
            return None, list(values)
        level = max(levels)
        return level, [self.carry(v, level).E if isinstance(v, Aff) else lift(v) for v in values]


def contract(X: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Y[b, j] = sum_k M[k, j] X[b, k] for rows X (B x m) and a constant M (m x p).

    Sparse in M's non-zeros; when X's rows are long (an affine map composed with another
    without a nonlinearity between), each batch row goes through one FLINT product instead."""
    B, m = X.shape
    p = M.shape[1]
    Y = np.empty((B, p), dtype=object)
    nz = [[(k, M[k, j]) for k in range(m) if M[k, j]] for j in range(p)]
    terms = sum(len(c) for c in nz)
    for b in range(B):
        rows = X[b]
        length = sum(len(r) for r in rows) / max(m, 1)
        if length > 8 and terms * length > 2_000_000:
            Y[b] = _contract_dense(rows, M)
            continue
        for j in range(p):
            Y[b, j] = combination((c, rows[k]) for k, c in nz[j])
    return Y


def _contract_dense(rows, M: np.ndarray) -> list[Row]:
    keys = sorted({k for r in rows for k in r})
    col = {k: i for i, k in enumerate(keys)}
    m, p = M.shape
    entries = [ZERO] * (m * len(keys))
    for i, r in enumerate(rows):
        for k, v in r.items():
            entries[i * len(keys) + col[k]] = v
    R = RatMatrix(p, m, [M[k, j] for j in range(p) for k in range(m)]) * RatMatrix(
        m, len(keys), entries
    )
    out = []
    for j in range(p):
        out.append({k: R[j, i] for i, k in enumerate(keys) if R[j, i]})
    return out


def apply_sparse(
    E: np.ndarray,
    size: int,
    out_idx: np.ndarray,
    in_idx: np.ndarray,
    coef: np.ndarray,
    const: np.ndarray | None = None,
) -> np.ndarray:
    """The rows y_o = const_o + sum over the triples (o, i, c) of c * E_i, for o < size (E flat
    rows or exact constants; the triples in any order; zero coefficients allowed)."""
    order = np.argsort(out_idx, kind="stable")
    out_idx, in_idx, coef = out_idx[order], in_idx[order], coef[order]
    bounds = np.searchsorted(out_idx, np.arange(size + 1))
    Y = np.empty(size, dtype=object)
    rows = [r if isinstance(r, dict) else const_row(r) for r in E]
    for o in range(size):
        s, e = bounds[o], bounds[o + 1]
        y = combination((c, rows[i]) for c, i in zip(coef[s:e], in_idx[s:e]))
        if const is not None and const[o]:
            y = row_add(y, {CONST: const[o]})
        Y[o] = y
    return Y
