"""Coq export of a compiled Transformer through the construction theorem (#19).

When a Transformer is exactly the default construction of a Maxout network (docs/notes/construction.md
§2: unmerged, one-hot positions) for some gate constants C, its equality with the network on
a domain needs no split tree and no per-unit certificate: ``proofs/ConstructionSound.v``
proves once, for every network,

    construct_zsound : shaped net = true -> zgates_ok net C D boxes Ss proofs = true ->
      forall x, length x = mo_dim net -> in_domain D x ->
      transformerR (construct net C) x = maxoutR net x

(and ``construct_poly_zsound`` with ``zgates_ok_poly`` for a polyhedron).  The file written
here states the network, the Transformer and C as data, proves ``net_b = construct net_a
gates`` and the two conditions by computation (``vm_compute``, checked by the kernel at
``Qed``), and concludes ``net_equiv`` from the theorem.  It names the sha256 of the network,
the Transformer and the domain (comment and ``Module Sha256``); ``check_binding`` compares a
file with the export of the JSON inputs and names the first difference.

Gate certificate: for a box domain, the boxes B_0 = the domain, B_{l+1} = the interval image
of B_l rounded outward as compile_transformer rounds; for a polyhedron, the first layer's
pieces bounded over the domain's own rows by Farkas multipliers (LP duality) and B_1 by rule
(B') of Layerwise.v, then interval images.  The boxes are written as integers on a grid 1/G
(G the lcm of a box's denominators: 2^16 after the first), with each layer's common
denominator s_l of its weights and the quotients m_d = s_l / d: Coq checks them in integers
(``zgates_ok``: sum_j of n_j (m_d L_j) or n_j (m_d U_j) over s_l G, no gcd).  The range of a
piece over a box is the same rational either way, so every C_l that compile_transformer
chooses passes; a smaller C_l, a wider domain or a Transformer that is not the construction
make the file fail in Coq.
"""

from __future__ import annotations

from .. import jsonout
from ..construct.bounds import _affine_range, round_outward
from ..construct.transformer import CompileOptions, compile_transformer
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Box
from ..kernel.rational import Q
from ..kernel.transformer import FeedForward, Transformer
from .coq import (
    MASK63,
    SCRAMBLE,
    ExportUnsupported,
    _domain_text,
    _mat,
    _maxout_term,
    _pack,
    _q,
    _qlist,
    _qnums,
    _sha256_module,
    _zig,
    content_hashes,
)


def _width(net: MaxoutNetwork) -> int:
    return max(max(net.widths), net.out_dim)


def gates_of(net: MaxoutNetwork, tf: Transformer) -> tuple[Q, ...] | None:
    """The gate constants C_l read off a Transformer that has the construction's layout (the
    bias -C_l that the gate feed-forward of layer l adds to Z_0), or None."""
    D = len(net.layers)
    if not D or len(tf.sublayers) != 3 * D:
        return None
    W = _width(net)
    gates = []
    for l in range(D):
        s = tf.sublayers[3 * l]
        if not isinstance(s, FeedForward) or len(s.outer.b) <= W:
            return None
        gates.append(-s.outer.b[W])
    return tuple(gates)


def _same(a: Transformer, b: Transformer) -> bool:
    return (
        a.input_dim == b.input_dim
        and a.d_model == b.d_model
        and a.embedding == b.embedding
        and a.positions == b.positions
        and a.sublayers == b.sublayers
        and a.readout == b.readout
    )


def construction_of(net: MaxoutNetwork, tf: Transformer, domain) -> tuple[Q, ...] | None:
    """The gate constants C for which ``tf`` is compile_transformer's default construction of
    ``net`` (entry for entry), or None."""
    gates = gates_of(net, tf)
    if gates is None:
        return None
    built = compile_transformer(net, domain, CompileOptions(gates=gates)).transformer
    return gates if _same(built, tf) else None


def _vec(v) -> str:
    """A vector as a list of rationals or, when at most a third of it is not 0, as
    Construction.spvec (its length and its nonzero entries)."""
    nonzero = sum(1 for x in v if x)
    if 3 * nonzero > len(v):
        return _qlist(v)
    return f"spvec {len(v)} [" + "; ".join(f"{j} ~> {_q(x)}" for j, x in enumerate(v) if x) + "]"


def _mat_t(M) -> str:
    """A matrix of few columns (a head's W_O) column by column: Construction.spmat_t."""
    cols = len(M[0]) if len(M) else 0
    if not M or any(len(r) != cols for r in M):
        return _mat(M)
    return (
        f"spmat_t {len(M)} ["
        + "; ".join(
            "[" + "; ".join(f"{i} ~> {_q(r[c])}" for i, r in enumerate(M) if r[c]) + "]"
            for c in range(cols)
        )
        + "]"
    )


def _tf_defs(tf: Transformer) -> tuple[str, str]:
    """The Transformer as data: one definition per sub-layer (a feed-forward's four matrices,
    an attention's heads), sparse matrices and vectors as spmat, spvec, spmat_t."""
    from ..kernel.transformer import HARDMAX

    defs, subs = [], []
    for i, s in enumerate(tf.sublayers):
        if isinstance(s, FeedForward):
            text = (
                f"FeedForward\n  ({_mat(s.inner.W)})\n  ({_vec(s.inner.b)})\n"
                f"  ({_mat(s.outer.W)})\n  ({_vec(s.outer.b)})"
            )
        else:
            if s.kind != HARDMAX:
                raise ExportUnsupported("the Transformer has softmax attention")
            text = (
                "Attention [\n  "
                + ";\n  ".join(
                    f"{{| h_query := {_mat(h.query)}; h_key := {_mat(h.key)}; "
                    f"h_value := {_mat(h.value)};\n     h_out := {_mat_t(h.out)}; "
                    f"h_scale := {_q(h.scale)} |}}"
                    for h in s.heads
                )
                + "]"
            )
        defs.append(f"Definition net_b_s{i} : sublayer :=\n  {text}.")
        subs.append(f"net_b_s{i}")
    r = tf.readout
    token = "None" if r.token is None else f"(Some {r.token}%nat)"
    term = (
        f"{{| tf_dim := {tf.input_dim}; tf_dm := {tf.d_model};\n  "
        f"tf_emb := {_mat(tf.embedding)};\n  tf_pos := {_mat(tf.positions)};\n  "
        f"tf_subs := [" + "; ".join(subs) + f"];\n  tf_token := {token};\n  "
        f"tf_rW := {_mat(r.map.W)};\n  tf_rb := {_vec(r.map.b)} |}}"
    )
    return "\n\n".join(defs) + "\n\n", term


def _packed_models(net: MaxoutNetwork, tf: Transformer) -> tuple[list[int], list[int]]:
    """The streams Construction.unpack_maxout and unpack_transformer read (concatenated: the
    stream of unpack_models)."""
    out: list[int] = []

    def q(v):
        out.extend(_qnums(v))

    def qs(vs):
        out.append(len(vs))
        for v in vs:
            q(v)

    def row(vs):
        nz = [(j, v) for j, v in enumerate(vs) if v]
        out.append(len(nz))
        for j, v in nz:
            out.append(j)
            q(v)

    def mat(M, cols):
        out.append(cols)
        out.append(len(M))
        for r in M:
            row(r)

    def vec(v):
        out.append(len(v))
        row(v)

    out.append(net.input_dim)
    out.append(len(net.layers))
    for layer in net.layers:
        out.append(len(layer.units))
        for unit in layer.units:
            out.append(len(unit.pieces))
            for p in unit.pieces:
                qs(p.w)
                q(p.b)
    if net.output is None:
        out.append(0)
    else:
        out.append(1)
        out.append(len(net.output.W))
        for r in net.output.W:
            qs(r)
        qs(net.output.b)
    n_net = len(out)
    dm = tf.d_model
    out += [tf.input_dim, dm]
    mat(tf.embedding, tf.input_dim)
    mat(tf.positions, dm)
    out.append(len(tf.sublayers))
    for s in tf.sublayers:
        if isinstance(s, FeedForward):
            out.append(0)
            mat(s.inner.W, dm)
            vec(s.inner.b)
            mat(s.outer.W, len(s.inner.b))
            vec(s.outer.b)
        else:
            out.append(1)
            out.append(len(s.heads))
            for h in s.heads:
                mat(h.query, dm)
                mat(h.key, dm)
                mat(h.value, dm)
                mat(h.out, len(h.value))
                q(h.scale)
    r = tf.readout
    out.append(0 if r.token is None else r.token + 1)
    mat(r.map.W, dm)
    vec(r.map.b)
    return out[:n_net], out[n_net:]


def _farkas(y) -> str:
    """A Farkas proof with scale 1 and the multipliers y (row index, value), zeros left out."""
    return "(1, [" + "; ".join(f"({i}%nat, {_q(v)})" for i, v in enumerate(y) if v) + "])"


def _zbox(lo, hi) -> tuple[int, list[int], list[int]]:
    """A box as Construction.zbox: the common denominator G of its corners and the corners
    times G (integers), lo_i = L_i / G, hi_i = U_i / G."""
    from math import lcm

    G = lcm(1, *(int(v.q) for v in (*lo, *hi)))
    return G, [int(v * G) for v in lo], [int(v * G) for v in hi]


def _scales(layer) -> tuple[int, list[tuple[int, int]]]:
    """(s_l, [(d, m_d)]): the lcm s_l of the denominators d of the layer's weights and biases,
    and m_d = s_l / d, the denominators most frequent first (Coq looks them up in order)."""
    from collections import Counter
    from math import lcm

    count = Counter(int(v.q) for unit in layer.units for p in unit.pieces for v in (*p.w, p.b))
    s = lcm(1, *count)
    return s, [(d, s // d) for d, _ in count.most_common()]


def _zcert_term(boxes, layers) -> str:
    """The integer gate certificate as one array of machine integers
    (Construction.unpack_zcert): the number of boxes, each as G, |L|, L, |U|, U; then the
    number of layers, each as s_l, the number of its denominators and the pairs d, m_d."""
    out = [len(boxes)]
    for lo, hi in boxes:
        G, L, U = _zbox(lo, hi)
        out += [G, len(L), *map(_zig, L), len(U), *map(_zig, U)]
    out.append(len(layers))
    for layer in layers:
        s, ms = _scales(layer)
        out += [s, len(ms)]
        for d, m in ms:
            out += [d, _zig(m)]
    return _pack(out)


def _interval_boxes(net: MaxoutNetwork, lo, hi, start: int):
    """B_start, then the interval images of the layers start .. D-2, rounded outward."""
    boxes = [(tuple(lo), tuple(hi))]
    for layer in net.layers[start:-1]:
        los, his = [], []
        for unit in layer.units:
            ranges = [_affine_range(p.w, p.b, lo, hi) for p in unit.pieces]
            los.append(max(r[0] for r in ranges))
            his.append(max(r[1] for r in ranges))
        lo, hi = round_outward(los, his)
        boxes.append((lo, hi))
    return boxes


def _gates_box(net, gates, domain: Box) -> tuple[str, str, str, str]:
    """(definitions, the packed boxes, the check, the theorem applied) for a box domain."""
    boxes = _interval_boxes(net, domain.lower, domain.upper, 0)
    return (
        "",
        _zcert_term(boxes, net.layers),
        "zgates_ok net_a gates (DBox lower upper) boxes scales nil",
        "construct_zsound net_a gates (DBox lower upper) boxes scales nil",
    )


def _gates_poly(net, gates, domain) -> tuple[str, str, str, str]:
    """(definitions, the packed boxes, the check, the theorem applied) for a polyhedron: the
    first layer by Farkas multipliers over its rows, B_1 by rule (B'), then interval images."""
    from ..engine.lp import DualLP
    from ..kernel.polyhedron import check_upper_bound

    P = domain.as_polyhedron()
    lp = DualLP(P)
    gws, iws, los, his = [], [], [], []
    for unit in net.layers[0].units:
        lows, ups = [], []
        for p in unit.pieces:
            yu = lp.multipliers(tuple(p.w))
            yl = lp.multipliers(tuple(-v for v in p.w))
            if yu is None or yl is None:
                raise ExportUnsupported(
                    "the domain is unbounded: no gate constant bounds the first layer"
                )
            up = p.b + check_upper_bound(P, tuple(p.w), yu)
            low = p.b - check_upper_bound(P, tuple(-v for v in p.w), yl)
            ups.append((up, yu))
            lows.append((low, yl))
            gws.append(f"({_farkas(yu)}, {_farkas(yl)})")
        j = max(range(len(lows)), key=lambda t: lows[t][0])
        los.append(lows[j][0])
        his.append(max(u for u, _ in ups))
        iws.append(
            f"({j}%nat, {_farkas(lows[j][1])}, [" + "; ".join(_farkas(y) for _, y in ups) + "])"
        )
    boxes = []
    if len(net.layers) > 1:
        lo, hi = round_outward(los, his)
        boxes = _interval_boxes(net, lo, hi, 1)
    defs = (
        "Definition gate_proofs : list (farkas * farkas) :=\n  ["
        + ";\n   ".join(gws)
        + "].\n\nDefinition image_proofs : list (nat * farkas * list farkas) :=\n  ["
        + ";\n   ".join(iws if boxes else [])
        + "].\n"
    )
    return (
        defs,
        _zcert_term(boxes, net.layers[1:]),
        "zgates_ok_poly net_a gates (DPoly A b) gate_proofs boxes scales image_proofs",
        "construct_poly_zsound net_a gates (DPoly A b) gate_proofs boxes scales image_proofs",
    )


def export_construction(
    net: MaxoutNetwork,
    tf: Transformer | None = None,
    domain=None,
    module: str = "NetEquiv",
    gates=None,
    decide: bool = True,
    packed: bool = False,
) -> str:
    """The Coq file proving ``tf`` (default: the construction of ``net``) equal to ``net`` on
    ``domain`` (default: the network's) through ``construct_zsound`` (``construct_poly_zsound``
    for a polyhedron).  ``decide``: refuse (ExportUnsupported) a Transformer that is not the
    construction of ``net``, decided in Python; without it (tamper tests) the file is written
    with the gates read off ``tf`` (or ``gates``) and Coq decides.  ``packed``: the two models
    as two arrays of machine integers (Construction.unpack_maxout, unpack_transformer), which
    Coq reads many times faster than terms; the file then states them as those arrays
    (``Eval vm_compute in net_a`` shows them).  The domain and the gate constants are written
    as terms either way, the integer gate certificate as an array (unpack_zcert)."""
    domain = domain if domain is not None else net.domain
    if domain is None:
        raise ExportUnsupported("no domain: give one (the network has none)")
    if tf is None:
        tf = compile_transformer(net, domain).transformer
    if gates is None:
        gates = construction_of(net, tf, domain) if decide else gates_of(net, tf)
        if gates is None:
            raise ExportUnsupported(
                "the Transformer is not the default construction of the "
                "network (docs/notes/construction.md §2, unmerged, one-hot) for any "
                "gate constants"
            )
    if packed:
        from ..kernel.transformer import HARDMAX

        if any(not isinstance(s, FeedForward) and s.kind != HARDMAX for s in tf.sublayers):
            raise ExportUnsupported("the Transformer has softmax attention")
        sa, sb = _packed_models(net, tf)
        models = (
            "Definition packed_net : PArray.array Uint63.int :=\n  " + _pack(sa) + ".\n\n"
            "Definition packed_tf : PArray.array Uint63.int :=\n  " + _pack(sb) + ".\n\n"
            "Definition net_a : maxout := unpack_maxout packed_net.\n\n"
            "Definition net_b : transformer := unpack_transformer packed_tf.\n"
        )
    else:
        dt, term_tf = _tf_defs(tf)
        models = (
            f"Definition net_a : maxout :=\n{_maxout_term(net)}.\n\n{dt}"
            f"Definition net_b : transformer :=\n{term_tf}.\n"
        )
    dom_defs, in_dom, _ = _domain_text(domain)
    if isinstance(domain, Box):
        gdefs, zboxes, check, theorem = _gates_box(net, gates, domain)
    else:
        gdefs, zboxes, check, theorem = _gates_poly(net, gates, domain)
    hashes = content_hashes(net, tf, domain)
    farkas_block = (
        ("(** The gate certificate: Farkas proofs of the first layer's bounds *)\n\n" + gdefs)
        if gdefs
        else ""
    )
    packed_block = (
        (
            "(** The models, packed as machine integers (Construction.unpack_maxout and "
            "unpack_transformer read them) *)\n\n" + models + "\n"
        )
        if packed
        else ""
    )
    return (
        f"""(* {module}.v -- written by exactmax (construction export, #19).  Check it with
     coqc -Q <exactmax>/proofs ExactMax -no-glob {module}.v
   The theorem at the end says that the Transformer below equals the Maxout network at every
   real point of the domain.  It is the library's theorem {theorem.split()[0]}
   (proofs/ConstructionSound.v, proved once for every network) applied to three facts this
   file proves by computation: the Transformer is construct net_a gates (the construction of
   docs/notes/construction.md §2 with the gate constants below), the network is well-shaped, and the
   gate constants bound every pre-activation over the domain (the boxes below, corners on a
   grid 1/G, carry them through the layers; checked in integers, Construction.zgates_ok).
   Exported from (sha256 of the canonical JSON, as check-cert prints them; also defined
   below, in Module Sha256):
"""
        + "".join(f"     {k:<7} {v}\n" for k, v in hashes.items())
        + f"""\
   exactmax export-coq --construction NET.json [--transformer TF.json] [--domain D.json]
   -o THIS.v --existing --check confirms that this file states exactly those models and
   that domain. *)

From Coq Require Import QArith Reals List.
From Coq Require Uint63 Strings.String.
Import (notations) Uint63.   (* names, as Print Assumptions prints them, stay qualified *)
From ExactMax Require Import Checker Sound Build Maxout Transformer Layerwise Construction ConstructionSound.
{_sha256_module(net, tf, domain)}
Open Scope Q_scope.

{packed_block}Section Models.
Import ListNotations.

{"" if packed else "(** The models, as a user wrote them *)" + chr(10) + chr(10) + models}
(** The gate constants C_l, one per layer *)

Definition gates : list Q := {_qlist(gates)}.

(** The domain *)

{dom_defs}
{farkas_block}End Models.

(** The gate certificate: the boxes B_0 (containing the domain) .. B_(D-1), each as its
    grid G and the integers L, U of its corners L / G, U / G, and the layers' common
    denominators s_l with m_d = s_l / d for each denominator d, packed as machine integers
    (Construction.unpack_zcert reads them) *)

Definition packed_boxes : PArray.array Uint63.int :=
  {zboxes}.

Definition boxes : list zbox := fst (unpack_zcert packed_boxes).
Definition scales : list zscales := snd (unpack_zcert packed_boxes).

Lemma net_b_construct : net_b = construct net_a gates.
Proof. vm_cast_no_check (eq_refl net_b). Qed.

Lemma net_a_shaped : shaped net_a = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

Lemma gates_checked : {check} = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

Lemma net_a_dim : mo_dim net_a = {net.input_dim}%nat.
Proof. vm_cast_no_check (eq_refl {net.input_dim}%nat). Qed.

(** The theorem *)

Theorem net_equiv : forall x : list R,
  length x = {net.input_dim}%nat -> {in_dom} -> transformerR net_b x = maxoutR net_a x.
Proof.
  intros x Hd Hx. rewrite net_b_construct. rewrite <- net_a_dim in Hd.
  exact ({theorem} net_a_shaped gates_checked x Hd Hx).
Qed.

Print Assumptions net_equiv.
"""
    )


# ------------------------------------------------------------------ the binding

_WHAT = {
    "net_a": "the network",
    "packed_net": "the network",
    "net_b": "the Transformer",
    "packed_tf": "the Transformer",
    "lower": "the domain",
    "upper": "the domain",
    "A": "the domain",
    "b": "the domain",
    "gates": "the gate constants",
    "packed_boxes": "the gate certificate",
    "boxes": "the gate certificate",
    "scales": "the gate certificate",
    "gate_proofs": "the gate certificate",
    "image_proofs": "the gate certificate",
}


def _what(name: str) -> str:
    word = name.split()[-1]
    if word.startswith("Sha256."):
        return "the sha256 the file is bound to"
    return _WHAT.get(word) or ("the Transformer" if word.startswith("net_b_") else "the statement")


def _stream(words) -> list[int]:
    """The numbers of a packed array (Checker.unpack): the words' bytes, 7 to a word, read as
    groups of 7 bits, least significant first, the high bit set on all but a number's last;
    word k is stored xor'ed with k * SCRAMBLE mod 2^63 (coq._pack)."""
    out, n, shift = [], 0, 0
    for k, w in enumerate(words):
        for byte in (int(w) ^ (k * SCRAMBLE & MASK63)).to_bytes(7, "little"):
            n |= (byte & 127) << shift
            shift += 7
            if byte < 128:
                out.append(n)
                n, shift = 0, 0
    return out


def check_binding(path: str, text: str, expected: str, inputs: str) -> int:
    """``coqcheck.check_binding`` for a construction export: the sentences described by this
    file's names, a packed array compared as the stream of numbers it holds."""
    from .coqcheck import check_binding as check

    return check(path, text, expected, inputs, what=_what, stream=_stream, verb="gives")


# ------------------------------------------------------------------ command line


def _first_error(text: str) -> str:
    """coqc's message in one line: where, and the first line of the error."""
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    where = next((l for l in lines if l.startswith("File ")), "")
    err = next((i for i, l in enumerate(lines) if l.startswith("Error")), None)
    if err is None:
        return " ".join(lines[:2])
    msg = lines[err][len("Error:") :].strip() or " ".join(lines[err + 1 : err + 3])
    return (where.rstrip(":") + ": " if where else "") + msg


def run_coqc(path: str, library: str, timeout_s: float = 600.0) -> tuple[bool, float, str]:
    """(accepted, seconds, coqc's message in one line) of ``coqc -Q library ExactMax``."""
    import os
    import subprocess
    import time

    t = time.perf_counter()
    try:
        r = subprocess.run(
            [
                "coqc",
                "-Q",
                os.path.abspath(library),
                "ExactMax",
                "-no-glob",
                os.path.basename(path),
            ],
            cwd=os.path.dirname(os.path.abspath(path)),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return False, time.perf_counter() - t, f"coqc took more than {timeout_s:g} s"
    secs = time.perf_counter() - t
    if r.returncode != 0:
        return False, secs, _first_error(r.stdout + r.stderr)
    from .coqcheck import AssumptionsRejected, check_assumptions

    try:  # the file's last command, Print Assumptions net_equiv: only allowed axioms
        check_assumptions(r.stdout)
    except AssumptionsRejected as e:
        return False, secs, f"{path}: {e}"
    return True, secs, ""


def main(argv=None) -> int:
    """exactmax export-coq --construction NET.json [--transformer TF.json] [--domain D.json]
    -o X.v [--packed] [--existing] [--check] [--json]: exit 0 (written; with --check,
    the file states exactly the inputs and coqc accepts it), 1 (the file states something
    else, the first difference named, or coqc rejected it: its error in one line), 2 (bad
    input: the Transformer is not the construction, no domain, ...).  --existing: do not
    write; check the file already at -o against the inputs (the form, packed or terms, read
    off the file)."""
    import argparse
    import os
    import re
    import sys

    from ..exits import EXIT_INPUT, EXIT_OK, EXIT_REFUTED
    from ..io.models import load_domain, load_model, write_bytes_atomic
    from .coqcheck import _HASH_LINE, BindingMismatch

    ap = argparse.ArgumentParser(
        prog="exactmax export-coq --construction",
        description="Prove a compiled Transformer equal to its Maxout "
        "network in Coq through the construction theorem (#19).",
    )
    ap.add_argument("network", metavar="NET.json")
    ap.add_argument(
        "--transformer", metavar="TF.json", help="the Transformer (default: compile the network)"
    )
    ap.add_argument("--domain", metavar="D.json", help="the domain (default: the network's)")
    ap.add_argument("-o", "--output", required=True, metavar="X.v")
    ap.add_argument(
        "--check",
        action="store_true",
        help="compare the file with the inputs, then compile it with coqc",
    )
    ap.add_argument(
        "--existing",
        action="store_true",
        help="do not write: check the file already at -o against the inputs (implies --check)",
    )
    ap.add_argument("--json", action="store_true", help="one JSON object on standard output")
    ap.add_argument(
        "--coq-lib",
        metavar="DIR",
        help="the library (default: proofs/ beside the package, or $EXACTMAX_COQ_LIB)",
    )
    ap.add_argument("--timeout", type=float, default=600.0, metavar="S")
    ap.add_argument(
        "--packed",
        action="store_true",
        help="write the two models as arrays of "
        "machine integers (Coq reads them many times faster)",
    )
    args = ap.parse_args(argv)
    module = os.path.splitext(os.path.basename(args.output))[0]
    if not args.output.endswith(".v") or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", module):
        print(
            f"exactmax: -o: expected a Coq file name such as NetEquiv.v, got {args.output!r}",
            file=sys.stderr,
        )
        return EXIT_INPUT
    written = None
    if args.existing:
        try:
            with open(args.output, encoding="utf-8") as f:
                written = f.read()
        except (OSError, UnicodeDecodeError) as e:
            print(
                f"exactmax: error: {args.output}: cannot be read ({e}); --existing checks a "
                "file export-coq --construction wrote earlier",
                file=sys.stderr,
            )
            return EXIT_INPUT
    packed = args.packed or (written is not None and "Definition packed_net " in written)
    try:
        net = load_model(args.network)
        if not isinstance(net, MaxoutNetwork):
            raise ExportUnsupported(f"{args.network} is not a Maxout network")
        tf = load_model(args.transformer) if args.transformer else None
        if tf is not None and not isinstance(tf, Transformer):
            raise ExportUnsupported(f"{args.transformer} is not a Transformer")
        domain = load_domain(args.domain, net.input_dim) if args.domain else None
        text = export_construction(net, tf, domain, module, packed=packed)
    except (ExportUnsupported, ValueError, OSError) as e:
        print(f"exactmax: cannot export: {e}", file=sys.stderr)
        return EXIT_INPUT
    hashes = dict(_HASH_LINE.findall(text))
    if written is None:
        write_bytes_atomic(args.output, text.encode())
        with open(args.output, encoding="utf-8") as f:  # what is on disk is what is checked
            written = f.read()
    out = {"output": args.output, "v_bytes": len(written.encode()), "sha256": hashes}
    status = EXIT_OK
    check = args.check or args.existing
    if check:
        inputs = ", ".join(p for p in (args.network, args.transformer, args.domain) if p)
        try:
            out["sentences_compared"] = check_binding(args.output, written, text, inputs)
        except BindingMismatch as e:
            out.update(coq="not run", verdict="rejected", reason=str(e))
            print(jsonout.dumps(out) if args.json else f"rejected: {e}")
            return EXIT_REFUTED
        lib = (
            args.coq_lib
            or os.environ.get("EXACTMAX_COQ_LIB")
            or os.path.join(
                os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                "proofs",
            )
        )
        ok, secs, message = run_coqc(args.output, lib, args.timeout)
        out.update(coq="accepted" if ok else "rejected", coqc_s=round(secs, 2))
        if not ok:
            out["coqc_message"] = message
            status = EXIT_REFUTED
    out["verdict"] = "written" if not check else "proved" if status == EXIT_OK else "rejected"
    out["trust"] = "coq-checked" if out["verdict"] == "proved" else None
    if args.json:
        print(jsonout.dumps(out))
    elif check:
        print(
            f"coqc accepted {args.output} in {out['coqc_s']:.1f} s: the Transformer equals "
            f"the network on the domain (the construction theorem); the file states exactly "
            f"{inputs} ({out['sentences_compared']} sentences compared)"
            if status == EXIT_OK
            else f"coqc rejected {args.output}: {out['coqc_message']}"
        )
    else:
        print(f"wrote {args.output} ({out['v_bytes']} bytes)")
    return status


if __name__ == "__main__":
    import sys

    sys.exit(main())
