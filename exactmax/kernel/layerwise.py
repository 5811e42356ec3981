"""Layer-by-layer certificates compose (certificates.md, pitfall 5).

For a Maxout network N with layers Phi_1..Phi_D and a Transformer T whose sub-layers come in
groups of three, one group per Maxout layer, write encode(h)_t = place(h) + p_t for the token
state that holds h in its first coordinates (place) on top of the positional vectors p_t.
Suppose

  (E) the embedding is E = place, so the initial state is encode(x);
  (B) B_0 contains the domain P, and B_l contains the interval image of B_{l-1} under Phi_l
      (the kernel computes that image exactly and checks the inclusion), so h^l(x) lies in
      B_l for every x in P;
  (B') or, with ``image`` (the construction's LP gate constants on a polyhedron), the first
      layer's claims are made over P itself instead of B_0, and B_1 contains h^1(P) by Farkas
      proofs over P's rows: for unit i, some piece is >= lower_i (so the max is) and every
      piece is <= upper_i (so the max is);
  (S) for every layer l and every h in B_{l-1}, the three sub-layers of group l map encode(h)
      to encode(Phi_l(h)) (for the last layer Phi_D includes the output map y = A h + c);
  (R) the read-out returns y from encode(y).

Then by induction on l the state after group l is encode(h^l(x)) for x in P, and T(x) = N(x).

(M) A Transformer with 2D + 1 sub-layers (the merged construction: the clean-up of layer l and
the gate of layer l + 1 in one feed-forward sub-layer) is checked through an unmerged one U:
T with each merged feed-forward M_l replaced by two, C_l then F_{l+1}, taken from the
certificate's unmerged Transformer, with M_l(s) = F_{l+1}(C_l(s)) for every token state s
(``same_feedforward``, an identity of the translation, checked without a solver).  Then
T = U as functions, and (E), (B), (S), (R) are checked for U.
(S) is a family of ordinary certificates, each over a box (or over P, for the first layer
under (B')), one per group of segment outputs that share their pair of program nodes; (E),
(B), (B') and (R) are checked here exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .certificate import Farkas, Tree, check_entails, check_equal_on_domain, domain_rows
from .errors import CheckFailed
from .maxout import MaxoutNetwork
from .polyhedron import Box, Domain
from .program import (
    check_shapes,
    place,
    program_of_encoded_layer,
    program_of_segment,
    same_feedforward,
)
from .rational import ZERO, Q
from .transformer import FeedForward, Transformer, check_transformer_shapes


@dataclass(frozen=True, slots=True)
class Claim:
    outputs: tuple[int, ...]  # segment outputs (token t, coordinate i at t d_m + i)
    tree: Tree


@dataclass(frozen=True, slots=True)
class UnitImage:
    """Over the domain's rows: piece ``lower_piece`` of the unit is >= the unit's lower bound
    in B_1, and piece j is <= its upper bound (``upper[j]``)."""

    lower_piece: int
    lower: Farkas
    upper: tuple[Farkas, ...]


@dataclass(frozen=True, slots=True)
class LayerwiseCertificate:
    boxes: tuple[Box, ...]  # B_0 .. B_{D-1}: the input box of every layer
    box_proofs: tuple[tuple[Farkas, Farkas], ...] | None  # (upper, lower) per coordinate,
    #                             for a polyhedral domain; None when the domain is a box
    layers: tuple[tuple[Claim, ...], ...]
    image: tuple[UnitImage, ...] | None = None  # (B'): first layer over the domain, B_1 by
    #                             Farkas proofs (one per unit of layer 1; () when D = 1)
    unmerged: Transformer | None = None  # (M): the claims are about this one


def interval_image(net: MaxoutNetwork, layer: int, box: Box) -> Box:
    """The exact interval image of ``box`` under Maxout layer ``layer`` (no output map):
    each piece's range is exact on a box, and max is monotone."""
    lo, hi = [], []
    for unit in net.layers[layer].units:
        ranges = []
        for p in unit.pieces:
            low = high = p.b
            for w, l, u in zip(p.w, box.lower, box.upper):
                if w > 0:
                    low, high = low + w * l, high + w * u
                elif w < 0:
                    low, high = low + w * u, high + w * l
            ranges.append((low, high))
        lo.append(max(r[0] for r in ranges))
        hi.append(max(r[1] for r in ranges))
    return Box(tuple(lo), tuple(hi))


def _contains(outer: Box, inner: Box) -> bool:
    """outer contains inner: the same dimension, and every interval of inner lies in outer's."""
    return outer.dim == inner.dim and all(
        ol <= il and iu <= ou
        for ol, il, iu, ou in zip(outer.lower, inner.lower, inner.upper, outer.upper)
    )


def check_structure(net: MaxoutNetwork, tf: Transformer) -> None:
    """(E) and (R), and the shape of the sub-layer groups."""
    D, dm = len(net.layers), tf.d_model
    if len(tf.sublayers) != 3 * D:
        raise CheckFailed(
            f"layerwise: {len(tf.sublayers)} sub-layers, expected 3 per Maxout layer ({3 * D})"
        )
    if max(net.widths + (net.out_dim,)) > dm or tf.input_dim != net.input_dim:
        raise CheckFailed("layerwise: the layer widths do not fit the token width")
    if tuple(tf.embedding) != place(net.input_dim, dm):
        raise CheckFailed(
            f"layerwise: the embedding does not write x into coordinates 0..{net.input_dim - 1}"
        )
    m = net.out_dim
    R = tf.readout.map
    if R.out_dim != m:
        raise CheckFailed("layerwise: the read-out has the wrong number of outputs")
    if any(R.W[i][j] != int(i == j) for i in range(m) for j in range(m)):
        raise CheckFailed("layerwise: the read-out does not return the output coordinates")
    ps = tf.positions if tf.readout.token is None else [tf.positions[tf.readout.token]]
    for i in range(m):
        bias = sum((R.W[i][j] * p[j] for p in ps for j in range(dm)), ZERO) / len(ps)
        if bias + R.b[i] != 0:
            raise CheckFailed("layerwise: the read-out adds a constant to the output")


def layer_programs(net: MaxoutNetwork, other, l: int):
    """The two programs that layer l's claims compare: the encoded Maxout layer against the
    Transformer's three sub-layers, or against the same layer of another Maxout network (with
    one token and no positional vector: encode is then just place)."""
    if isinstance(other, Transformer):
        return (
            program_of_encoded_layer(net, l, other.positions, other.d_model),
            program_of_segment(other, 3 * l, 3 * l + 3, net.widths[l]),
        )
    dm = max(net.widths + (net.out_dim,))
    zero = ((ZERO,) * dm,)
    return (
        program_of_encoded_layer(net, l, zero, dm),
        program_of_encoded_layer(other, l, zero, dm),
    )


def check_same_shape(a: MaxoutNetwork, b: MaxoutNetwork) -> None:
    """Two Maxout networks compared layer by layer need the same widths and outputs."""
    if a.widths != b.widths or a.out_dim != b.out_dim:
        raise CheckFailed("layerwise: the two Maxout networks have different layer widths")


def check_layerwise(net: MaxoutNetwork, other, domain: Domain, cert: LayerwiseCertificate) -> int:
    """Accept iff the certificate proves T(x) = N(x) for every x in the domain, where T is a
    Transformer (see the module docstring) or another Maxout network of the same layer widths
    (then (S) reads Phi^N_l = Phi^T_l on B_{l-1}, with no embedding or read-out to check);
    returns the number of leaves checked."""
    check_shapes((net, other), domain)
    if not isinstance(net, MaxoutNetwork):
        raise CheckFailed("layerwise: the first model must be a Maxout network")
    if cert.unmerged is not None:
        if not isinstance(other, Transformer):
            raise CheckFailed("layerwise: an unmerged Transformer is for a Transformer")
        other = check_unmerged(other, cert.unmerged)
    if isinstance(other, Transformer):
        check_structure(net, other)
    else:
        check_same_shape(net, other)
    if len(cert.boxes) != len(net.layers) or len(cert.layers) != len(net.layers):
        raise CheckFailed("layerwise: one box and one list of claims per layer are needed")
    for l, box in enumerate(cert.boxes):
        if len(box.lower) != len(box.upper) or box.dim != net.widths[l]:
            raise CheckFailed(f"layerwise: B_{l} has the wrong dimension")
    B = cert.boxes[0]
    if isinstance(domain, Box):
        if not _contains(B, domain):
            raise CheckFailed("layerwise: B_0 does not contain the domain box")
    else:  # x_i <= upper_i and x_i >= lower_i on the domain, by Farkas proofs over its rows
        rows, proofs = domain_rows(domain), cert.box_proofs or ()
        if len(proofs) != B.dim:
            raise CheckFailed("layerwise: B_0 needs one pair of Farkas bounds per coordinate")
        for i, (up, low) in enumerate(proofs):
            e = tuple(Q(int(j == i)) for j in range(B.dim))
            where = f"layerwise: B_0 does not contain the domain in coordinate {i}"
            check_entails(rows, (tuple(-v for v in e), B.upper[i]), False, up, where)
            check_entails(rows, (e, -B.lower[i]), False, low, where)
    if cert.image is not None:
        if not isinstance(other, Transformer):
            raise CheckFailed("layerwise: image proofs are for a Transformer's first layer")
        check_first_image(net, domain, cert)
    for l in range(1 if cert.image is None else 2, len(net.layers)):
        if not _contains(cert.boxes[l], interval_image(net, l - 1, cert.boxes[l - 1])):
            raise CheckFailed(f"layerwise: B_{l} does not contain the image of B_{l - 1}")
    leaves = 0
    for l, claims in enumerate(cert.layers):
        cell = cert.boxes[l].as_polyhedron()
        if l == 0 and cert.image is not None:
            cell = domain.as_polyhedron()
        f, g = layer_programs(net, other, l)
        covered: set[int] = set()
        for claim in claims:
            leaves += check_equal_on_domain(f, g, cell, claim.tree, claim.outputs)
            covered.update(claim.outputs)
        if covered != set(range(len(f.outputs))):
            raise CheckFailed(
                f"layerwise: layer {l}: outputs "
                f"{sorted(set(range(len(f.outputs))) - covered)[:5]} unproved"
            )
    return leaves


def check_unmerged(tf: Transformer, u: Transformer) -> Transformer:
    """(M): the Transformer U that tf equals as a function, and whose layers the claims are
    about: tf with each merged feed-forward sub-layer M_l (index 2 + 2 l, l < D - 1)
    replaced by the pair of u's sub-layers 2 + 3 l and 3 + 3 l, checked to compose to M_l
    (``same_feedforward``).  Only those pairs are read from u; all else is tf's, as in the
    Coq checker (``Layerwise.unmerge``)."""
    n = len(tf.sublayers)
    if n < 3 or n % 2 == 0:
        raise CheckFailed(f"layerwise: {n} sub-layers are not 2 D + 1")
    D = (n - 1) // 2
    if len(u.sublayers) < 3 * D - 1:
        raise CheckFailed(
            f"layerwise: the unmerged Transformer has {len(u.sublayers)} "
            f"sub-layers, fewer than the pairs of {D - 1} merged ones need"
        )
    pairs = [
        (tf.sublayers[2 + 2 * l], u.sublayers[2 + 3 * l], u.sublayers[3 + 3 * l])
        for l in range(D - 1)
    ]
    bad = [l for l, ss in enumerate(pairs) if not all(isinstance(x, FeedForward) for x in ss)]
    if bad:
        raise CheckFailed(
            f"layerwise: sub-layer {2 + 2 * bad[0]} and its pair are not feed-forward sub-layers"
        )
    subs = [x for l, (_, a, b) in enumerate(pairs) for x in (tf.sublayers[1 + 2 * l], a, b)]
    U = replace(tf, sublayers=(tf.sublayers[0], *subs, *tf.sublayers[n - 2 :]))
    try:
        check_transformer_shapes(tf)
        check_transformer_shapes(U)
    except (ValueError, TypeError) as e:
        raise CheckFailed(f"layerwise: {e}") from None
    for l, (merged, first, second) in enumerate(pairs):
        if not same_feedforward(tf, merged, first, second):  # type: ignore[arg-type]  # all FF
            raise CheckFailed(
                f"layerwise: sub-layer {2 + 2 * l} is not the unmerged "
                f"sub-layers {2 + 3 * l} and {3 + 3 * l} in one"
            )
    return U


def check_first_image(net: MaxoutNetwork, domain: Domain, cert: LayerwiseCertificate) -> None:
    """(B'): B_1 contains h^1(P), each bound proved by Farkas multipliers over P's rows."""
    units = net.layers[0].units
    if len(net.layers) == 1:
        if cert.image:
            raise CheckFailed("layerwise: image proofs for a network of one layer")
        return
    box, image = cert.boxes[1], cert.image or ()
    if len(image) != len(units) or box.dim != len(units):
        raise CheckFailed("layerwise: one image proof per unit of the first layer is needed")
    rows = domain_rows(domain.as_polyhedron())
    for i, (unit, im) in enumerate(zip(units, image)):
        where = f"layerwise: B_1, unit {i}"
        if not 0 <= im.lower_piece < len(unit.pieces) or len(im.upper) != len(unit.pieces):
            raise CheckFailed(f"{where}: needs a lower piece and one upper proof per piece")
        p = unit.pieces[im.lower_piece]
        check_entails(rows, (p.w, p.b - box.lower[i]), False, im.lower, f"{where}, lower")
        for j, (p, proof) in enumerate(zip(unit.pieces, im.upper)):
            e = (tuple(-v for v in p.w), box.upper[i] - p.b)
            check_entails(rows, e, False, proof, f"{where}, upper, piece {j}")
