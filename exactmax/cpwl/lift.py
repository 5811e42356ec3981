"""Lifting: a network that computes a lattice expression (max and min written in ReLUs, as lattice
networks are: min(a, b) = a - ReLU(a - b), max(a, b) = b + ReLU(a - b), (a + b)/2 -+ |a - b|/2,
pass-throughs ReLU(a) - ReLU(-a), trees of these) rewritten as the Maxout network of the
fewest layers that computes the same expression.  An untrusted producer: the kernel's
``check_lattice`` proves the two equal on all of Q^d.

The kernel's reading of each output (``kernel/lattice.py``) is a tree of max and min nodes
(arguments merged: no max directly under a max, no min under a min) over affine maps of x.
A node of height k (leaves 0; a node 1 + its children's largest height) becomes a unit of layer
k: a max node the unit max(children), a min node the unit max(-children), whose negation is the
node's value.  A value needed above its own layer is passed through by units of one piece (x by
d of them where a leaf is needed above layer 1).  Depth = the greatest height of an output's
tree, the least a Maxout network can have for this alternation of max and min when no
argument can be merged further; rank = the most arguments of a node."""

from __future__ import annotations

from typing import Any

from ..kernel.affine import Affine, nonzero
from ..kernel.lattice import Forms
from ..kernel.maxout import Layer, MaxoutNetwork, Piece, Unit
from ..kernel.rational import ONE, ZERO


class NotLattice(ValueError):
    """The network's outputs have no lattice reading (the reason in the message)."""


def readings(net: MaxoutNetwork) -> list:
    """The kernel's reading of each output of net (``kernel.lattice``), or NotLattice."""
    F = Forms(net.input_dim)
    out = []
    for o, t in enumerate(F.outputs(net)):
        r = F.read(t)
        if r is None:
            raise NotLattice(
                f"output {o} is not a max/min expression of affine maps that the kernel can read "
                "(a sum of maxima of mixed signs, or too many combinations)"
            )
        out.append(r)
    return out


def _height(node, memo: dict) -> int:
    if node not in memo:
        memo[node] = 0 if node[0] == "affine" else 1 + max(_height(c, memo) for c in node[1])
    return memo[node]


def lattice_network(trees: list, dim: int, meta=None) -> MaxoutNetwork:
    """The Maxout network of the fewest layers whose outputs are the lattice expressions
    ``trees`` (module docstring)."""
    h: dict = {}
    depth = max(1, *(_height(t, h) for t in trees))
    need: list[set] = [set() for _ in range(depth + 1)]
    need[depth] = set(trees)
    for k in range(depth, 0, -1):  # the values each layer must hold
        for n in need[k]:
            if n[0] == "affine" or h[n] < k:
                need[k - 1].add(n)  # passed through (x: by its coordinates)
            else:
                need[k - 1].update(n[1])
    # value(n, k): a linear combination {unit: coefficient} of layer k's units, plus a constant
    value: dict = {}

    xunits: dict = {}  # (j, k): the unit of layer k that passes x_j through

    def val(n, k) -> tuple[dict, Any]:
        if n[0] != "affine":
            return value[(n, k)]
        w = {j if k == 0 else xunits[(j, k)]: v for j, v in enumerate(n[1][:dim]) if v}
        return w, n[1][dim]

    layers: list[Layer] = []
    canon: dict = {}
    for k in range(1, depth + 1):
        units: list[Unit] = []
        width_prev = dim if k == 1 else len(layers[-1].units)
        if any(n[0] == "affine" for n in need[k]):
            for j in range(dim):  # x_j passed through
                xunits[(j, k)] = len(units)
                units.append(Unit((_piece(*val(("affine", _e(j, dim)), k - 1), width_prev),)))
        for n in sorted((n for n in need[k] if n[0] != "affine"), key=lambda n: _canon(n, canon)):
            if h[n] < k:  # passed through
                value[(n, k)] = ({len(units): ONE}, ZERO)
                units.append(Unit((_piece(*val(n, k - 1), width_prev),)))
            else:
                s = ONE if n[0] == "max" else -ONE
                value[(n, k)] = ({len(units): s}, ZERO)
                pieces = []
                for c in sorted(n[1], key=lambda n: _canon(n, canon)):
                    w, b = val(c, k - 1)
                    pieces.append(_piece({u: s * v for u, v in w.items()}, s * b, width_prev))
                units.append(Unit(tuple(pieces)))
        layers.append(Layer(tuple(units)))
    width = len(layers[-1].units)
    rows, consts = [], []
    for t in trees:
        w, b = val(t, depth)
        rows.append(tuple(w.get(u, ZERO) for u in range(width)))
        consts.append(b)
    return MaxoutNetwork(dim, tuple(layers), Affine(tuple(rows), tuple(consts), width), meta=meta)


def _canon(node, memo: dict) -> str:
    """A text of the expression that does not depend on hashing (arguments sorted): the order
    of units in the lifted network, so that the same network lifts to the same file."""
    if node not in memo:
        if node[0] == "affine":
            memo[node] = "a(" + ",".join(map(str, node[1])) + ")"
        else:
            memo[node] = node[0] + "(" + ",".join(sorted(_canon(c, memo) for c in node[1])) + ")"
    return memo[node]


def _e(j: int, dim: int) -> tuple:
    return tuple(ONE if i == j else ZERO for i in range(dim)) + (ZERO,)


def _piece(w: dict, b, width: int) -> Piece:
    return Piece(tuple(w.get(u, ZERO) for u in range(width)), b)


def lift(net: MaxoutNetwork) -> MaxoutNetwork:
    """The lifted network (module docstring); NotLattice where an output has no reading."""
    return lattice_network(readings(net), net.input_dim, meta=net.meta)


LIFT_WORK = 5_000_000
"""``worth_lifting``: the most (non-zero weights) x (input dimension + 1) it tries."""


def worth_lifting(net: MaxoutNetwork) -> bool:
    """Does ``check`` try to lift net: a layer holds a pass-through pair (units max(z, 0) and
    max(-z, 0): how lattice networks carry values in ReLUs), and the normal forms are cheap
    (non-zero weights x (d + 1) at most LIFT_WORK).  ACAS Xu's and MNIST's networks hold no
    such pair: they are not tried."""
    work = 0
    for layer in net.layers:
        work += sum(len(list(nonzero(p.w))) for u in layer.units for p in u.pieces)
    if work * (net.input_dim + 1) > LIFT_WORK:
        return False
    for layer in net.layers:
        seen = set()
        for u in layer.units:
            if len(u.pieces) != 2:
                continue
            z = [p for p in u.pieces if any(p.w) or p.b]
            if len(z) != 1:
                continue
            key = (tuple(z[0].w), z[0].b)
            if (tuple(-v for v in key[0]), -key[1]) in seen:
                return True
            seen.add(key)
    return False


def lift_checked(net: MaxoutNetwork):
    """(the lifted network, proved equal to net by the kernel, and a report), or (None, the
    reason it was not lifted)."""
    import time

    from ..kernel.errors import CheckFailed
    from ..kernel.lattice import check_lattice

    t0 = time.monotonic()
    try:
        lifted = lift(net)
        atoms = check_lattice(lifted, net)
    except (NotLattice, CheckFailed) as e:
        return None, str(e)
    return lifted, {
        "layers": [len(net.layers), len(lifted.layers)],
        "widths": [l.width for l in lifted.layers],
        "ranks": [l.rank for l in lifted.layers],
        "atoms": atoms,
        "lift_s": round(time.monotonic() - t0, 3),
    }
