"""Export a certificate as a Coq file checked against the library in ``proofs/``.

The file defines both models readably (a Maxout network as layers of units of rational pieces,
a Transformer as its embedding, positions, sub-layers and read-out), the domain (a box or
A x <= b) and the split tree, and proves

    forall x : list R, length x = d -> in_domain x -> net_b x = net_a x

by one reflective call of the library's checker (``vm_compute``) on the programs that the
library's translations build from the models; the translations are proved correct once, in
``proofs/Maxout.v`` and ``proofs/Transformer.v``, so the file restates nothing about them.  Choices
refer to program nodes by index: the library's translation builds the kernel's programs node
for node.

A layerwise certificate (``kernel/layerwise.py``) is written as its boxes and per-layer claims,
and ``net_equiv`` follows from the composition theorem of ``proofs/Layerwise.v``
(``layerwise_sound`` for a Transformer against its Maxout network, ``mm_layerwise_sound`` for
two Maxout networks of the same widths), proved once for all certificates.

The exporter writes what it is given; rejecting a bad certificate is Coq's job.  The
certificate itself (the split tree with its hyperplanes, choices and Farkas lists, hash-consed
into tables) is written as one array of machine integers that the library unpacks
(``Checker.unpack_tree``, ``Layerwise.unpack_lw``): Coq reads such an array many times faster
than the same tree written as terms, and since the checker is sound for every tree, the
unpacking needs no proof.  The file is meant to be compiled with ``-no-glob``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..kernel.certificate import Empty, Leaf, Split, TieProof
from ..kernel.layerwise import LayerwiseCertificate
from ..kernel.maxout import MaxoutNetwork
from ..kernel.polyhedron import Box
from ..kernel.rational import Q
from ..kernel.transformer import HARDMAX, FeedForward, Transformer


class ExportUnsupported(ValueError):
    """The certificate speaks about something the Coq library cannot state yet."""


def _integral_scale(a, c):
    """The k > 0 that makes k (a, c) integers with no common factor (1 for a zero row)."""
    vs = [v for v in (*a, c) if v]
    if not vs:
        return 1
    den = math.lcm(*(int(v.q) for v in vs))
    return Q(den, math.gcd(*(int(v.p) for v in vs)))


def _q(v) -> str:
    """A rational as Coq reads it in Q_scope: 3, -3, (-1#2)."""
    p, q = int(v.p), int(v.q)
    return str(p) if q == 1 else f"({p}#{q})"


_KINDS = ("farkas", "aff", "entry", "choices", "tree")


def _zig(n: int) -> int:
    """A signed number as the packed stream holds it: 2 n, or -2 n - 1 when n < 0."""
    return 2 * n if n >= 0 else -2 * n - 1


def _qnums(v) -> tuple[int, int]:
    return _zig(int(v.p)), int(v.q)


class _Tables:
    """The five hash-consed tables of a packed certificate (``Checker.unpack_tree``): Farkas
    lists, affine maps, choice entries, choice lists and tree nodes, each item written once
    as its numbers and referred to by index everywhere."""

    def __init__(self, kinds: tuple[str, ...] = _KINDS):
        self.kinds = kinds  # the tables, in the order the stream holds them
        self.items = {k: [] for k in kinds}
        self.index = {k: {} for k in kinds}

    def add(self, kind: str, nums: tuple) -> int:
        index = self.index[kind]
        if nums not in index:
            index[nums] = len(self.items[kind])
            self.items[kind].append(nums)
        return index[nums]

    def stream(self, tail) -> list[int]:
        out = []
        for k in self.kinds:
            out.append(len(self.items[k]))
            for nums in self.items[k]:
                out.extend(nums)
        out.extend(tail)
        return out


SCRAMBLE, MASK63 = 0x1E3779B97F4A7C15, (1 << 63) - 1  # Checker.scramble's odd constant


def _pack(nums, per_line: int = 6) -> str:
    """The Coq array literal of a stream of numbers >= 0 (``Checker.unpack``): each number as
    groups of 7 bits, least significant first, the high bit set on all but the last; the
    bytes 7 to a machine word, least significant first; word k xor'ed with k * SCRAMBLE mod
    2^63, so that words do not share their low bits (coqc hash-conses machine integers by
    them: a literal of words with equal low bits took time quadratic in its length)."""
    bs = bytearray()
    for n in nums:
        while n > 127:
            bs.append((n & 127) | 128)
            n >>= 7
        bs.append(n)
    words = [  # word k xor k * SCRAMBLE mod 2^63 (Checker.scramble: Coq hashes by low bits)
        str(int.from_bytes(bs[i : i + 7], "little") ^ (i // 7 * SCRAMBLE & MASK63))
        for i in range(0, len(bs), 7)
    ]
    lines = ["; ".join(words[i : i + per_line]) for i in range(0, len(words), per_line)]
    return "[|\n  " + ";\n  ".join(lines) + "\n  | 0 |]%uint63"


def _qlist(vs) -> str:
    return "[" + "; ".join(_q(v) for v in vs) + "]"


WORD = 1 << 62


def _qw_words(v) -> str:
    """A weight as Coq reads it: an integer as in Q_scope; p/q with |p|, q < 2^62 as
    ``(qi p q)``, or ``(qn |p| q)`` when p < 0 (Checker.qi, qn: Coq reads machine-integer
    literals ten times faster than Q's numerals, which it converts by evaluating Gallina:
    10 s of ACAS Xu's 13,000 weights)."""
    p, q = int(v.p), int(v.q)
    if q == 1 or not (abs(p) < WORD and q < WORD):
        return _q(v)
    return f"(qi {p} {q})" if p >= 0 else f"(qn {-p} {q})"


def _wlist_words(vs) -> str:
    return "[" + "; ".join(_qw_words(v) for v in vs) + "]"


def _maxout_term(net: MaxoutNetwork, words: bool = True) -> str:
    """The network as a ``maxout`` record; with ``words`` (exported files), fractional weights
    as machine-integer literals (``_qw_words``), else as Q's numerals (no primitive integers in the
    file's axioms)."""
    wlist = _wlist_words if words else _qlist
    qw = _qw_words if words else _q
    layers = []
    for layer in net.layers:
        units = []
        for unit in layer.units:
            units.append(
                "["
                + "; ".join(f"{{| pw := {wlist(p.w)}; pb := {qw(p.b)} |}}" for p in unit.pieces)
                + "]"
            )
        layers.append("[\n    " + ";\n    ".join(units) + "]")
    out = "None"
    if net.output is not None:
        out = (
            "Some (["
            + "; ".join(wlist(r) for r in net.output.W)
            + "], "
            + wlist(net.output.b)
            + ")"
        )
    return (
        f"{{| mo_dim := {net.input_dim};\n  mo_layers := [\n  "
        + ";\n  ".join(layers)
        + f"];\n  mo_out := {out} |}}"
    )


def _mat(M) -> str:
    """A matrix as rows of rationals, or, when at most a third of its entries are not 0, as
    ``Transformer.spmat``: the number of columns and each row's nonzero entries ``j ~> v``
    (Coq reads every literal, so the zeros of the compiled Transformers' wide matrices cost
    most of the file's reading time)."""
    cols = len(M[0]) if len(M) else 0
    nonzero = sum(1 for r in M for v in r if v)
    if cols == 0 or 3 * nonzero > len(M) * cols or any(len(r) != cols for r in M):
        return "[" + ";\n   ".join(_qlist(r) for r in M) + "]"
    rows = ("[" + "; ".join(f"{j} ~> {_q(v)}" for j, v in enumerate(r) if v) + "]" for r in M)
    return f"spmat {cols}\n  [" + ";\n   ".join(rows) + "]"


def _transformer_defs(tf: Transformer, name: str) -> tuple[str, str]:
    """Named definitions of the Transformer's parts, and the record that assembles them."""
    defs, subs = [], []

    def define(part: str, typ: str, text: str) -> str:
        defs.append(f"Definition {name}_{part} : {typ} :=\n  {text}.")
        return f"{name}_{part}"

    for i, s in enumerate(tf.sublayers):
        if isinstance(s, FeedForward):
            subs.append(_ff_term(s, f"ff{i}", define))
            continue
        if s.kind != HARDMAX:
            raise ExportUnsupported(
                "the Transformer has softmax attention, which has no exact "
                "value; only hardmax Transformers are stated in Coq"
            )
        heads = [
            define(
                f"att{i}_head{j}",
                "head",
                f"{{| h_query := {_mat(h.query)};\n     h_key := {_mat(h.key)};\n"
                f"     h_value := {_mat(h.value)};\n     h_out := {_mat(h.out)};\n"
                f"     h_scale := {_q(h.scale)} |}}",
            )
            for j, h in enumerate(s.heads)
        ]
        subs.append("Attention [" + "; ".join(heads) + "]")
    r = tf.readout
    token = "None" if r.token is None else f"(Some {r.token}%nat)"
    emb = define("embedding", "mat", _mat(tf.embedding))
    pos = define("positions", "list (list Q)", _mat(tf.positions))
    term = (
        f"{{| tf_dim := {tf.input_dim}; tf_dm := {tf.d_model};\n  tf_emb := {emb}; "
        f"tf_pos := {pos};\n  tf_subs := [\n    "
        + ";\n    ".join(subs)
        + f"];\n  tf_token := {token};\n  tf_rW := {_mat(r.map.W)};\n  "
        f"tf_rb := {_qlist(r.map.b)} |}}"
    )
    return "\n\n".join(defs) + "\n\n", term


def _ff_term(s: FeedForward, part: str, define) -> str:
    """A feed-forward sub-layer as a Coq term, its matrices as named definitions."""
    return (
        f"FeedForward {define(f'{part}_W1', 'mat', _mat(s.inner.W))} "
        f"{define(f'{part}_b1', 'list Q', _qlist(s.inner.b))} "
        f"{define(f'{part}_W2', 'mat', _mat(s.outer.W))} "
        f"{define(f'{part}_b2', 'list Q', _qlist(s.outer.b))}"
    )


def _splits_defs(tf: Transformer, u: Transformer) -> str:
    """Rule (M): for every sub-layer of the merged Transformer, None (kept) or the two
    sub-layers of the unmerged one that replace it (Layerwise.unmerge)."""
    defs, items = [], []

    def define(part: str, typ: str, text: str) -> str:
        defs.append(f"Definition split_{part} : {typ} :=\n  {text}.")
        return f"split_{part}"

    D = (len(tf.sublayers) - 1) // 2
    merged = {
        2 + 2 * l: (u.sublayers[2 + 3 * l], u.sublayers[3 + 3 * l])
        for l in range(D - 1)
        if 3 + 3 * l < len(u.sublayers)
    }  # a missing pair: kept, and Coq rejects
    for i in range(len(tf.sublayers)):
        if i in merged and all(isinstance(x, FeedForward) for x in merged[i]):
            a, b = merged[i]
            items.append(
                f"Some ({_ff_term(a, f'{i}a', define)},\n      {_ff_term(b, f'{i}b', define)})"
            )
        else:
            items.append("None")
    return (
        "\n\n".join(defs) + "\n\nDefinition splits : list (option (sublayer * sublayer)) "
        ":=\n  [" + ";\n   ".join(items) + "].\n\n"
    )


def _model(m, name: str) -> tuple[str, str, str, str, str]:
    """(definitions, Coq type, term, constructor of Export.model, semantics) of a model."""
    if isinstance(m, MaxoutNetwork):
        return "", "maxout", _maxout_term(m), "MMaxout", "maxoutR"
    defs, term = _transformer_defs(m, name)
    return defs, "transformer", term, "MTransformer", "transformerR"


def _max_row(pr) -> int:
    """The largest row index a proof reads (-1 for none)."""
    if pr is None:
        return -1
    fs = (pr.dominance, pr.upper, pr.lower) if isinstance(pr, TieProof) else (pr,)
    return max((i for F in fs for i, _ in F), default=-1)


@dataclass
class _TreeWriter:
    """Writes a split tree, each choice stated once, at the highest split it holds under.

    The checker looks up a node's choice in the leaf's own list, then in the lists of the
    splits above it, nearest first.  The writer computes every leaf's effective choices and
    moves a choice up to the highest split below which every leaf has that very choice and
    whose cell already has every row its Farkas proofs read (rows are numbered absolutely:
    the domain's, then one per split on the way down, so such a proof means the same in every
    leaf below).  Each leaf's effective choices are unchanged; the file just states them
    once instead of once per leaf.  Entries, lists and nodes are shared through the tables."""

    t: _Tables
    domain_rows: int

    def farkas(self, F, lam=()) -> int:
        """A Farkas list as the pair (D, integer multipliers) of ``Checker.entails``: the
        kernel's y_i read row i scaled by lam[i - domain_rows] (split rows are written
        with integer coefficients), so the multiplier of the written row is y_i / lam, and
        D is the least common denominator of these.  (A negative multiplier is written as
        it is: the checker must see it, and reject it.)"""
        ys = []
        for i, y in F:
            j = i - self.domain_rows
            ys.append((i, y / lam[j] if 0 <= j < len(lam) else y))
        D = 1
        for _, y in ys:
            D = math.lcm(D, int(y.q))
        nums = [_zig(D), len(ys)]
        for i, y in ys:
            nums += [i, _zig(int(y * D))]
        return self.t.add("farkas", tuple(nums))

    def proof(self, pr, lam) -> tuple:
        if pr is None:
            return (0,)
        if isinstance(pr, TieProof):
            return (
                2,
                self.farkas(pr.dominance, lam),
                self.farkas(pr.upper, lam),
                self.farkas(pr.lower, lam),
            )
        return (1, self.farkas(pr, lam))

    def entry(self, side, index, ch, lam) -> tuple[int, int]:
        """(the entry's index, the largest row its proofs read)."""
        nums = (side, index, ch.k, len(ch.proofs)) + sum(
            (self.proof(p, lam) for p in ch.proofs), ()
        )
        return (self.t.add("entry", nums), max((_max_row(p) for p in ch.proofs), default=-1))

    def own(self, chs, lam) -> dict:
        out = {}
        for side, index, ch in chs:  # within one list the kernel keeps the last choice
            out[side, index] = self.entry(side, index, ch, lam)
        return out

    def choices(self, entries: dict) -> int:
        return self.t.add("choices", (len(entries),) + tuple(n for n, _ in entries.values()))

    def tree(self, tree) -> int:
        """The tree's index in the table of tree nodes (children first, no deep recursion in
        Python)."""
        # 1. every leaf's effective choices (own first, then the splits' above, nearest first)
        #    (lams[n]: the scales of the split rows above n, see ``farkas``)
        eff: dict[int, dict] = {}
        depth: dict[int, int] = {id(tree): 0}
        lams: dict[int, tuple] = {id(tree): ()}
        stack = [(tree, {})]
        order = []
        while stack:
            node, inh = stack.pop()
            order.append(node)
            lam = lams[id(node)]
            if isinstance(node, Split):
                here = {**inh, **self.own(node.choices, lam)}
                for child in (node.lt, node.ge):
                    depth[id(child)] = depth[id(node)] + 1
                    lams[id(child)] = lam + (_integral_scale(node.a, node.c),)
                    stack.append((child, here))
            elif isinstance(node, Leaf):
                eff[id(node)] = {**inh, **self.own(node.choices, lam)}
        # 2. common[n]: the choices every leaf below n has, stateable at n (None: no leaf)
        common: dict[int, dict | None] = {}
        for node in reversed(order):  # children before parents
            if isinstance(node, Leaf):
                common[id(node)] = eff[id(node)]
            elif isinstance(node, Empty):
                common[id(node)] = None
            else:
                a, b = common[id(node.ge)], common[id(node.lt)]
                both = (
                    a
                    if b is None
                    else b
                    if a is None
                    else {k: v for k, v in a.items() if b.get(k) == v}
                )
                rows = self.domain_rows + depth[id(node)]
                common[id(node)] = (
                    None if both is None else {k: v for k, v in both.items() if v[1] < rows}
                )
        # 3. write: each node states what it holds and its parent does not
        names: dict[int, int] = {}
        above: dict[int, dict] = {id(tree): {}}
        for node in order:  # parents before children
            if isinstance(node, Split):
                for child in (node.ge, node.lt):
                    above[id(child)] = common[id(node)] or {}
        for node in reversed(order):  # children before parents
            if isinstance(node, Empty):
                nums = (1, self.farkas(node.proof, lams[id(node)]))
            else:
                up = above[id(node)]
                mine = {k: v for k, v in (common[id(node)] or {}).items() if up.get(k) != v}
                if isinstance(node, Leaf):
                    nums = (0, self.choices(mine))
                else:
                    k = _integral_scale(node.a, node.c)
                    nums = (
                        2,
                        self.aff([k * v for v in node.a], k * node.c),
                        self.choices(mine),
                        names[id(node.ge)],
                        names[id(node.lt)],
                    )
            names[id(node)] = self.t.add("tree", nums)
        return names[id(tree)]

    def aff(self, a, c) -> int:
        return self.t.add("aff", (len(a),) + sum((_qnums(v) for v in (*a, c)), ()))


def content_hashes(a, b, domain) -> dict[str, str]:
    """The sha256 of both models' and the domain's canonical JSON, as certificates and
    check-cert name them (``io.certificates.content_hash``)."""
    from ..io.certificates import content_hash
    from ..io.models import domain_to_json, model_to_json

    return {
        "net_a": content_hash(model_to_json(a)),
        "net_b": content_hash(model_to_json(b)),
        "domain": content_hash(domain_to_json(domain)),
    }


def _binding_comment(a, b, domain) -> str:
    h = content_hashes(a, b, domain)
    return (
        "   Exported from the certificate about (sha256 of the canonical JSON, as check-cert\n"
        "   prints them; also defined below, in Module Sha256):\n"
        + "".join(f"     {k:<7} {v}\n" for k, v in h.items())
        + "   exactmax export-coq CERT.json -o THIS.v --existing confirms that this file\n"
        "   states exactly that certificate's models, domain and tree."
    )


def _sha256_module(a, b, domain) -> str:
    """The hashes of ``_binding_comment`` as Coq strings (String is imported inside the
    module only: it would hide List.length)."""
    h = content_hashes(a, b, domain)
    return (
        "Module Sha256.\nImport Strings.String.\nLocal Open Scope string_scope.\n"
        + "".join(f'Definition {k} : string := "{v}".\n' for k, v in h.items())
        + "End Sha256.\n"
    )


def export_coq(a, b, domain, tree, module: str = "NetEquiv") -> str:
    """The text of a Coq file proving b = a on the domain from the certificate ``tree``."""
    if a.input_dim != b.input_dim:
        raise ExportUnsupported("the two models have different input dimensions")
    if isinstance(tree, LayerwiseCertificate):
        return _export_layerwise(a, b, domain, tree, module)
    t = _Tables()
    da, ta, term_a, ca, fa = _model(a, "net_a")
    db, tb, term_b, cb, fb = _model(b, "net_b")
    w = _TreeWriter(t, 2 * domain.dim if isinstance(domain, Box) else len(domain.as_polyhedron().b))
    root = w.tree(tree)
    d = a.input_dim
    dom_defs, in_dom, _ = _domain_text(domain)
    rows, sound, shaped = (
        ("rows_of_box lower upper", "equiv_box_sound", "box_shaped")
        if isinstance(domain, Box)
        else ("rows_of_poly A b", "equiv_poly_sound", "poly_shaped")
    )
    dom_args = "lower upper" if isinstance(domain, Box) else "A b"
    return f"""(* {module}.v -- written by exactmax export-coq.  Check it with
     coqc -Q <exactmax>/proofs ExactMax -no-glob {module}.v
   The theorem at the end says that the two models below agree at every real point of the
   domain.  Nothing else in this file needs to be read: the certificate (the split tree and
   its Farkas multipliers) is checked by the library's proved checker, and the programs it
   speaks about are built from the models by the library's proved translations.
{_binding_comment(a, b, domain)} *)

From Coq Require Import QArith Reals List.
From Coq Require Uint63 Strings.String.
Import (notations) Uint63.   (* names, as Print Assumptions prints them, stay qualified *)
From ExactMax Require Import Checker Sound Build Maxout Transformer Export.
{_sha256_module(a, b, domain)}
Open Scope Q_scope.

Section Models.
Import ListNotations.     (* for the models; the array below is written [| .. |] *)

(** The models, as a user wrote them *)

{da}Definition net_a : {ta} :=
{term_a}.

{db}Definition net_b : {tb} :=
{term_b}.

(** The domain *)

{dom_defs}
End Models.

(** The certificate: the split tree with its choices and Farkas multipliers, packed as
    machine integers (Checker.unpack_tree reads it; Checker.v describes the layout) *)

Definition packed : PArray.array Uint63.int :=
  {_pack(t.stream([root]))}.

Definition certificate : tree := unpack_tree packed.

Lemma certificate_checks :
  certificate_ok ({ca} net_a) ({cb} net_b) ({rows}) certificate = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

(** The models and the domain are well-shaped (every length is the one the dimensions say) *)

Lemma shapes_ok :
  well_shaped ({ca} net_a) ({cb} net_b) && {shaped} {d} {dom_args} = true.
Proof. vm_compute. reflexivity. Qed.

(** The theorem *)

Theorem net_equiv : forall x : list R,
  length x = {d}%nat -> {in_dom} -> {fb} net_b x = {fa} net_a x.
Proof.
  intros x Hd Hx.
  exact ({sound} ({ca} net_a) ({cb} net_b) {dom_args} certificate shapes_ok
           certificate_checks x Hd Hx).
Qed.

(** What the theorem rests on: coqc prints the axioms it uses (exactmax export-coq --check
    allows only the two Reals axioms and Coq's primitive integers and arrays) *)

Print Assumptions net_equiv.
"""


def _domain_text(domain) -> tuple[str, str, str]:
    """(definitions, the statement x in D, the Layerwise.domain term) of a domain."""
    if isinstance(domain, Box):
        return (
            f"Definition lower : list Q := {_qlist(domain.lower)}.\n"
            f"Definition upper : list Q := {_qlist(domain.upper)}.\n",
            "in_box lower upper x",
            "(DBox lower upper)",
        )
    P = domain.as_polyhedron()
    return (
        "Definition A : list (list Q) := ["
        + "; ".join(_qlist(r) for r in P.A)
        + "].\n"
        + f"Definition b : list Q := {_qlist(P.b)}.\n",
        "in_poly A b x",
        "(DPoly A b)",
    )


def _export_layerwise(net, tf, domain, cert: LayerwiseCertificate, module: str) -> str:
    """A layerwise certificate (kernel/layerwise.py): the models, the boxes B_0 .. B_{D-1},
    the Farkas proofs of B_0 for a polyhedral domain, and per layer the claims (outputs and a
    split tree over the layer's box, or over the domain's rows for the first layer under
    rule (B'); program 0 the encoded Maxout layer, program 1 the Transformer's three
    sub-layers or the other network's encoded layer), then (B')'s flag and the Farkas proofs
    of B_1 over the domain's rows (Layerwise.unpack_lw); ``net_equiv``
    follows from ``layerwise_sound`` (or ``mm_layerwise_sound`` for two Maxout networks) of
    ``proofs/Layerwise.v``, the composition theorems proved once."""
    if not isinstance(net, MaxoutNetwork):
        raise ExportUnsupported("a layerwise certificate's first model must be the Maxout network")
    t = _Tables()
    if isinstance(tf, Transformer):
        dt, term_tf = _transformer_defs(tf, "net_b")
        typ, sem = "transformer", "transformerR"
        check, sound = "layerwise_ok net_a net_b {dom}", "layerwise_sound net_a net_b {dom}"
        shaped = "lw_shaped net_a net_b {dom}"
        what = "the Transformer below equals the Maxout network"
        if cert.unmerged is not None:  # rule (M): checked through its unmerged form
            dt += _splits_defs(tf, cert.unmerged)
            check = "merged_layerwise_ok net_a net_b {dom} splits"
            sound = "merged_layerwise_sound net_a net_b {dom} splits"
    else:
        # both encoded with one token of width d_m and no positional vector (layer_programs)
        dm = max(net.widths + (net.out_dim,))
        dt, term_tf = "", _maxout_term(tf)
        typ, sem = "maxout", "maxoutR"
        check = f"mm_layerwise_ok net_a net_b {{dom}} {dm}%nat"
        sound = f"mm_layerwise_sound net_a net_b {{dom}} {dm}%nat"
        shaped = "mm_shaped net_a net_b {dom}"
        what = "the two Maxout networks below agree"
    claims = []
    for l, layer in enumerate(cert.layers):
        rows = 2 * cert.boxes[l].dim
        if l == 0 and cert.image is not None:  # (B'): over the domain's own rows
            rows = len(domain.as_polyhedron().b)
        claims.append(len(layer))
        for claim in layer:
            root = _TreeWriter(t, rows).tree(claim.tree)
            claims += [len(claim.outputs), *claim.outputs, root]
    fw = _TreeWriter(t, 0)
    boxes = [len(cert.boxes)]
    for B in cert.boxes:
        for v in (B.lower, B.upper):
            boxes += [len(v), *(n for q in v for n in _qnums(q))]
    proofs = (
        [0]
        if cert.box_proofs is None
        else [len(cert.box_proofs)] + [fw.farkas(F) for pair in cert.box_proofs for F in pair]
    )
    image = (
        [0]
        if cert.image is None
        else [1, len(cert.image)]
        + [
            n
            for im in cert.image
            for n in (
                im.lower_piece,
                fw.farkas(im.lower),
                len(im.upper),
                *(fw.farkas(u) for u in im.upper),
            )
        ]
    )
    if cert.image is None:
        image.append(0)
    packed = _pack(t.stream(boxes + proofs + [len(cert.layers)] + claims + image))
    dom_defs, in_dom, dom = _domain_text(domain)
    check, sound, shaped = check.format(dom=dom), sound.format(dom=dom), shaped.format(dom=dom)
    return f"""(* {module}.v -- written by exactmax export-coq from a layerwise certificate.  Check it with
     coqc -Q <exactmax>/proofs ExactMax -no-glob {module}.v
   The theorem at the end says that {what} at every
   real point of the domain.  Nothing else in this file needs to be read: the certificate
   (boxes, per-layer claims with split trees and Farkas multipliers) is checked by the
   library's proved checker (proofs/Layerwise.v), the per-layer programs are
   built from the models by the library's proved translations, and the composition of the
   layers is the library's theorem layerwise_sound.
{_binding_comment(net, tf, domain)} *)

From Coq Require Import QArith Reals List.
From Coq Require Uint63 Strings.String.
Import (notations) Uint63.   (* names, as Print Assumptions prints them, stay qualified *)
From ExactMax Require Import Checker Sound Build Maxout Transformer Layerwise.
{_sha256_module(net, tf, domain)}
Open Scope Q_scope.

Section Models.
Import ListNotations.     (* for the models; the array below is written [| .. |] *)

(** The models, as a user wrote them *)

Definition net_a : maxout :=
{_maxout_term(net)}.

{dt}Definition net_b : {typ} :=
{term_tf}.

(** The domain *)

{dom_defs}
End Models.

(** The certificate: the boxes B_0 .. B_(D-1), the Farkas proofs of B_0 (over a polyhedral
    domain), and per layer the claims, their split trees with choices and Farkas multipliers;
    packed as machine integers (Layerwise.unpack_lw reads it; Checker.v and Layerwise.v
    describe the layout) *)

Definition packed : PArray.array Uint63.int :=
  {packed}.

Definition certificate : lw_cert := unpack_lw packed.

Lemma certificate_checks : {check} certificate = true.
Proof. vm_cast_no_check (eq_refl true). Qed.

(** The models and the domain are well-shaped (every length is the one the dimensions say) *)

Lemma shapes_ok : {shaped} = true.
Proof. vm_compute. reflexivity. Qed.

(** The theorem *)

Theorem net_equiv : forall x : list R,
  length x = {net.input_dim}%nat -> {in_dom} -> {sem} net_b x = maxoutR net_a x.
Proof.
  intros x Hd Hx.
  exact ({sound} certificate shapes_ok certificate_checks x Hd Hx).
Qed.

(** What the theorem rests on: coqc prints the axioms it uses (exactmax export-coq --check
    allows only the two Reals axioms and Coq's primitive integers and arrays) *)

Print Assumptions net_equiv.
"""
