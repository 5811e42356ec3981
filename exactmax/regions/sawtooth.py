"""The sawtooth family of docs/notes/construction.md §5: exactly k^(dD) linear regions on (0, 1)^d.

The k-tooth sawtooth S_k on [0, 1] has slope +k on [p/k, (p+1)/k] for even p and -k for odd p
(S_k(0) = 0, S_k maps [0, 1] onto [0, 1]).  S_k = g - h with the convex max-affine functions

    g(s) = k s + sum_{p even, 1 <= p < k} 2k (s - p/k)_+,
    h(s) = sum_{p odd, 1 <= p < k} 2k (s - p/k)_+,

and a convex u(s) = a s + sum_i J (s - h_i)_+ (hinges h_1 < ... < h_r) is the Maxout unit
max_{t=0..r} [(a + J t) s - J (h_1 + ... + h_t)].  Layer 1 applies (g, h) to s = x_q for each
coordinate q; layer l > 1 to s = u_{2q-1} - u_{2q} of layer l - 1; the output is
sum_q (u_{2q-1} - u_{2q}) = sum_q S_k^D(x_q).  Width 2d, depth D, rank k (units are padded to
k pieces by copies of piece 0 shifted down by 1, 2, ..., which never reach the max).

S_k^D has k^D pieces of slopes +-k^D, alternating, so the k^(dD) cells of the product grid
all have different Jacobian sign patterns from their neighbours: no two adjacent cells merge.
"""

from __future__ import annotations

from ..kernel.affine import Affine
from ..kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from ..kernel.polyhedron import Box
from ..kernel.rational import ONE, ZERO, Q


def _convex_unit(a: Q, J: Q, hinges, direction, rank: int | None) -> Unit:
    """max_t [(a + J t) (direction . h) - J (h_1 + ... + h_t)], padded to ``rank`` pieces."""
    pieces, acc = [], ZERO
    for t in range(len(hinges) + 1):
        if t:
            acc += hinges[t - 1]
        slope = a + J * t
        pieces.append(Piece(tuple(slope * v for v in direction), -J * acc))
    base = pieces[0]
    while rank is not None and len(pieces) < rank:
        pieces.append(Piece(base.w, base.b - (len(pieces) - len(hinges))))
    return Unit(tuple(pieces))


def sawtooth_network(k: int, d: int, D: int, pad: bool = True) -> MaxoutNetwork:
    """The Maxout network of sum_{q=1..d} S_k^D(x_q) on the box [0, 1]^d (module docstring)."""
    if k < 2 or d < 1 or D < 1:
        raise ValueError(f"sawtooth: expected k >= 2, d >= 1, D >= 1, got k={k}, d={d}, D={D}")
    kq, J = Q(k), Q(2 * k)
    even = [Q(p, k) for p in range(1, k) if p % 2 == 0]
    odd = [Q(p, k) for p in range(1, k) if p % 2 == 1]
    rank = k if pad else None
    layers = []
    for layer in range(D):
        width = d if layer == 0 else 2 * d
        units = []
        for q in range(d):
            if layer == 0:
                direction = tuple(ONE if i == q else ZERO for i in range(width))
            else:
                direction = tuple(
                    ONE if i == 2 * q else -ONE if i == 2 * q + 1 else ZERO for i in range(width)
                )
            units.append(_convex_unit(kq, J, even, direction, rank))
            units.append(_convex_unit(ZERO, J, odd, direction, rank))
        layers.append(Layer(tuple(units)))
    out = Affine((tuple(ONE if i % 2 == 0 else -ONE for i in range(2 * d)),), (ZERO,), 2 * d)
    box = Box((ZERO,) * d, (ONE,) * d)
    meta = {
        "example": f"sawtooth k={k}, d={d}, D={D}",
        "function": f"sum_q S_{k}^{D}(x_q)",
        "linear_regions": f"{k}^({d}*{D})",
    }
    return MaxoutNetwork(d, tuple(layers), out, box, meta)


def sawtooth_value(k: int, D: int, s: Q) -> Q:
    """S_k^D(s) for s in [0, 1], directly from the definition (for tests)."""
    for _ in range(D):
        p = min(int((s * k).floor()), k - 1)
        frac = s * k - p
        s = frac if p % 2 == 0 else 1 - frac
    return s
