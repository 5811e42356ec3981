"""Exact integer arrays in radix 2^21, vectorized with numpy (an untrusted fast path).

An integer array X is stored as its digits X = sum_t X_t R^t, R = 2^S, S = 21, in one int64
array of shape (m, *shape).  *Canonical* digits have 0 <= X_t < R for t < m - 1 and a signed
top digit with |X_{m-1}| <= R, so X < 0 exactly when X_{m-1} < 0, and X = Y exactly when all
digits agree (for one digit count).  Every array also carries an integer ``bound`` with
|X| <= bound, from which the digit count is chosen.

Why this is exact: a product of a canonical digit and a multiplier digit (|.| < R) is below
2^42 in magnitude, so a float64 matrix product over an inner dimension n <= CHUNK = 2^11 only
ever adds integers below n 2^42 <= 2^53, each of which float64 represents exactly, in any
order of summation and with or without fused multiply-adds (columns whose entries are below
2^(53 - S - bits(n)) are multiplied unsplit, by the same count).  The float64 products are
converted to int64, summed and carried in int64, and digit sums are settled before they could
reach 2^62.  No rounding happens anywhere; the tests compare every result with Python
integers.

This module sits outside the kernel: the kernel's definitional evaluators (``kernel/maxout.py``,
``kernel/transformer.py``) stay the reference, and nothing that says "proved" depends on this.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import ThreadpoolController

from ..kernel.rational import IntMatrix

S = 21
R = 1 << S
MASK = R - 1
CHUNK = 1 << 11  # inner dimension of one exact float64 product: CHUNK * R^2 <= 2^53
_INT64_SAFE = 1 << 62


def _keep_freed_heap_pages(pad: int = 64 << 20) -> None:
    """Ask glibc's malloc to keep ``pad`` bytes of freed heap (M_TOP_PAD) instead of handing
    it back to the kernel at once.  The digit arrays here are megabytes each and are freed and
    allocated again in every layer; faulting their pages back in cost 5-7x the arithmetic
    itself (measured on a 256-wide product: 9.4 ms against 1.35 ms).  Only the allocator's
    policy changes, never a value; off glibc this does nothing."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-2, pad)  # M_TOP_PAD
    except (OSError, AttributeError):
        pass


_keep_freed_heap_pages()

_blas: list[ThreadpoolController] = []


def one_blas_thread():
    """A context in which BLAS runs on one thread.  The products here are small (at most a
    few million multiply-adds each), and waking OpenBLAS's threads for every one of them cost
    up to 30x the product itself on this 2-core machine (measured: 5 ms against 0.15 ms)."""
    if not _blas:
        _blas.append(ThreadpoolController())
    return _blas[0].limit(limits=1, user_api="blas")


def digit_count(bound: int) -> int:
    """Digits m such that every |x| <= bound has a canonical form with |top digit| < R / 2."""
    return (int(bound).bit_length() + S) // S


def magnitude_digits(value: int, m: int) -> list[int]:
    """m radix-R digits of ``value`` with its sign on each: |d_t| < R and value = sum d_t R^t.
    Not canonical, but a small negative number stays in one digit (canonical digits of -2 are
    all non-zero), which is what a fixed multiplier wants."""
    sign = -1 if value < 0 else 1
    return [sign * d for d in digits_of(abs(value), m)]


def digits_of(value: int, m: int) -> list[int]:
    """The m canonical digits of the Python integer ``value`` (top digit signed)."""
    out = []
    for _ in range(m - 1):
        out.append(value & MASK)
        value >>= S
    out.append(value)
    return out


@dataclass(frozen=True, slots=True)
class IntArray:
    """An exact integer array: ``digits`` (m, *shape) canonical, |value| <= ``bound``."""

    digits: np.ndarray
    bound: int

    @property
    def shape(self) -> tuple[int, ...]:
        return self.digits.shape[1:]

    @staticmethod
    def from_ints(values, shape) -> IntArray:
        """The array of the Python integers ``values`` (flat, row-major) in ``shape``."""
        values = list(values)
        bound = max(map(abs, values), default=0)
        m = digit_count(bound)
        if bound < _INT64_SAFE:
            a = np.array(values, dtype=np.int64).reshape(shape)
            d = np.empty((m,) + tuple(shape), dtype=np.int64)
            for t in range(m - 1):
                d[t] = a & MASK
                a = a >> S
            d[m - 1] = a
        else:
            d = np.array([digits_of(int(v), m) for v in values], dtype=np.int64).T
            d = d.reshape((m,) + tuple(shape))
        return IntArray(d, bound)

    def to_int_matrix(self):
        """The 2-D array as a FLINT integer matrix (``kernel.rational.IntMatrix``).

        Three canonical digits make one 63-bit word w_j >= 0 (the top word keeps the sign),
        so FLINT only ever reads machine integers and adds the words times 2^(63 j) in C."""
        rows, cols = self.shape
        d = self.digits
        m = d.shape[0]
        result = None
        for j in range(0, m, 3):
            w = d[j].copy()
            for i in range(1, 3):
                if j + i < m:
                    w += d[j + i] << (S * i)
            part = IntMatrix(rows, cols, w.ravel().tolist())
            result = part if result is None else result + part * (1 << (S * j))
        return result

    def to_ints(self) -> list[int]:
        """The entries as Python integers, flat and row-major."""
        acc = self.digits[-1].astype(object)
        for t in range(self.digits.shape[0] - 2, -1, -1):
            acc = acc * R + self.digits[t].astype(object)
        return [int(v) for v in acc.ravel()]

    def reshape(self, *shape) -> IntArray:
        return IntArray(self.digits.reshape((self.digits.shape[0],) + shape), self.bound)

    def __getitem__(self, index) -> IntArray:
        """Entries ``index`` (any numpy index on the value axes, ``None`` adds an axis); the
        bound is kept."""
        if not isinstance(index, tuple):
            index = (index,)
        return IntArray(self.digits[(slice(None),) + index], self.bound)


def carry(acc: np.ndarray, bound: int, owned: bool = False) -> IntArray:
    """The canonical array of the int64 digit accumulator ``acc`` (value sum_t acc_t R^t,
    digits of any size below 2^62), given |value| <= bound.

    Top digits that the actual values do not need are then dropped (a top digit of 0 or -1
    merges into the one below, which stays within [-R, R)), and the bound is tightened to
    (max |top digit| + 1) R^(m-1), so loose a-priori bounds never cost digits.  ``owned``:
    acc is the caller's scratch and may be overwritten."""
    m = digit_count(bound)
    if acc.shape[0] < m:
        acc = np.concatenate([acc, np.zeros((m - acc.shape[0],) + acc.shape[1:], np.int64)])
    elif not owned:
        acc = acc.copy()
    top = acc.shape[0]
    _settle(acc)
    # Digits above m - 1 fold into the top digit; |value| <= bound keeps it below R / 2, and
    # every partial fold floor(value / R^j) below R^(top - j) fits in int64 on the way.
    for t in range(top - 2, m - 2, -1):
        acc[t] += acc[t + 1] << S
    if acc[0].size == 0:
        return IntArray(acc[:m], bound)
    lo, hi = int(acc[m - 1].min()), int(acc[m - 1].max())
    while m > 1 and -1 <= lo and hi <= 0:
        acc[m - 2] += acc[m - 1] << S
        m -= 1
        lo, hi = int(acc[m - 1].min()), int(acc[m - 1].max())
    return IntArray(acc[:m], min(bound, (max(-lo, hi) + 1) << (S * (m - 1))))


def _settle(acc: np.ndarray) -> None:
    """Carry the int64 digit accumulator ``acc`` in place, keeping its value: every digit but
    the top one ends in [0, R).  Accumulations call it before their digit sums could leave
    _DIGIT_SUMS; the top digit gets no terms of its own, only these carries."""
    c = np.empty(acc.shape[1:], np.int64)
    for t in range(acc.shape[0] - 1):
        np.right_shift(acc[t], S, out=c)
        acc[t] &= MASK
        acc[t + 1] += c


_DIGIT_SUMS = 1 << 62  # |digit sum| an accumulator may reach before carry (or _settle)


def _room(acc: np.ndarray, load: int, more: int) -> int:
    """The bound on acc's digit sums after adding terms of magnitude <= ``more`` to them, when
    they now stay below ``load``: acc is settled first if the sum could leave _DIGIT_SUMS."""
    if load + more <= _DIGIT_SUMS:
        return load + more
    _settle(acc)
    return R + more


def _widen(x: IntArray, m: int) -> np.ndarray:
    """The digits of x as m >= x's digit count digits (a canonical top digit sign-extends)."""
    d = x.digits
    k = d.shape[0]
    if k == m:
        return d
    out = np.empty((m,) + d.shape[1:], np.int64)
    out[: k - 1] = d[: k - 1]
    top = d[k - 1]
    for t in range(k - 1, m - 1):
        out[t] = top & MASK
        top = top >> S
    out[m - 1] = top
    return out


def add(x: IntArray, y: IntArray) -> IntArray:
    """x + y (shapes broadcast)."""
    m = max(x.digits.shape[0], y.digits.shape[0])
    return carry(_widen(x, m) + _widen(y, m), x.bound + y.bound, owned=True)


def scale(x: IntArray, c: int) -> IntArray:
    """c x for a Python integer c of any size."""
    c = int(c)
    if c == 1:
        return x
    # |c| < 2^40: one multiplier, |c digit| < 2^61; otherwise c's own radix-R digits
    cd = [c] if abs(c) < 1 << (61 - S) else magnitude_digits(c, digit_count(abs(c)))
    m = x.digits.shape[0]
    acc = np.zeros((m + len(cd),) + x.shape, np.int64)
    for a, v in enumerate(cd):
        if v:
            acc[a : a + m] += v * x.digits
    return carry(acc, abs(c) * x.bound, owned=True)


def at_least(x: IntArray, y: IntArray) -> np.ndarray:
    """The boolean array x >= y (shapes broadcast), from the carry chain of x - y: its value
    sum_t d_t R^t is >= 0 exactly when d_(m-1) + floor(sum_(t<m-1) d_t R^t / R^(m-1)) is."""
    m = max(x.digits.shape[0], y.digits.shape[0])
    d = _widen(x, m) - _widen(y, m)
    c = 0
    for t in range(m - 1):
        c = (d[t] + c) >> S
    return d[m - 1] + c >= 0


def maximum(x: IntArray, y: IntArray) -> IntArray:
    """The entrywise max(x, y) (same shapes)."""
    m = max(x.digits.shape[0], y.digits.shape[0])
    xd, yd = _widen(x, m), _widen(y, m)
    return IntArray(np.where(at_least(x, y), xd, yd), max(x.bound, y.bound))


def minimum(x: IntArray, y: IntArray) -> IntArray:
    """The entrywise min(x, y) (same shapes)."""
    m = max(x.digits.shape[0], y.digits.shape[0])
    xd, yd = _widen(x, m), _widen(y, m)
    return IntArray(np.where(at_least(x, y), yd, xd), max(x.bound, y.bound))


def equal(x: IntArray, y: IntArray) -> np.ndarray:
    """The boolean array x == y (canonical digits are unique)."""
    m = max(x.digits.shape[0], y.digits.shape[0])
    return (_widen(x, m) == _widen(y, m)).all(axis=0)


def relu(x: IntArray, owned: bool = False) -> IntArray:
    """The entrywise max(x, 0).  ``owned``: x's digits may be overwritten."""
    if owned:
        np.multiply(x.digits, x.digits[-1] >= 0, out=x.digits)
        return x
    return IntArray(x.digits * (x.digits[-1] >= 0), x.bound)


def signs(x: IntArray) -> np.ndarray:
    """The int8 array sign(x) in {-1, 0, 1}: x < 0 exactly when its top digit is, x = 0
    exactly when every digit is."""
    return x.digits.any(axis=0).astype(np.int8) - 2 * (x.digits[-1] < 0).astype(np.int8)


# Cost model for choosing a matrix's form (ns per output entry and digit of x, measured here):
# a float64 product of a digit block costs about 0.027 per column plus 4 for its conversions;
# a gathered multiply-add costs about 1.8 per non-zero and coefficient digit.
_DENSE_PER_COLUMN, _DENSE_FIXED, _SPARSE_PER_TERM = 0.027, 4.0, 1.8


@dataclass(frozen=True, slots=True)
class IntMatrixDigits:
    """A fixed integer affine map x -> W x + b e (W: rows x cols, e the homogeneous value),
    prepared for exact products.

    Only the rows ``row_index`` are computed when it is set (the others are zero rows of
    [W | b]).  W x = (dense part) + (sparse part), each over its own columns.  Dense part:
    ``blocks`` (a, columns, block) of float64 blocks, at most CHUNK columns each, at digit
    position a; the columns index ``used`` (W's non-zero columns; None: all of them).  Columns
    with small entries form one unsplit block at a = 0, the others one block per non-zero digit
    W_a (sign and magnitude, |W_a| < R).  Sparse part, for rows with at most p non-zeros there:
    their columns ``idx`` (kept rows x p) and coefficients ``coef`` (mc, kept rows, p), split
    into radix-R digits only when a coefficient times R p could leave int64 (0 pads)."""

    rows: int
    cols: int
    row_index: np.ndarray | None
    row_l1: int  # max_i sum_j |W_ij|
    bias: IntArray | None  # b on the kept rows (rows x 1), None when b = 0
    blocks: tuple  # (digit, columns or None, float64 block)
    used: np.ndarray | None
    idx: np.ndarray | None
    coef: np.ndarray | None
    in_place: tuple[bool, ...] = ()  # sparse: idx[:, q] reads row r from row r
    terms: tuple = ()  # sparse: (q, a, coef[a, :, q]) when not all 0
    selection: bool = False  # sparse, p = 1, every coefficient 1
    scalar: int | None = None  # sparse, W = c I with c unsplit

    @property
    def kept(self) -> int:
        return self.rows if self.row_index is None else len(self.row_index)

    @staticmethod
    def from_rows(
        rows: Sequence[Sequence[int]],
        cols: int,
        bias=None,
        drop_zero_rows: bool = False,
        form: str | None = None,
    ) -> IntMatrixDigits:
        """``form``: "dense", "sparse", or None to choose by the cost model: all sparse, all
        dense, or dense on the unsplit columns and sparse on the others (the few large
        entries of a gate, say), whichever is cheapest."""
        rows = [[int(v) for v in r] for r in rows]
        bias = [int(v) for v in bias] if bias is not None else [0] * len(rows)
        n = len(rows)
        kept = (
            [i for i in range(n) if any(rows[i]) or bias[i]] if drop_zero_rows else list(range(n))
        )
        used = [j for j in range(cols) if any(rows[i][j] for i in kept)]
        l1 = max((sum(map(abs, r)) for r in rows), default=0)
        b = IntArray.from_ints([bias[i] for i in kept], (len(kept), 1)) if any(bias) else None
        row_index = np.array(kept, dtype=np.intp) if drop_zero_rows else None
        W = [[rows[i][j] for j in used] for i in kept]
        # Columns whose entries stay below 2^(53 - S - bits(width)) need no split: one float64
        # product over them adds fewer than 2^bits(width) terms below 2^(53 - bits(width)).
        wide_limit = 1 << (53 - S - min(len(used), CHUNK).bit_length())
        wide = [max((abs(r[c]) for r in W), default=0) < wide_limit for c in range(len(used))]
        split = [c for c in range(len(used)) if not wide[c]]
        magnitudes = IntArray.from_ints(
            [abs(r[c]) for r in W for c in split], (len(kept), len(split))
        )
        sign = np.array([[(r[c] > 0) - (r[c] < 0) for c in split] for r in W], np.int64)
        Wd = magnitudes.digits * sign.reshape((len(kept), len(split)))  # sign-magnitude digits
        on = [int((Wd[a] != 0).any(axis=0).sum()) for a in range(Wd.shape[0])]
        split_cost = sum(_DENSE_PER_COLUMN * w + _DENSE_FIXED for w in on if w)
        wide_cost = _DENSE_PER_COLUMN * sum(wide) + _DENSE_FIXED if any(wide) else 0
        p_all, mc_all, _ = _sparse_shape(W, range(len(used)))
        p_some, mc_some, _ = _sparse_shape(W, split)
        all_sparse = _SPARSE_PER_TERM * p_all * mc_all
        some_sparse = _SPARSE_PER_TERM * p_some * mc_some
        if (
            form == "sparse"
            or form is None
            and all_sparse <= min(wide_cost + split_cost, wide_cost + some_sparse)
        ):
            sparse_cols, blocks = list(range(len(used))), []
        else:
            hybrid = form is None and some_sparse < split_cost
            sparse_cols = split if hybrid else []
            blocks = _dense_blocks(
                W, wide, [] if hybrid else split, Wd[:, :, :0] if hybrid else Wd, len(used)
            )
        idx, coef = _sparse_terms(W, sparse_cols, used)
        kwargs: dict[str, Any] = {}
        if idx is not None:
            k, p = idx.shape
            same = tuple(k == cols and bool((idx[:, q] == np.arange(cols)).all()) for q in range(p))
            terms = tuple(
                (q, a, coef[a, :, q].reshape(1, k, 1))
                for q in range(p)
                for a in range(coef.shape[0])
                if coef[a, :, q].any()
            )
            only = not blocks and p == 1 and coef.shape[0] == 1
            kwargs = dict(
                in_place=same,
                terms=terms,
                selection=only and bool((coef == 1).all()),
                scalar=int(coef[0, 0, 0])
                if only and same[0] and k and bool((coef == coef[0, 0, 0]).all())
                else None,
            )
        return IntMatrixDigits(
            n,
            cols,
            row_index,
            l1,
            b,
            tuple(blocks),
            None if len(used) == cols else np.array(used, dtype=np.intp),
            idx,
            coef,
            **kwargs,
        )


def _sparse_shape(W: list[list[int]], columns) -> tuple[int, int, bool]:
    """(p, mc, unsplit) of W on ``columns``: non-zeros per row, coefficient digits, and
    whether one int64 multiplier suffices (|c| R p stays below 2^61)."""
    p = max((sum(1 for c in columns if r[c]) for r in W), default=0)
    cmax = max((abs(r[c]) for r in W for c in columns), default=0)
    unsplit = cmax < 1 << (61 - S - p.bit_length())
    return p, 1 if unsplit else digit_count(cmax), unsplit


def _sparse_terms(W, columns, used):
    """(idx, coef) of W restricted to ``columns`` (indices into ``used``), or (None, None)."""
    columns = list(columns)
    if not columns:
        return None, None
    nz = [[c for c in columns if r[c]] for r in W]
    p, mc, unsplit = _sparse_shape(W, columns)
    idx = np.zeros((len(W), p), dtype=np.intp)
    coef = np.zeros((mc, len(W), p), dtype=np.int64)
    for r, (row, cs) in enumerate(zip(W, nz)):
        for q, c in enumerate(cs):
            idx[r, q] = used[c]
            coef[:, r, q] = [row[c]] if unsplit else magnitude_digits(row[c], mc)
    return idx, coef


def _dense_blocks(W, wide, split, Wd, width) -> list:
    """(a, columns, float64 block): the unsplit columns at digit 0, then each digit a of the
    ``split`` columns on those where it is not zero; columns index ``used`` (None: all)."""
    blocks = []
    wide_cols = [c for c in range(width) if wide[c]]
    groups = [
        (
            0,
            wide_cols,
            np.array([[r[c] for c in wide_cols] for r in W], dtype=np.float64).reshape(
                len(W), len(wide_cols)
            ),
        )
    ]
    for a in range(Wd.shape[0]):
        on = np.flatnonzero((Wd[a] != 0).any(axis=0))
        groups.append((a, [split[c] for c in on], Wd[a][:, on].astype(np.float64)))
    for a, cs, M in groups:
        for c in range(0, len(cs), CHUNK):
            part = np.array(cs[c : c + CHUNK], dtype=np.intp)
            full = len(cs) == width and width <= CHUNK
            blocks.append((a, None if full else part, np.ascontiguousarray(M[:, c : c + CHUNK])))
    return blocks


def matmul(W: IntMatrixDigits, x: IntArray, e: int = 0) -> IntArray:
    """The exact W x + b e for x of shape (cols, B); with ``W.row_index`` set, only the rows
    W.row_index of it."""
    mx = x.digits.shape[0]
    cols, B = x.shape
    if cols != W.cols:
        raise ValueError(f"product of a {W.rows} x {W.cols} matrix with {cols} rows")
    rows = W.kept
    bias = W.bias if e else None  # b e enters the digit sums as e's digits times b's
    ed = None
    if bias is not None:
        ed = [e] if abs(e) < 1 << (60 - S) else magnitude_digits(e, digit_count(abs(e)))
    if W.selection and bias is None:  # rows of x, unchanged: nothing to add or carry
        assert W.idx is not None  # a selection is sparse
        return IntArray(x.digits[:, W.idx[:, 0], :], x.bound)
    low = 0 if bias is None or ed is None else len(ed) + bias.digits.shape[0]
    top = max((a for a, _, _ in W.blocks), default=-1) + 1
    mc = 0 if W.coef is None else W.coef.shape[0]
    # One digit more than the terms reach: the top digit only ever takes carries (_settle).
    size = max(max(top, mc) + mx, low) + 1
    # load bounds every |digit sum| of acc; each term adds at most |coefficient| R (|x digit|
    # <= R) or 2^53 (one exact float64 product) to it.  Many terms (hundreds of digit blocks
    # of huge weights, thousands of sparse terms) settle acc on the way instead of wrapping.
    if W.scalar is not None:  # c x (plus b e): one product
        acc = np.empty((size, rows, B), np.int64)
        np.multiply(x.digits, W.scalar, out=acc[:mx])
        acc[mx:] = 0
        load = abs(W.scalar) * R
    else:
        acc = np.zeros((size, rows, B), np.int64)
        load = 0
        gathered = -1
        for q, a, c in W.terms:  # sparse part: gathered multiply-adds
            if q != gathered:
                if W.in_place[q]:
                    G = x.digits
                else:
                    assert W.idx is not None  # sparse terms come with their columns
                    G = x.digits[:, W.idx[:, q], :]
                gathered = q
            load = _room(acc, load, int(np.abs(c).max()) * R)
            acc[a : a + mx] += c * G
    if W.blocks:  # dense part: one float64 product per block
        X = x.digits.transpose(1, 0, 2)
        X = (X if W.used is None else X[W.used]).reshape(-1, mx * B).astype(np.float64)
        for a, part, block in W.blocks:
            P = (block @ (X if part is None else X[part])).astype(np.int64)
            load = _room(acc, load, 1 << 53)
            acc[a : a + mx] += P.reshape(rows, mx, B).transpose(1, 0, 2)
    if bias is not None and ed is not None:
        mb = bias.digits.shape[0]
        for a, v in enumerate(ed):
            if v:
                load = _room(acc, load, abs(v) * R)
                acc[a : a + mb] += v * bias.digits
    bias_bound = bias.bound * abs(e) if bias is not None else 0
    return carry(acc, W.row_l1 * x.bound + bias_bound, owned=True)


def add_rows(x: IntArray, rows: np.ndarray | None, y: IntArray, owned: bool = False) -> IntArray:
    """x with y added to its rows ``rows`` (all rows when None).  ``owned``: x's digits are
    the caller's scratch and may be overwritten."""
    if rows is None:
        return add(x, y)
    part = add(x[rows], y)
    m = max(x.digits.shape[0], part.digits.shape[0])
    out = x.digits if owned and m == x.digits.shape[0] else np.array(_widen(x, m))
    out[:, rows] = _widen(part, m)
    return IntArray(out, max(x.bound, part.bound))


def inner_products(q: IntArray, k: IntArray) -> IntArray:
    """s[b, t, u] = sum_r q[r, b, t] k[r, b, u] for q, k of shape (r, B, n), r <= CHUNK:
    every digit pair is one exact batched float64 product (r R^2 <= 2^53).  Each digit a of q
    adds one such product to a digit sum; every 2^20 / r of them the sums are settled (numbers
    of a thousand digits would otherwise take more than 2^63)."""
    r, B, n = q.shape
    if r > CHUNK:
        raise ValueError(f"inner products over {r} > {CHUNK} coordinates")
    mq, mk = q.digits.shape[0], k.digits.shape[0]
    acc = np.zeros((mq + mk + 1, B, n, n), np.int64)  # the top digit takes carries only
    kd = [np.ascontiguousarray(k.digits[c].transpose(1, 0, 2), np.float64) for c in range(mk)]
    per = max(1, (_DIGIT_SUMS // (R * R)) // max(r, 1))
    for a in range(mq):
        if a and a % per == 0:
            _settle(acc)
        qa = np.ascontiguousarray(q.digits[a].transpose(1, 2, 0), np.float64)
        for c in range(mk):
            acc[a + c] += np.matmul(qa, kd[c]).astype(np.int64)
    return carry(acc, r * q.bound * k.bound, owned=True)
