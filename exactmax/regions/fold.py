"""The fold networks of docs/notes/regions.md: Maxout networks of width n, rank k and depth L on
R^q whose linear regions reach the corrected Theorem 4.4 bound prod_i P(p_i, k)^(L-1) S(n, q, k).

Every unit is a convex function of one scalar s = w . h: with hinges h_1 < ... < h_r
(r <= k-1), jump J > 0 and linear coefficient a,

    u(s) = a s + sum_t J (s - h_t)_+ = max_{t=0..r} [ (a + J t) s - J (h_1 + ... + h_t) ],

padded to k pieces with copies of piece 0 shifted down by 1, 2, ... (never a max).

Fold layers 1..L-1: coordinate i gets p_i units and P = P(p_i, k) pieces, realising the
zig-zag Z_P (breakpoints j/P, slope +P first, Z_P(j/P) = j mod 2, linear beyond [0, 1]):
odd j are peaks, even j valleys; peak units (sign -1) take the peaks in order, k-1 each,
valley units (sign +1) the valleys; J = 2P; the first peak unit has a = -P, the others a = 0.
Then sum_u sign_u u(s) = Z_P(s) for every real s.  Layer 1 reads s = x_i, later layers the
signed sum of coordinate i's group of the layer before.

Last layer: unit j has direction w_j and offsets t_{j,1} < ... < t_{j,k-1}:
v_j = max_{t=0..k-1} [ (t+1) s_j - (t_{j,1} + ... + t_{j,t}) ], s_j = w_j . z, where z is
the folded input.  Offsets and directions are those of docs/notes/regions.md (q = 1 and q = 2), and
the general position of the last layer's lines (q = 2: no two units parallel, no three lines
through a point, every crossing inside (0, 1)^2) is checked exactly before the network is
returned; where docs/notes/regions.md's offsets put three lines through a point (q = 2, n >= 6),
each unit's offsets are shifted by a small amount of its own until the check passes.  For q >= 3
(not in docs/notes/regions.md) the directions come from a fixed sequence of small rationals and the
offsets lie around the cube's centre (``_generic_line``); general position (every q
hyperplanes of distinct units meet in one point inside (0, 1)^q, no point on q + 1) is checked
the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from ..kernel.polyhedron import Box
from ..kernel.rational import ONE, ZERO, Q


def fold_pieces(p: int, k: int) -> int:
    """P(p, k): pieces of the zig-zag that p units of rank k realise on one coordinate:
    p(k-1)+1 if p is even or k = 2, (p-1)(k-1)+2 if p is odd and k >= 3 (docs/notes/regions.md)."""
    if p < 1 or k < 2:
        raise ValueError(f"fold_pieces needs p >= 1 and k >= 2, got p = {p}, k = {k}")
    return p * (k - 1) + 1 if p % 2 == 0 or k == 2 else (p - 1) * (k - 1) + 2


def best_split(n: int, q: int, k: int) -> tuple[int, ...]:
    """A split n = p_1 + ... + p_q (p_i >= 1) maximising prod_i P(p_i, k), by dynamic
    programming over the parts (ties: the most even split found first)."""
    if not 1 <= q <= n:
        raise ValueError(f"cannot split {n} units among {q} coordinates (need 1 <= q <= n)")
    # best[c][r] = (product, parts) for r units over c coordinates
    best = {0: {0: (1, ())}}
    for c in range(1, q + 1):
        best[c] = {}
        for r in range(c, n - (q - c) + 1):
            cand = None
            for p in range(1, r - (c - 1) + 1):
                prev = best[c - 1].get(r - p)
                if prev is None:
                    continue
                val = prev[0] * fold_pieces(p, k)
                parts = tuple(sorted(prev[1] + (p,), reverse=True))
                if cand is None or val > cand[0]:
                    cand = (val, parts)
            best[c][r] = cand
    return best[q][n][1]


@dataclass(frozen=True, slots=True)
class FoldNetwork:
    """A built witness: the network, its domain (the unit box), how it was built."""

    net: MaxoutNetwork
    domain: Box
    split: tuple[int, ...]  # units per coordinate in the fold layers
    pieces: tuple[int, ...]  # P(p_i, k) per coordinate
    expected: int  # prod_i P_i^(L-1) * S(n, q, k), what the design gives
    construction: str  # "fold" or "zig-zag (docs/notes/regions.md, n = k = 3, L = 2)"


def _convex_unit(direction, a: Q, hinges, J: Q, k: int, shift_pad=True) -> Unit:
    """The unit a s + sum_t J (s - h_t)_+ with s = direction . h, padded to k pieces."""
    pieces, slope, icpt = [], a, ZERO
    pieces.append((slope, icpt))
    for h in hinges:
        slope, icpt = slope + J, icpt - J * h
        pieces.append((slope, icpt))
    if len(pieces) > k:
        raise ValueError(f"{len(hinges)} hinges need {len(pieces)} pieces, rank is {k}")
    s0, c0 = pieces[0]
    while len(pieces) < k:
        pieces.append((s0, c0 - (len(pieces) - len(hinges))))
    return Unit(tuple(Piece(tuple(sl * w for w in direction), c) for sl, c in pieces))


def zigzag_group(P: int, p: int, k: int):
    """[(sign, a, hinges)] for p units realising Z_P (see the module docstring)."""
    peaks = [Q(j, P) for j in range(1, P) if j % 2 == 1]
    valleys = [Q(j, P) for j in range(1, P) if j % 2 == 0]
    chunk = k - 1
    peak_units = [peaks[i : i + chunk] for i in range(0, len(peaks), chunk)]
    valley_units = [valleys[i : i + chunk] for i in range(0, len(valleys), chunk)]
    if len(peak_units) + len(valley_units) > p:
        raise ValueError(
            f"Z_{P} needs {len(peak_units) + len(valley_units)} units of rank {k}, only {p} given"
        )
    out = [(-1, -Q(P) if i == 0 else ZERO, hs) for i, hs in enumerate(peak_units)]
    out += [(+1, ZERO, hs) for hs in valley_units]
    out += [(0, ZERO, []) for _ in range(p - len(out))]  # idle units (none for P(p, k))
    return out


DIRECTIONS_Q2 = (
    1,
    -1,
    3,
    -3,
    Q(1, 3),
    Q(-1, 3),
    2,
    -2,
    Q(1, 2),
    Q(-1, 2),
    Q(3, 2),
    Q(-3, 2),
    Q(2, 3),
    Q(-2, 3),
    4,
    -4,
    Q(1, 4),
    Q(-1, 4),
)
"""s_j of the last layer's directions w_j = (1, s_j) for q = 2 (docs/notes/regions.md gives the
first eight; the rest continue the pattern, and general position is checked exactly)."""


def last_layer_lines(
    n: int, q: int, k: int, attempt: int = 0
) -> list[tuple[tuple[Q, ...], list[Q]]]:
    """[(w_j, [t_{j,1}, ..., t_{j,k-1}])] for the last layer (docs/notes/regions.md).  For q = 2 and
    ``attempt`` > 0, unit j's offsets are all shifted by the same small amount
    attempt * (r_j - 50) / (101 * 64 (N + 1)^2 (1 + |s_j|)), r_j = 37 j mod 101 (below the
    offsets' spacing 1 / (8 (N + 1)(1 + |s_j|))), to leave a triple point of docs/notes/regions.md's
    recipe; for q >= 3 ``attempt`` changes the generic directions (``_generic_line``)."""
    N = n * (k - 1)
    out = []
    for j in range(1, n + 1):
        if q == 1:
            w = (ONE,)
            ts = [
                Q(1, 2) + Q(2 * ((j - 1) * (k - 1) + i) - N - 1, 16 * (N + 1)) for i in range(1, k)
            ]
        elif q == 2:
            if j > len(DIRECTIONS_Q2):
                raise ValueError(f"no direction for unit {j} (at most {len(DIRECTIONS_Q2)})")
            s = Q(DIRECTIONS_Q2[j - 1])
            w = (ONE, s)
            shift = Q(attempt * ((37 * j) % 101 - 50), 101 * 64 * (N + 1) ** 2) / (1 + abs(s))
            ts = [
                (1 + s) / 2
                + Q(2 * ((j - 1) * (k - 1) + i) - N - 1) / (8 * (N + 1) * (1 + abs(s)))
                + shift
                for i in range(1, k)
            ]
        else:
            w, ts = _generic_line(j, q, k, N, attempt)
        out.append((w, ts))
    return out


def _generic_line(j: int, q: int, k: int, N: int, attempt: int):
    """q >= 3 (not in docs/notes/regions.md): w_j = (1, a_2, ..., a_q) with small rationals a_i
    from a fixed sequence (changed with ``attempt``), offsets t_{j,i} spread by
    (2 idx - N - 1) / (8 (N + 1) |w_j|_1) around w_j . (1/2, ..., 1/2), so that every
    hyperplane passes close to the centre of the unit cube; general position is checked."""
    w = [ONE]
    for i in range(2, q + 1):
        r = (7 * j * i + 3 * i * i + 11 * attempt * i + j * j) % 17 - 8
        w.append(Q(r if r else 9, 1 + (j + i + attempt) % 3))
    w = tuple(w)
    norm = sum(abs(v) for v in w)
    centre = sum(w, ZERO) / 2
    ts = [
        centre + Q(2 * ((j - 1) * (k - 1) + i) - N - 1) / (8 * (N + 1) * norm) for i in range(1, k)
    ]
    return w, ts


def check_general_position(lines) -> None:
    """Raise ValueError unless the hyperplanes {z : w_j . z = t} of different units are not
    parallel, no point lies on q + 1 of them, and every crossing of q of them (for q = 1,
    every point) lies in the open unit box.  Exact (q >= 3: ``_check_general_position_q``)."""
    q = len(lines[0][0])
    if q >= 3:
        return _check_general_position_q(lines, q)
    if q == 1:
        pts = [t / w[0] for w, ts in lines for t in ts]
        if len(set(pts)) != len(pts) or not all(0 < x < 1 for x in pts):
            raise ValueError("last-layer breakpoints repeat or leave (0, 1)")
        return
    flat = [(j, w, t) for j, (w, ts) in enumerate(lines) for t in ts]
    crossings: dict = {}
    for a in range(len(flat)):
        for b in range(a + 1, len(flat)):
            (ja, wa, ta), (jb, wb, tb) = flat[a], flat[b]
            if ja == jb:
                continue
            det = wa[0] * wb[1] - wa[1] * wb[0]
            if det == 0:
                raise ValueError(f"units {ja} and {jb} have parallel lines")
            x = ((ta * wb[1] - tb * wa[1]) / det, (wa[0] * tb - wb[0] * ta) / det)
            if not all(0 < v < 1 for v in x):
                raise ValueError(f"lines of units {ja} and {jb} cross at {x}, outside (0,1)^2")
            crossings.setdefault(x, set()).update((a, b))
    for x, ls in crossings.items():
        if len(ls) > 2:
            raise ValueError(f"three lines meet at {x}")


def _check_general_position_q(lines, q: int) -> None:
    """q >= 3: no two hyperplanes of different units parallel, every q of them from distinct
    units meeting in one point inside the open unit cube, and no point on q + 1 of them."""
    from itertools import combinations

    from ..kernel.rational import RatMatrix

    flat = [(j, w, t) for j, (w, ts) in enumerate(lines) for t in ts]
    for (ja, wa, _), (jb, wb, _) in combinations(flat, 2):
        if ja != jb and all(
            wa[i] * wb[m] == wa[m] * wb[i] for i in range(q) for m in range(i + 1, q)
        ):
            raise ValueError(f"units {ja} and {jb} have parallel hyperplanes")
    points: dict = {}
    for group in combinations(range(len(flat)), q):
        if len({flat[g][0] for g in group}) < q:
            continue  # two of one unit are parallel: no point
        A = RatMatrix([list(flat[g][1]) for g in group])
        if A.det() == 0:
            raise ValueError(
                f"hyperplanes of units {sorted(flat[g][0] for g in group)} "
                "meet in more than a point"
            )
        x = tuple(A.solve(RatMatrix([[flat[g][2]] for g in group])).entries())
        if not all(0 < v < 1 for v in x):
            raise ValueError(f"hyperplanes meet at {x}, outside (0,1)^{q}")
        points.setdefault(x, set()).update(group)
    for x, hs in points.items():
        if len(hs) > q:
            raise ValueError(f"{len(hs)} hyperplanes meet at {x}")


def binomial_sum(n: int, d: int, k: int) -> int:
    """S(n, d, k) = sum_{j=0..d} C(n, j) (k-1)^j: the most regions one Maxout layer of width n
    and rank k cuts R^d into."""
    from math import comb

    return sum(comb(n, j) * (k - 1) ** j for j in range(d + 1))


def build_fold_network(
    q: int, n: int, k: int, L: int, split: tuple[int, ...] | None = None
) -> FoldNetwork:
    """The fold network of docs/notes/regions.md on R^q: L layers of width n and rank k (L-1 fold
    layers with the split ``split``, default ``best_split``, then the last layer's
    arrangement), identity read-out, domain [0, 1]^q."""
    if L < 1 or k < 2 or n < 1 or q < 1:
        raise ValueError("need L >= 1, k >= 2, n >= 1, q >= 1")
    for attempt in range(1 if q == 1 else 16):  # docs/notes/regions.md's offsets, then shifted ones
        lines = last_layer_lines(n, q, k, attempt)
        try:
            check_general_position(lines)
            break
        except ValueError as e:
            failure = e
    else:
        raise failure
    if L >= 2:
        split = split or best_split(n, q, k)
        if len(split) != q or sum(split) != n or min(split) < 1:
            raise ValueError(f"split {split} is not n = {n} in {q} positive parts")
    else:
        split = ()
    P = tuple(fold_pieces(p, k) for p in split)
    layers = []
    # the folded coordinate i of the current layer's input, as a weight vector on it
    width = q
    coords = [tuple(ONE if t == i else ZERO for t in range(q)) for i in range(q)]
    for _ in range(L - 1):
        units, signs = [], []
        for i, (p, Pi) in enumerate(zip(split, P)):
            group = zigzag_group(Pi, p, k)
            for sign, a, hs in group:
                units.append(_convex_unit(coords[i], a, hs, Q(2 * Pi), k))
                signs.append((i, sign))
        layers.append(Layer(tuple(units)))
        width = len(units)
        coords = [tuple(Q(sg) if ci == i else ZERO for ci, sg in signs) for i in range(q)]
    last = []
    for w, ts in lines:
        s = tuple(sum((wi * c[t] for wi, c in zip(w, coords)), ZERO) for t in range(width))
        pieces, acc = [], ZERO
        for t in range(k):
            if t > 0:
                acc += ts[t - 1]
            pieces.append(Piece(tuple((t + 1) * v for v in s), -acc))
        last.append(Unit(tuple(pieces)))
    layers.append(Layer(tuple(last)))
    box = Box((ZERO,) * q, (ONE,) * q)
    expected = binomial_sum(n, q, k)
    for Pi in P:
        expected *= Pi ** (L - 1)
    net = MaxoutNetwork(
        q,
        tuple(layers),
        None,
        box,
        {
            "description": f"fold network of docs/notes/regions.md: q = {q}, n = {n}, "
            f"k = {k}, L = {L}, split {list(split)}"
            + (f"; last-layer offsets shifted (attempt {attempt})" if attempt else "")
        },
    )
    return FoldNetwork(net, box, tuple(split), P, expected, "fold")


def build_zigzag_43() -> FoldNetwork:
    """The special network of docs/notes/regions.md for q = 1, n = k = 3, L = 2 (43 regions, the
    maximum of its shape): u1 = -x + 2(x-1/7)_+ + 2(x-3/7)_+, u2 = 2(x-5/7)_+ + 2(x-6/7)_+,
    u3 = 2(x-2/7)_+ + 2(x-4/7)_+, z = u1 + u2 - u3, then
    v_j = z + (z - a_j)_+ + (z - b_j)_+ with (a_j, b_j) = (-6/70, -5/70), (-4/70, -3/70),
    (-2/70, -1/70)."""
    k, two = 3, Q(2)
    first = Layer(
        (
            _convex_unit((ONE,), -ONE, [Q(1, 7), Q(3, 7)], two, k),
            _convex_unit((ONE,), ZERO, [Q(5, 7), Q(6, 7)], two, k),
            _convex_unit((ONE,), ZERO, [Q(2, 7), Q(4, 7)], two, k),
        )
    )
    z = (ONE, ONE, -ONE)
    second = Layer(
        tuple(
            _convex_unit(z, ONE, [Q(a, 70), Q(b, 70)], ONE, k)
            for a, b in ((-6, -5), (-4, -3), (-2, -1))
        )
    )
    box = Box((ZERO,), (ONE,))
    net = MaxoutNetwork(
        1,
        (first, second),
        None,
        box,
        {
            "description": "zig-zag network of docs/notes/regions.md (q = 1, n = k = 3, "
            "L = 2): 43 linear regions"
        },
    )
    return FoldNetwork(net, box, (3,), (), 43, "zig-zag (docs/notes/regions.md, n = k = 3, L = 2)")
