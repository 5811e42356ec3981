"""Layer correspondences: Maxout networks A, B (inputs Q^d, depth D) equal on Q^d, piece by
piece.  A correspondence gives affine maps (M_l, m_l), l = 1..D, from B's layer-l values to A's;
claim (C_l): h^A_l(x) = M_l h^B_l(x) + m_l on Q^d ((C_0): M_0 = I, m_0 = 0).  Given (C_{l-1}) and
h = h^B_{l-1}(x), unit i of A's layer l is max S_A, S_A the maps (w_j M_{l-1}, w_j . m_{l-1} + b_j)
of h, one per piece; row i of (C_l) reads m_l[i] + sum_u c_u max_k B_{u,k}(h), c = M_l[i].  If
c_u >= 0 where unit u of B has several distinct pieces, c_u max_k B_{u,k} = max_k c_u B_{u,k}, and a
sum of maxima is the max of the sums: the right side is max S_B, S_B = {m_l[i] + sum_{c_u != 0} c_u
B_{u,k_u} : a piece k_u per unit}, so S_A = S_B (sets of maps) gives (C_l).  Outputs y_A = O_A M_D
h^B_D + O_A m_D + o_A, y_B = O_B h^B_D + o_B (O = I if no output map) agree when y_A - y_B = sum_u
c_u h^B_{D,u} + e (c = O_A M_D - O_B), a sum of maxima as above, is the map 0: A = B."""

from dataclasses import dataclass

from .affine import Affine, Row, Vector, dot
from .errors import CheckFailed
from .maxout import MaxoutNetwork, check_matrix, check_maxout_pair
from .rational import ONE, ZERO

COMBINATIONS = 1 << 14  # the largest set S_B the kernel builds


@dataclass(frozen=True, slots=True)
class Correspondence:
    maps: tuple[Affine, ...]  # (M_l, m_l) for l = 1..D, M_l of shape N^A_l x N^B_l


def _pulled_back(w: Row, b, cols: list, m: Vector) -> tuple[Vector, object]:
    """The map h -> w . (M h + m) + b as (w M, w . m + b), cols: M's columns' non-zero (row, v)."""
    return tuple(sum((w[r] * v for r, v in c), ZERO) for c in cols), dot(w, m) + b


def _sum_of_maxima(c: Row, const, units, n: int, where: str) -> set:  # S_B: row c, m_l[i] const
    S = {((ZERO,) * n, const)}
    for u, (cu, unit) in enumerate(zip(c, units)):
        ps = {(tuple(p.w), p.b) for p in unit.pieces} if cu else set()
        if cu < 0 and len(ps) > 1:
            raise CheckFailed(f"{where}: weight {cu} < 0 on unit {u} of B, of several pieces")
        if len(S) * max(len(ps), 1) > COMBINATIONS:
            raise CheckFailed(f"{where}: more than {COMBINATIONS} sums of pieces")
        if ps:
            S = {(tuple(s + cu * v for s, v in zip(a, w)), e + cu * b) for a, e in S for w, b in ps}
    return S


def check_correspondence(a: MaxoutNetwork, b: MaxoutNetwork, cert: Correspondence) -> int:
    """Accept iff ``cert`` proves A = B on Q^d (module docstring); returns the units compared."""
    check_maxout_pair(a, b, "correspondence")
    if not len(a.layers) == len(b.layers) == len(cert.maps) or a.input_dim != b.input_dim:
        raise CheckFailed("correspondence: the networks and the maps differ in depth or input")
    cols, m = [[(i, ONE)] for i in range(a.input_dim)], (ZERO,) * a.input_dim  # M_0 = I, m_0 = 0
    for l, (la, lb, R) in enumerate(zip(a.layers, b.layers, cert.maps)):
        where = f"correspondence: layer {l + 1}"
        if not isinstance(R, Affine):
            raise CheckFailed(f"{where}: M_{l + 1} is not an affine map")
        try:
            check_matrix(R.W, la.width, lb.width, f"{where}: M_{l + 1}", R.b)
        except (ValueError, TypeError) as e:
            raise CheckFailed(str(e)) from None
        for i, unit in enumerate(la.units):
            S_A = {_pulled_back(p.w, p.b, cols, m) for p in unit.pieces}
            if S_A != _sum_of_maxima(R.W[i], R.b[i], lb.units, len(cols), f"{where}, unit {i}"):
                raise CheckFailed(f"{where}, unit {i} of A: its pieces are not those of row {i}")
        cols, m = [[(r, v) for r, v in enumerate(c) if v] for c in zip(*R.W)], R.b
    I = lambda w: tuple(tuple(ONE if i == j else ZERO for j in range(w)) for i in range(w))
    outs = [n.output or Affine(I(w := n.widths[-1]), (ZERO,) * w, w) for n in (a, b)]  # O or I
    if outs[0].out_dim != outs[1].out_dim:
        raise CheckFailed("correspondence: the networks have different numbers of outputs")
    units, n = b.layers[-1].units, b.widths[-2]
    for o, (wa, ca, wb, cb) in enumerate(zip(outs[0].W, outs[0].b, outs[1].W, outs[1].b)):
        c, const = _pulled_back(wa, ca - cb, cols, m)
        where = f"correspondence: output {o}, A's minus B's"
        diff = _sum_of_maxima(tuple(u - v for u, v in zip(c, wb)), const, units, n, where)
        if diff != {((ZERO,) * n, ZERO)}:
            raise CheckFailed(f"{where}, is not 0")
    return sum(l.width for l in a.layers)
