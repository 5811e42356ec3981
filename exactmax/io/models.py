"""The versioned JSON formats: exactmax/maxout, exactmax/transformer, exactmax/domain.

Unknown keys are errors (a typo is never ignored), except inside the free-form ``meta`` object.
"""

from __future__ import annotations

import json
import os
import secrets

from ..interruption import phase, temporary
from ..kernel.affine import Affine, SparseVector, nonzero
from ..kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from ..kernel.polyhedron import Box, Domain, Polyhedron
from ..kernel.rational import ZERO, Q
from ..kernel.transformer import (
    HARDMAX,
    SOFTMAX,
    Attention,
    FeedForward,
    Head,
    Readout,
    Sublayer,
    Transformer,
)
from .errors import InputError
from .jsonfile import Cursor, describe, plain, plural, read_json_file
from .nesting import collection_paused
from .numbers import NumberSyntaxError, parse_intervals, q_str

MAXOUT = "exactmax/maxout"
TRANSFORMER = "exactmax/transformer"
DOMAIN = "exactmax/domain"
VERSION = 1

Model = MaxoutNetwork | Transformer


# --------------------------------------------------------------------------------- reading


def _header(root: Cursor, formats: tuple[str, ...]) -> str:
    if not isinstance(root.value, dict):
        raise root.error(f"expected a JSON object, got {describe(root.value)}")
    if "format" not in root.value:
        raise root.error(
            'missing key "format" (expected ' + " or ".join(f'"{f}"' for f in formats) + ")"
        )
    if root.value.get("format") == DOMAIN and DOMAIN not in formats:
        raise root.child("format").error(
            "this is a domain file, not a model; pass it with --domain FILE"
        )
    fmt = root.child("format").string(formats)
    if "version" not in root.value:
        raise root.error('missing key "version"')
    v = root.child("version").integer()
    if v != VERSION:
        raise root.child("version").error(
            f"{fmt} version {v} is not supported (this exactmax reads version {VERSION})"
        )
    return fmt


MAXOUT_KEYS = (("format", "version", "input_dim", "layers"), ("output", "domain", "meta"))
TRANSFORMER_KEYS = (
    ("format", "version", "input_dim", "d_model", "embedding", "positions", "sublayers", "readout"),
    ("domain", "meta"),
)


def model_shape(root: Cursor, formats: tuple[str, ...] = (MAXOUT, TRANSFORMER)) -> str:
    """The top level of a model: format, version and keys (no body); the format."""
    fmt = _header(root, formats)
    root.fields(*(MAXOUT_KEYS if fmt == MAXOUT else TRANSFORMER_KEYS))
    return fmt


def load_model(path: str) -> Model:
    """Read a Maxout network or a Transformer file (its top level checked first, before the
    body is parsed: see ``read_json_file``).  An ``.onnx`` file is imported as a Maxout
    network (``io/onnxfile.py``)."""
    with phase(f"reading the model {path}"):
        if path.lower().endswith(".onnx"):
            from .onnxfile import load_onnx

            return load_onnx(path)
        return read_model(Cursor(path, "", read_json_file(path, model_shape)))


def read_model(root: Cursor, formats: tuple[str, ...] = (MAXOUT, TRANSFORMER)) -> Model:
    """A model object, checked exactly as a model file is (format, version, body): files
    and the models embedded in certificates alike."""
    fmt = _header(root, formats)
    return read_maxout(root) if fmt == MAXOUT else read_transformer(root)


BOX_OPTION, FROM_OPTION = "--box ", "--domain-from "
"""How ``--box TEXT`` and ``--domain-from PROP.vnnlib`` travel in place of a domain file's path
(``domain_source``): every command reads its domain through ``load_domain``, and every message
that names the domain's source then names the option and its value."""


def domain_arguments(p, default: str) -> None:
    """``--domain D.json``, ``--box "lo,hi;..."`` and ``--domain-from PROP.vnnlib`` on parser
    ``p`` (at most one of them: ``domain_source``)."""
    p.add_argument("--domain", metavar="D.json", help=f"domain file (default: {default})")
    p.add_argument(
        "--box",
        metavar="LO,HI;...",
        help='the domain as a box: "lo,hi" per input (exact numbers) separated by ";"; one '
        '"lo,hi" alone bounds every input',
    )
    p.add_argument(
        "--domain-from",
        metavar="PROP.vnnlib",
        help="the domain is this VNN-LIB property's input set",
    )


def domain_source(args) -> None:
    """Fold ``--box`` / ``--domain-from`` (if the command has them) into ``args.domain``."""
    given = [
        (flag, v)
        for flag, v in (
            (BOX_OPTION, getattr(args, "box", None)),
            (FROM_OPTION, getattr(args, "domain_from", None)),
        )
        if v is not None
    ]
    if len(given) + bool(getattr(args, "domain", None)) > 1:
        from ..exits import UsageError

        raise UsageError("give at most one of --domain, --box and --domain-from")
    if given:
        args.domain = given[0][0] + given[0][1]


def load_domain(path: str, dim: int | None = None) -> Domain:
    """Read an exactmax/domain file (a box or a polyhedron), of dimension ``dim`` if given; or
    the domain of ``--box`` or ``--domain-from`` (``domain_source``)."""
    if path.startswith(BOX_OPTION):
        return box_of_text(path[len(BOX_OPTION) :], dim)
    if path.startswith(FROM_OPTION):
        return domain_of_property(path[len(FROM_OPTION) :], dim)
    root = Cursor(path, "", read_json_file(path, _domain_shape))
    kind, f = _domain_shape(root)
    return _domain_body(kind, f[kind], dim)


def box_of_text(text: str, dim: int | None) -> Box:
    """The box of ``--box "lo,hi;lo,hi;..."`` (exact numbers, one side per input; a single side
    stands for every input when the dimension is known)."""
    where = f"--box {text}"
    try:
        sides = parse_intervals(text)
    except NumberSyntaxError as e:
        raise InputError(where, "", str(e)) from None
    if len(sides) == 1 and dim is not None:
        sides *= dim
    if dim is not None and len(sides) != dim:
        raise InputError(
            where, "", f'{len(sides)} sides "lo,hi" separated by ";" for a model of {dim} inputs'
        )
    for i, (lo, hi) in enumerate(sides):
        if lo > hi:
            raise InputError(where, "", f"side {i}: lo = {lo} is above hi = {hi}: no point")
    return Box(tuple(lo for lo, _ in sides), tuple(hi for _, hi in sides))


def domain_of_property(path: str, dim: int | None) -> Domain:
    """The input set of the VNN-LIB property at ``path`` (``--domain-from``): a box when its
    constraints bound each input, else a polyhedron; a property whose cases have different
    input sets is refused (no one domain)."""
    from .vnnlib2 import read_property

    prop = read_property(path)
    if dim is not None and prop.n_x != dim:
        raise InputError(path, "", f"declares {prop.n_x} inputs X_i, the model has {dim}")
    if any(c.inputs != prop.cases[0].inputs for c in prop.cases[1:]):  # no hashing: 3,072 inputs
        raise InputError(
            path,
            "",
            f"its {len(prop.cases)} cases have different input sets: "
            "no one domain (split the file, one input set each)",
        )
    box = prop.boxes[0] if prop.boxes else None
    return box if box is not None else prop.cases[0].inputs


def model_domain(model: Model, path: str | None) -> Domain | None:
    """The domain of a command about ``model``: the domain file ``path`` if given (of the
    model's input dimension), else the model's own (None when it has none)."""
    if path:
        return load_domain(path, model.input_dim)
    return model.domain


def _domain_shape(root: Cursor):
    """(kind, fields) of a domain file's top level."""
    _header(root, (DOMAIN,))
    f = root.fields(("format", "version"), ("box", "polyhedron", "meta"))
    kinds = [k for k in ("box", "polyhedron") if k in f]
    if len(kinds) != 1:
        raise root.error('expected exactly one of "box" or "polyhedron"')
    return kinds[0], f


def read_domain(c: Cursor, dim: int | None) -> Domain:
    kind, body = c.one_of(("box", "polyhedron"))
    return _domain_body(kind, body, dim)


def _domain_body(kind: str, c: Cursor, dim: int | None) -> Domain:
    if kind == "box":
        f = c.fields(("lower", "upper"))
        lower = f["lower"].vector(dim, why="the input dimension" if dim else "")
        upper = f["upper"].vector(len(lower), why="as many as lower")
        return Box(lower, upper)
    f = c.fields(("A", "b"))
    b = f["b"].vector(None)
    A = f["A"].matrix(len(b), dim, "one per entry of b", "the input dimension")
    if dim is None:
        if not A:
            raise f["A"].error("cannot tell the dimension of a polyhedron with no constraints")
        dim = len(A[0])
    return Polyhedron(A, b, dim)


def read_maxout(root: Cursor) -> MaxoutNetwork:
    f = root.fields(*MAXOUT_KEYS)
    d = f["input_dim"].integer(1)
    width = d
    layers = []
    for index, lc in enumerate(f["layers"].items(min_length=1, what="layer")):
        why = (
            f"input_dim is {d}"
            if index == 0
            else f"layers[{index - 1}] has {plural(width, 'unit')}"
        )
        kind, body = lc.one_of(("units", "relu"))
        if kind == "units":
            units = []
            for uc in body.items(min_length=1, what="unit"):
                pieces = []
                for pc in uc.fields(("pieces",))["pieces"].items(min_length=1, what="piece"):
                    pf = pc.fields(("w", "b"))
                    pieces.append(Piece(pf["w"].weights(width, "weight", why), pf["b"].number()))
                units.append(Unit(tuple(pieces)))
        else:  # ReLU layer: max(W_i h + b_i, 0), stored as a rank-2 Maxout layer
            rf = body.fields(("W", "b"))
            b = rf["b"].vector(None)
            W = rf["W"].matrix(len(b), width, "one per entry of b", why)
            zero_piece = Piece((ZERO,) * width, ZERO)
            units = [Unit((Piece(row, c), zero_piece)) for row, c in zip(W, b)]
            if not units:
                raise rf["b"].error("expected at least 1 unit")
        layers.append(Layer(tuple(units)))
        width = len(units)
    output = _affine(f["output"], None, width) if "output" in f else None
    domain = read_domain(f["domain"], d) if "domain" in f else None
    meta = _meta(f)
    return MaxoutNetwork(d, tuple(layers), output, domain, meta)


def _affine(c: Cursor, out_dim: int | None, in_dim: int) -> Affine:
    f = c.fields(("W", "b"))
    b = f["b"].vector(out_dim)
    W = f["W"].matrix(
        len(b), in_dim, "one per entry of b", f"the last layer has {plural(in_dim, 'unit')}"
    )
    return Affine(W, b, in_dim)


def read_transformer(root: Cursor) -> Transformer:
    f = root.fields(*TRANSFORMER_KEYS)
    d = f["input_dim"].integer(1)
    dm = f["d_model"].integer(1)
    E = f["embedding"].matrix(dm, d, "d_model", "input_dim")
    positions = tuple(
        pc.vector(dm, why="d_model") for pc in f["positions"].items(min_length=1, what="position")
    )
    sublayers: list[Sublayer] = []
    for sc in f["sublayers"].items(what="sub-layer"):
        kind, body = sc.one_of(("feedforward", "attention"))
        if kind == "feedforward":
            ff = body.fields(("W1", "b1", "W2", "b2"))
            b1 = ff["b1"].vector(None)
            W1 = ff["W1"].matrix(len(b1), dm, "one per entry of b1", "d_model")
            b2 = ff["b2"].vector(dm, why="d_model")
            W2 = ff["W2"].matrix(dm, len(b1), "d_model", "one per entry of b1")
            sublayers.append(FeedForward(Affine(W1, b1, dm), Affine(W2, b2, len(b1))))
        else:
            af = body.fields(("heads",), ("kind",))
            kind_ = af["kind"].string((HARDMAX, SOFTMAX)) if "kind" in af else HARDMAX
            heads = []
            for hc in af["heads"].items(what="head"):
                hf = hc.fields(("query", "key", "value", "out"), ("scale",))
                key = hf["key"].matrix(None, dm, "", "d_model")
                query = hf["query"].matrix(len(key), dm, "as many as key", "d_model")
                value = hf["value"].matrix(None, dm, "", "d_model")
                out = hf["out"].matrix(
                    dm, len(value), "d_model", "one per row of value", sparse_rows=True
                )
                scale = hf["scale"].number() if "scale" in hf else Q(1)
                if not scale > 0:
                    raise hf["scale"].error(f"expected a positive scale, got {scale}")
                heads.append(Head(query, key, value, out, scale))
            sublayers.append(Attention(tuple(heads), kind_))
    rf = f["readout"].fields(("W", "b"), ("token",))
    token: int | None = 0
    if "token" in rf:
        if rf["token"].value == "mean":
            token = None
        else:
            token = rf["token"].integer(0, f'a token index below {len(positions)} or "mean"')
            if token >= len(positions):
                raise rf["token"].error(
                    f'expected a token index below {len(positions)} or "mean", got {token}'
                )
    b = rf["b"].vector(None)
    readout = Readout(
        Affine(rf["W"].matrix(len(b), dm, "one per entry of b", "d_model"), b, dm), token
    )
    domain = read_domain(f["domain"], d) if "domain" in f else None
    meta = _meta(f)
    return Transformer(d, dm, E, positions, tuple(sublayers), readout, domain, meta)


def _meta(f: dict):
    if "meta" not in f:
        return None
    try:
        with collection_paused():
            return plain(f["meta"])
    except RecursionError:
        raise f["meta"].error("nested too deeply") from None


# --------------------------------------------------------------------------------- writing


def _vec(v) -> list[str]:
    return [q_str(x) for x in v]


def _weights(w) -> object:
    """A dense list, or the sparse form when at most a quarter of the entries are non-zero."""
    if len(w) >= 16 and 4 * _nnz(w) <= len(w):
        return {"size": len(w), "entries": [[j, q_str(v)] for j, v in nonzero(w)]}
    return _vec(w)


def _nnz(row) -> int:
    return len(row.values) if isinstance(row, SparseVector) else len(row) - row.count(ZERO)


def _matrix(M, ncols: int) -> object:
    """Dense rows, or the sparse form when at most a quarter of the entries are non-zero."""
    given = list(nonzero(M)) if isinstance(M, SparseVector) else list(enumerate(M))
    counts: dict[int, int] = {}  # by the row object: rows shared by many heads, once
    nnz = [
        counts[id(r)] if id(r) in counts else counts.setdefault(id(r), _nnz(r)) for _, r in given
    ]
    if len(M) * ncols >= 16 and 4 * sum(nnz) <= len(M) * ncols:
        return {
            "shape": [len(M), ncols],
            "entries": [
                [i, j, q_str(v)] for (i, row), n in zip(given, nnz) if n for j, v in nonzero(row)
            ],
        }
    return [_vec(row) for row in M]


def domain_to_json(dom: Domain) -> dict:
    if isinstance(dom, Box):
        return {"box": {"lower": _vec(dom.lower), "upper": _vec(dom.upper)}}
    return {"polyhedron": {"A": [_vec(r) for r in dom.A], "b": _vec(dom.b)}}


def model_to_json(model: Model) -> dict:
    """The JSON object of a model; ``read`` of it gives back an equal model."""
    if isinstance(model, MaxoutNetwork):
        obj = {
            "format": MAXOUT,
            "version": VERSION,
            "input_dim": model.input_dim,
            "layers": [
                {
                    "units": [
                        {"pieces": [{"w": _weights(p.w), "b": q_str(p.b)} for p in u.pieces]}
                        for u in l.units
                    ]
                }
                for l in model.layers
            ],
        }
        if model.output is not None:
            obj["output"] = {
                "W": _matrix(model.output.W, model.output.in_dim),
                "b": _vec(model.output.b),
            }
    else:
        dm = model.d_model
        subs = []
        for s in model.sublayers:
            if isinstance(s, FeedForward):
                subs.append(
                    {
                        "feedforward": {
                            "W1": _matrix(s.inner.W, dm),
                            "b1": _vec(s.inner.b),
                            "W2": _matrix(s.outer.W, s.outer.in_dim),
                            "b2": _vec(s.outer.b),
                        }
                    }
                )
            else:
                subs.append(
                    {
                        "attention": {
                            "kind": s.kind,
                            "heads": [
                                {
                                    "query": _matrix(h.query, dm),
                                    "key": _matrix(h.key, dm),
                                    "value": _matrix(h.value, dm),
                                    "out": _matrix(h.out, len(h.value)),
                                    "scale": q_str(h.scale),
                                }
                                for h in s.heads
                            ],
                        }
                    }
                )
        r = model.readout
        obj = {
            "format": TRANSFORMER,
            "version": VERSION,
            "input_dim": model.input_dim,
            "d_model": dm,
            "embedding": _matrix(model.embedding, model.input_dim),
            "positions": [_vec(p) for p in model.positions],
            "sublayers": subs,
            "readout": {
                "token": "mean" if r.token is None else r.token,
                "W": _matrix(r.map.W, dm),
                "b": _vec(r.map.b),
            },
        }
    if model.domain is not None:
        obj["domain"] = domain_to_json(model.domain)
    if model.meta is not None:
        obj["meta"] = model.meta
    return obj


GZIP_LEVEL = 1
"""zlib's level for ``.gz`` outputs: certificates are large and written on every answer; level 1
compresses ACAS Xu 4-9 property 1's (171 MB of JSON) in 1.0 s instead of 5.7 s at gzip's default
9, into a file 22% larger (64 MB instead of 53 MB)."""


_ONE_LINE = json.JSONEncoder(separators=(", ", ": ")).encode  # Python's C encoder


def _depth(v) -> int:
    """How deep containers nest in v, judged by a list's first item (a layout guess only)."""
    if isinstance(v, dict):
        return 1 + max(map(_depth, v.values()), default=0)
    if isinstance(v, list):
        return 1 + (_depth(v[0]) if v else 0)
    return 0


def json_text(obj: object, leaf: int = 4) -> str:
    """The JSON text of ``obj``, one item per line down to the containers at most ``leaf``
    deep (a piece, a vector, a matrix, a head), each written on one line by Python's C encoder:
    readable, and fast for a model of millions of weights (indenting every number took most of
    the import of a CIFAR network).  The layout only: any ``obj`` gives its JSON."""
    out: list[str] = []

    def put(v, pad: str) -> None:
        if not isinstance(v, (dict, list)) or not v or _depth(v) <= leaf:
            out.append(_ONE_LINE(v))
            return
        inner = pad + " "
        items = v.items() if isinstance(v, dict) else ((None, x) for x in v)
        out.append("{\n" if isinstance(v, dict) else "[\n")
        for n, (k, x) in enumerate(items):
            out.append((",\n" if n else "") + inner)
            if k is not None:
                out.append(_ONE_LINE(k) + ": ")
            put(x, inner)
        out.append("\n" + pad + ("}" if isinstance(v, dict) else "]"))

    put(obj, "")
    return "".join(out)


def write_json_atomic(path: str, obj: object, compact: bool = False) -> None:
    """Write JSON to ``path`` all at once (see ``write_bytes_atomic``).  ``.gz`` paths are
    gzip-compressed.  ``compact`` (for certificates, which can be large): on one line, a third
    of the size; else laid out by ``json_text``."""
    text = json.dumps(obj, separators=(",", ":")) if compact else json_text(obj)
    data = (text + "\n").encode()
    if path.endswith(".gz"):
        import gzip

        data = gzip.compress(data, GZIP_LEVEL, mtime=0)
    write_bytes_atomic(path, data)


def check_outputs(outputs, inputs=()) -> None:
    """Before any work: every output path ((option, path) pairs; None paths skipped) can be
    written (``check_writable``), names none of the inputs ((what, path) pairs) after
    resolving links, and no two outputs name the same file."""
    seen: list[tuple[str, str]] = []
    for option, path in outputs:
        if path is None:
            continue
        check_writable(path)
        for what, other in list(inputs) + seen:
            if other is not None and same_file(path, other):
                raise InputError(
                    path,
                    "",
                    f"{option} names the same file as {what} "
                    f"({other}); writing it would overwrite that: give another "
                    "file",
                )
        seen.append((option, path))


def same_file(a: str, b: str) -> bool:
    """a and b name the same file (after links), or the same place if either is missing."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_writable(path: str | None) -> None:
    """Refuse, before any work, an output path that cannot be written: a directory, a
    missing or read-only folder, a read-only file (None: no output asked for)."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InputError(path, "", "is a directory; give a file name to write")
    if not os.path.isdir(folder):
        raise InputError(path, "", f"cannot write here: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (
        os.path.exists(path) and not os.access(path, os.W_OK)
    ):
        raise InputError(path, "", "cannot write here: permission denied")


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` all at once: a temporary file in the same folder, then a
    rename, so a failure (a full disk included) never leaves a half-written file; an
    input/output failure is an InputError naming the path."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InputError(path, "", "is a directory; give a file name to write")
    with phase(f"writing {path}"):
        _write_new(path, folder, data)


def _write_new(path: str, folder: str, data: bytes) -> None:
    # the name is made here, not by mkstemp, so that a supervisor ending the process is told
    # of the file (``temporary``) before it exists and removes it
    for _ in range(100):
        tmp = os.path.join(folder, ".exactmax-" + secrets.token_hex(6))
        with temporary(tmp):
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            except OSError as e:
                raise InputError(path, "", f"cannot write here: {e.strerror or e}") from None
            return _fill(path, tmp, fd, data)
    raise InputError(path, "", "cannot write here: no free temporary name")


def _fill(path: str, tmp: str, fd: int, data: bytes) -> None:
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # made 0600; give the usual mode
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise InputError(path, "", f"cannot write: {e.strerror or e}") from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
