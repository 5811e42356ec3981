"""Layer-by-layer certificates compose (certificates.md, pitfall 5): a Maxout network N (layers
Phi_1..Phi_D) against a Transformer T of three sub-layers per layer, token states encode(h)_t =
place(h) + p_t (h in the first coordinates).  (E) The embedding is place (first state encode(x)).
(B) B_0 contains the domain P, B_l the (exact) interval image of B_{l-1} under Phi_l: h^l(x) in B_l
for x in P; (B') or, with ``image``, layer 1's claims are over P and B_1 contains h^1(P) by Farkas
proofs over P's rows (unit i: a piece >= lower_i, every piece <= upper_i).  (S) For h in B_{l-1} (P
under (B')), group l maps encode(h) to encode(Phi_l(h)) (Phi_D with y = A h + c), a certificate per
output group.  (R) The read-out returns y from encode(y).  By induction the state after group l is
encode(h^l(x)), x in P: T(x) = N(x).  (M) A merged T (2D + 1 sub-layers; layer l's clean-up and
layer l + 1's gate one feed-forward M_l) is the unmerged U (M_l replaced by the certificate's
C_l then F_{l+1}) if M_l(s) = F_{l+1}(C_l(s)) for all token states s (``same_feedforward``).
With a Maxout network of equal widths for T, (S) reads Phi^N_l = Phi^T_l on B_{l-1}; no (E), (R)."""

from dataclasses import dataclass, replace

from . import program
from .affine import nonzero
from .certificate import Farkas, Tree, check_entails, check_equal_on_domain, domain_rows
from .errors import CheckFailed
from .maxout import MaxoutNetwork
from .polyhedron import Box, Domain
from .rational import ZERO, Q
from .transformer import FeedForward, Transformer, check_transformer_shapes


@dataclass(frozen=True, slots=True)
class Claim:
    outputs: tuple[int, ...]  # segment outputs (token t, coordinate i at t d_m + i)
    tree: Tree


@dataclass(frozen=True, slots=True)
class UnitImage:  # unit i of (B'), by Farkas proofs over P's rows
    lower_piece: int
    lower: Farkas  # piece lower_piece >= lower_i
    upper: tuple[Farkas, ...]  # piece j <= upper_i, one per piece j


@dataclass(frozen=True, slots=True)
class LayerwiseCertificate:
    boxes: tuple[Box, ...]  # B_0 .. B_{D-1}: the input box of every layer
    box_proofs: tuple[tuple[Farkas, Farkas], ...] | None  # (up, low) per x_i; None: a box
    layers: tuple[tuple[Claim, ...], ...]
    image: tuple[UnitImage, ...] | None = None  # (B'): one per unit of layer 1 (() if D = 1)
    unmerged: Transformer | None = None  # (M): the claims are about this one


def interval_image(net: MaxoutNetwork, layer: int, box: Box) -> Box:
    """The exact interval image of ``box`` under Maxout layer ``layer`` (max is monotone)."""
    ranges = [[_range(p.w, p.b, box) for p in unit.pieces] for unit in net.layers[layer].units]
    return Box(*(tuple(max(r[end] for r in rs) for rs in ranges) for end in (0, 1)))


def _range(w, b: Q, box: Box) -> tuple[Q, Q]:  # (min, max) of w . x + b over the box
    terms = [(c, box.lower[j], box.upper[j]) for j, c in nonzero(w)]
    lo = sum((c * (l if c > 0 else u) for c, l, u in terms), b)
    return lo, sum((c * (u if c > 0 else l) for c, l, u in terms), b)


def _contains(outer: Box, inner: Box) -> bool:
    ends = zip(outer.lower, inner.lower, inner.upper, outer.upper)
    return outer.dim == inner.dim and all(ol <= il and iu <= ou for ol, il, iu, ou in ends)


def check_structure(net: MaxoutNetwork, tf: Transformer) -> None:  # (E), (R), 3 sub-layers a layer
    D, dm, m, R = len(net.layers), tf.d_model, net.out_dim, tf.readout.map
    if len(tf.sublayers) != 3 * D:
        raise CheckFailed(f"layerwise: {len(tf.sublayers)} sub-layers, not 3 per Maxout layer")
    if max(net.widths + (m,)) > dm or tf.input_dim != net.input_dim:
        raise CheckFailed("layerwise: the layer widths do not fit the token width")
    if tuple(tf.embedding) != program.place(net.input_dim, dm):
        raise CheckFailed("layerwise: the embedding does not write x into the first coordinates")
    if R.out_dim != m or any(R.W[i][j] != int(i == j) for i in range(m) for j in range(m)):
        raise CheckFailed("layerwise: the read-out does not return the output coordinates")
    ps = tf.positions if tf.readout.token is None else [tf.positions[tf.readout.token]]
    for i in range(m):
        if sum((R.W[i][j] * p[j] for p in ps for j in range(dm)), ZERO) / len(ps) + R.b[i]:
            raise CheckFailed("layerwise: the read-out adds a constant to the output")


def layer_programs(net: MaxoutNetwork, other, l: int):
    """The programs layer l's claims compare: the encoded Maxout layer and T's three sub-layers, or
    two Maxout layers (one token, p_0 = 0: encode = place)."""
    if isinstance(other, Transformer):
        f = program.program_of_encoded_layer(net, l, other.positions, other.d_model)
        return f, program.program_of_segment(other, 3 * l, 3 * l + 3, net.widths[l])
    dm = max(net.widths + (net.out_dim,))
    return tuple(program.program_of_encoded_layer(n, l, ((ZERO,) * dm,), dm) for n in (net, other))


def check_layerwise(net: MaxoutNetwork, other, domain: Domain, cert: LayerwiseCertificate) -> int:
    """Accept iff ``cert`` proves T = N on the domain (T: Transformer or Maxout); returns leaves."""
    program.check_shapes((net, other), domain)
    if not isinstance(net, MaxoutNetwork):
        raise CheckFailed("layerwise: the first model must be a Maxout network")
    if cert.unmerged is not None:
        if not isinstance(other, Transformer):
            raise CheckFailed("layerwise: an unmerged Transformer is for a Transformer")
        other = check_unmerged(other, cert.unmerged)
    if isinstance(other, Transformer):
        check_structure(net, other)
    elif net.widths != other.widths or net.out_dim != other.out_dim:
        raise CheckFailed("layerwise: the two Maxout networks have different layer widths")
    if len(cert.boxes) != len(net.layers) or len(cert.layers) != len(net.layers):
        raise CheckFailed("layerwise: one box and one list of claims per layer are needed")
    for l, box in enumerate(cert.boxes):
        if len(box.lower) != len(box.upper) or box.dim != net.widths[l]:
            raise CheckFailed(f"layerwise: B_{l} has the wrong dimension")
    B = cert.boxes[0]
    if isinstance(domain, Box):
        if not _contains(B, domain):
            raise CheckFailed("layerwise: B_0 does not contain the domain box")
    elif len(cert.box_proofs or ()) != B.dim:
        raise CheckFailed("layerwise: B_0 needs one pair of Farkas bounds per coordinate")
    else:  # lower_i <= x_i <= upper_i on P, by Farkas proofs
        rows = domain_rows(domain)
        for i, (up, low) in enumerate(cert.box_proofs or ()):
            e, where = tuple(Q(int(j == i)) for j in range(B.dim)), f"layerwise: B_0, x_{i}"
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
        cell = (domain if l == 0 and cert.image is not None else cert.boxes[l]).as_polyhedron()
        f, g = layer_programs(net, other, l)
        rows, missing = domain_rows(cell), set(range(len(f.outputs)))
        for claim in claims:
            leaves += check_equal_on_domain(f, g, cell, claim.tree, claim.outputs, rows)
            missing -= set(claim.outputs)
        if missing:
            raise CheckFailed(f"layerwise: layer {l}: outputs {sorted(missing)[:5]} unproved")
    return leaves


def check_unmerged(tf: Transformer, u: Transformer) -> Transformer:
    """(M): tf, each merged feed-forward M_l (sub-layer 2 + 2 l, l < D - 1) replaced by u's
    sub-layers 2 + 3 l, 3 + 3 l (checked to compose to M_l), all else tf's (Coq's ``unmerge``)."""
    n = len(tf.sublayers)
    if n < 3 or n % 2 == 0:
        raise CheckFailed(f"layerwise: {n} sub-layers are not 2 D + 1")
    D, S, T = (n - 1) // 2, tf.sublayers, u.sublayers
    if len(T) < 3 * D - 1:
        raise CheckFailed(f"layerwise: the unmerged Transformer has < {3 * D - 1} sub-layers")
    pairs = [(S[2 + 2 * l], T[2 + 3 * l], T[3 + 3 * l]) for l in range(D - 1)]
    for l, ss in enumerate(pairs):
        if not all(isinstance(x, FeedForward) for x in ss):
            raise CheckFailed(f"layerwise: sub-layer {2 + 2 * l} and its pair are not feed-forward")
    subs = [x for l, (_, a, b) in enumerate(pairs) for x in (S[1 + 2 * l], a, b)]
    U = replace(tf, sublayers=(S[0], *subs, *S[n - 2 :]))
    try:
        list(map(check_transformer_shapes, (tf, U)))
    except (ValueError, TypeError) as e:
        raise CheckFailed(f"layerwise: {e}") from None
    for l, (merged, first, second) in enumerate(pairs):
        if not program.same_feedforward(tf, merged, first, second):  # type: ignore[arg-type]
            raise CheckFailed(f"layerwise: sub-layer {2 + 2 * l} is not the unmerged pair in one")
    return U


def check_first_image(net: MaxoutNetwork, domain: Domain, cert: LayerwiseCertificate) -> None:
    """(B'): B_1 contains h^1(P), each bound proved by Farkas multipliers over P's rows."""
    units, image = net.layers[0].units, cert.image or ()
    if len(net.layers) == 1:
        if image:
            raise CheckFailed("layerwise: image proofs for a network of one layer")
        return
    box = cert.boxes[1]
    if len(image) != len(units) or box.dim != len(units):
        raise CheckFailed("layerwise: one image proof per unit of the first layer is needed")
    rows = domain_rows(domain.as_polyhedron())
    for i, (unit, im) in enumerate(zip(units, image)):
        where = f"layerwise: B_1, unit {i}"
        if not 0 <= im.lower_piece < len(unit.pieces) or len(im.upper) != len(unit.pieces):
            raise CheckFailed(f"{where}: needs a lower piece and one upper proof per piece")
        p = unit.pieces[im.lower_piece]
        check_entails(rows, (tuple(p.w), p.b - box.lower[i]), False, im.lower, f"{where}, lower")
        for j, (p, proof) in enumerate(zip(unit.pieces, im.upper)):
            e = (tuple(-v for v in p.w), box.upper[i] - p.b)
            check_entails(rows, e, False, proof, f"{where}, upper, piece {j}")
