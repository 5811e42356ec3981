"""The exactmax/cpwl specification format: a continuous piecewise linear function, four ways.

    {"format": "exactmax/cpwl", "version": 1, "kind": K, ...,
     "domain": {"box": ...} | {"polyhedron": ...}   (optional; kinds relu, lattice, dc),
     "meta": {...}}                                  (optional, free-form)

- ``"relu"``: ``input_dim``, ``layers`` = [{"W", "b"}, ...] (hidden ReLU layers,
  h <- max(W h + b, 0)), optional ``output`` = {"W", "b"} (affine read-out, default identity).
- ``"breakpoints"``: 1-D, ``x`` = [x_0 < x_1 < ... < x_n] (n >= 1), ``y`` = [y_0, ..., y_n];
  f is the linear interpolation, extended linearly beyond x_0 and x_n; optional ``interval``
  = [lo, hi] (default [x_0, x_n]) is the domain.
- ``"lattice"``: ``input_dim``, ``affine`` = [{"w", "b"}, ...] (the maps l_j),
  ``sets`` = [[j, ...], ...] (0-based indices, non-empty): f = max_i min_{j in S_i} l_j.
- ``"dc"``: ``input_dim``, ``plus`` and ``minus`` = lists of {"w", "b"}:
  f = max_i plus_i - max_j minus_j.

Numbers are exact (integers, decimals, "p/q") as in every exactmax file; unknown keys are
errors, each naming the file and JSON path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..io.jsonfile import Cursor, describe, plain, plural, read_json_file
from ..io.models import read_domain
from ..kernel.affine import Affine, Vector
from ..kernel.polyhedron import Box, Domain
from ..kernel.rational import Q

CPWL = "exactmax/cpwl"
VERSION = 1
KINDS = ("relu", "breakpoints", "lattice", "dc")
OTHER_FORMATS = {
    "exactmax/maxout": "a Maxout network file (what cpwl writes)",
    "exactmax/transformer": "a Transformer file",
    "exactmax/domain": "a domain file",
    "exactmax/certificate": "a certificate file",
    "exactmax/region-certificate": "a region certificate file",
}


@dataclass(frozen=True, slots=True)
class ReluSpec:
    """x -> output(relu(W_L ... relu(W_1 x + b_1) ... + b_L)); ``output`` None is the identity."""

    input_dim: int
    layers: tuple[Affine, ...]
    output: Affine | None
    domain: Domain | None
    meta: object = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class BreakpointSpec:
    """The interpolant of (x_i, y_i), x_0 < ... < x_n, linear beyond the ends; domain [lo, hi]."""

    x: Vector
    y: Vector
    domain: Box
    meta: object = field(default=None, compare=False)

    input_dim = 1

    @property
    def slopes(self) -> Vector:
        """s_i = (y_i - y_{i-1}) / (x_i - x_{i-1}), i = 1..n."""
        return tuple(
            (self.y[i] - self.y[i - 1]) / (self.x[i] - self.x[i - 1]) for i in range(1, len(self.x))
        )


@dataclass(frozen=True, slots=True)
class AffineMap:
    """The scalar affine map x -> w . x + b."""

    w: Vector
    b: Q


@dataclass(frozen=True, slots=True)
class LatticeSpec:
    """f = max_i min_{j in sets[i]} maps[j]."""

    input_dim: int
    maps: tuple[AffineMap, ...]
    sets: tuple[tuple[int, ...], ...]
    domain: Domain | None
    meta: object = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class DCSpec:
    """f = max_i plus[i] - max_j minus[j] (both max-affine, so f is a difference of convex)."""

    input_dim: int
    plus: tuple[AffineMap, ...]
    minus: tuple[AffineMap, ...]
    domain: Domain | None
    meta: object = field(default=None, compare=False)


Spec = ReluSpec | BreakpointSpec | LatticeSpec | DCSpec


def load_spec(path: str) -> Spec:
    """Read an exactmax/cpwl file; InputError (file, JSON path, expectation) if it is not one."""
    root = Cursor(path, "", read_json_file(path, _shape))
    kind, f = _shape(root)
    return _body(root, kind, f)


def _shape(root: Cursor):
    """(kind, fields) of a spec's top level: format, version, kind and keys."""
    if not isinstance(root.value, dict):
        raise root.error(f"expected a JSON object, got {describe(root.value)}")
    fmt = root.value.get("format")
    if isinstance(fmt, str) and fmt != CPWL and fmt in OTHER_FORMATS:
        raise root.child("format").error(
            f'"{fmt}" is {OTHER_FORMATS[fmt]}, not a CPWL spec; a spec has "format": "{CPWL}", '
            f'"version": {VERSION} and a "kind" ({", ".join(KINDS)})'
        )
    for key in ("format", "version", "kind"):
        if key not in root.value:
            raise root.error(
                f'missing key "{key}"' + (f' (expected "{CPWL}")' if key == "format" else "")
            )
    root.child("format").string((CPWL,))
    v = root.child("version").integer()
    if v != VERSION:
        raise root.child("version").error(
            f"{CPWL} version {v} is not supported (this exactmax reads version {VERSION})"
        )
    kind = root.child("kind").string(KINDS)
    return kind, root.fields(*_KEYS[kind])


_KEYS = {
    "relu": (("format", "version", "kind", "input_dim", "layers"), ("output", "domain", "meta")),
    "breakpoints": (("format", "version", "kind", "x", "y"), ("interval", "meta")),
    "lattice": (("format", "version", "kind", "input_dim", "affine", "sets"), ("domain", "meta")),
    "dc": (("format", "version", "kind", "input_dim", "plus", "minus"), ("domain", "meta")),
}


def _body(root: Cursor, kind: str, f: dict) -> Spec:
    if kind == "relu":
        d = f["input_dim"].integer(1)
        width, layers = d, []
        for i, lc in enumerate(f["layers"].items(what="layer")):
            why = f"input_dim is {d}" if i == 0 else f"layers[{i - 1}] has {plural(width, 'unit')}"
            layers.append(_affine(lc, width, why))
            width = layers[-1].out_dim
        out = (
            _affine(f["output"], width, "the last hidden layer's width") if "output" in f else None
        )
        return ReluSpec(d, tuple(layers), out, _domain(f, d), _meta(f))
    if kind == "breakpoints":
        xs = f["x"].vector(None, "breakpoint")
        if len(xs) < 2:
            raise f["x"].error(f"expected at least 2 breakpoints, got {len(xs)}")
        for i in range(1, len(xs)):
            if not xs[i] > xs[i - 1]:
                raise (
                    f["x"]
                    .child(i)
                    .error(
                        f"breakpoints must increase strictly: x[{i}] = {xs[i]} after "
                        f"x[{i - 1}] = {xs[i - 1]}"
                    )
                )
        ys = f["y"].vector(len(xs), "value", "one per breakpoint")
        if "interval" in f:
            lo, hi = f["interval"].vector(2, "bound", "[lo, hi]")
            if not lo < hi:
                raise f["interval"].error(f"expected lo < hi, got [{lo}, {hi}]")
        else:
            lo, hi = xs[0], xs[-1]
        return BreakpointSpec(xs, ys, Box((lo,), (hi,)), _meta(f))
    if kind == "lattice":
        d = f["input_dim"].integer(1)
        maps = _maps(f["affine"], d)
        sets = []
        for sc in f["sets"].items(min_length=1, what="set"):
            idx = []
            for jc in sc.items(min_length=1, what="index"):
                j = jc.integer(0, "an index into affine")
                if j >= len(maps):
                    raise jc.error(
                        f"expected an index below {len(maps)} (the number of affine maps), got {j}"
                    )
                if j in idx:
                    raise jc.error(f"index {j} given twice in this set")
                idx.append(j)
            sets.append(tuple(idx))
        return LatticeSpec(d, maps, tuple(sets), _domain(f, d), _meta(f))
    d = f["input_dim"].integer(1)
    return DCSpec(d, _maps(f["plus"], d), _maps(f["minus"], d), _domain(f, d), _meta(f))


def _affine(c: Cursor, width: int, why: str) -> Affine:
    f = c.fields(("W", "b"))
    b = f["b"].vector(None)
    if not b:
        raise f["b"].error("expected at least 1 unit")
    W = f["W"].matrix(len(b), width, "one per entry of b", why)
    return Affine(W, b, width)


def _maps(c: Cursor, d: int) -> tuple[AffineMap, ...]:
    out = []
    for mc in c.items(min_length=1, what="affine map"):
        f = mc.fields(("w", "b"))
        out.append(AffineMap(f["w"].vector(d, "weight", f"input_dim is {d}"), f["b"].number()))
    return tuple(out)


def _domain(f: dict, d: int) -> Domain | None:
    return read_domain(f["domain"], d) if "domain" in f else None


def _meta(f: dict):
    return plain(f["meta"]) if "meta" in f else None
