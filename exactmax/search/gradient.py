"""Projected gradient ascent on a property's margin, in floats: it proposes points, nothing more.

For a case with forbidden conjunctions O_j = {r_j1 >= 0, ..., r_jm >= 0} over (x, f(x)) and
input set P = {x : A x <= b} inside its box B, the margin of x is

    mu(x) = min( max_j min_i r_ji(x, f(x)),  min_k (b_k - A_k x) ),

and x is a counterexample exactly when mu(x) >= 0 (> 0 on a strict row).  mu is piecewise
linear; a (sub)gradient at x is that of the term that attains it, through the pieces of f
that are active at x.  (For "the label is not the largest output", the max over conjunctions
is the margin loss of adversarial attacks: one run covers every other label.)  Signed steps
x <- clip_B(x + s_t sign(grad mu)) with a shrinking step s_t, from many random starts at
once, climb it: the L-infinity projected gradient method of adversarial attacks (Madry et
al. 2018), here on the property's own margin.

Plateaus.  Where a ReLU is inactive (a unit whose other piece is constant), f does not depend
on the unit's argument, and on much of an ACAS Xu box every unit of some layer is inactive: f is
constant there and its gradient is 0.  The pull-back therefore leaks: every piece that is not
the active one receives ``leak`` times its weight (for a ReLU: slope ``leak`` where it is
inactive, as a leaky ReLU has).  No single leak suits every network, so ``attack`` cycles
through ``LEAKS``, one run per leak and case.

Floats only guide: every point proposed here is re-checked in exact arithmetic by the caller
(``engine.casetree.violation``, the kernel's evaluator) before it is called a counterexample.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..kernel.maxout import MaxoutNetwork

LEAKS = (0.0, 0.1, 0.01, 0.03, 0.3)  # one run each, in this order
CYCLES = 2  # times through LEAKS
STARTS = 500  # random starts per run
STEPS = 100  # signed steps per run at most
FIRST_STEP = 0.1  # of the box's width; then times DECAY per step
DECAY = 0.95


class FloatNetwork:
    """The Maxout network in float64, with the pieces each point activates (for the
    search only).  A unit of rank k stores k pieces; a unit with fewer repeats its last."""

    def __init__(self, net: MaxoutNetwork):
        self.layers = []
        for layer in net.layers:
            k = layer.rank
            W = np.array(
                [
                    [[float(v) for v in u.pieces[min(j, len(u.pieces) - 1)].w] for j in range(k)]
                    for u in layer.units
                ]
            )
            b = np.array(
                [
                    [float(u.pieces[min(j, len(u.pieces) - 1)].b) for j in range(k)]
                    for u in layer.units
                ]
            )
            # (units * k, inputs): one matrix product per layer
            self.layers.append((W.reshape(-1, W.shape[2]), b.reshape(-1), W.shape[0], k))
        o = net.output
        self.out = (
            None
            if o is None
            else (np.array([[float(v) for v in r] for r in o.W]), np.array([float(v) for v in o.b]))
        )

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return self.forward(X)[0]

    def forward(self, X: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """f(X) for the rows of X, and per layer the index of the active piece of each unit
        (the first maximiser)."""
        h, active = X, []
        for W, b, units, k in self.layers:
            z = (h @ W.T + b).reshape(len(h), units, k)
            a = z.argmax(axis=2)
            active.append(a)
            h = np.take_along_axis(z, a[:, :, None], 2)[:, :, 0]
        if self.out is not None:
            h = h @ self.out[0].T + self.out[1]
        return h, active

    def pullback(self, G: np.ndarray, active: list[np.ndarray], leak: float) -> np.ndarray:
        """Row n of the result is G[n] J_n, J_n the Jacobian of f at the n-th point through
        its active pieces; with leak > 0 every inactive piece adds leak times its own."""
        g = G if self.out is None else G @ self.out[0]
        for (W, _, units, k), a in zip(reversed(self.layers), reversed(active)):
            share = np.where(np.arange(k)[None, None, :] == a[:, :, None], 1.0, leak)
            g = (g[:, :, None] * share).reshape(len(g), units * k) @ W
        return g


@dataclass(frozen=True)
class Target:
    """One case of a property, in floats: its forbidden conjunctions, each as rows
    R_j (x, y) + r_j >= 0 over inputs and outputs; its input rows b - A x >= 0; its box."""

    R: tuple[np.ndarray, ...]
    r: tuple[np.ndarray, ...]
    A: np.ndarray
    b: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def margins(t: Target, X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The margin of a case at each row of X (outputs Y):

        mu(x) = min( max_j min_i r_ji(x, f(x)),  min_k (b_k - A_k x) ),

    the best conjunction's least row, or the least input row if that is smaller; and for each
    point the row of (x, y) whose gradient is mu's (an input row as (-A_k, 0))."""
    Z = np.hstack([X, Y])
    best = np.full(len(X), -np.inf)
    grad = np.zeros_like(Z)
    for R, r in zip(t.R, t.r):
        M = Z @ R.T + r
        i = M.argmin(axis=1)
        m = M[np.arange(len(X)), i]
        better = m > best
        best = np.where(better, m, best)
        grad[better] = R[i[better]]
    if len(t.A):
        M = t.b - X @ t.A.T
        k = M.argmin(axis=1)
        m = M[np.arange(len(X)), k]
        lower = m < best
        best = np.where(lower, m, best)
        grad[lower] = 0.0
        grad[lower, : X.shape[1]] = -t.A[k[lower]]
    return best, grad


def ascend(
    fnet: FloatNetwork,
    t: Target,
    rng: np.random.Generator,
    leak: float,
    deadline: float,
    starts: int = STARTS,
    steps: int = STEPS,
) -> Iterator[np.ndarray]:
    """One run of projected gradient ascent on the case's margin from ``starts`` uniform
    points of the box; yields, after each step, the point of largest margin when that margin
    is >= 0 (the caller checks it exactly and stops the generator when it is one).  Ends
    after ``steps`` steps or at the deadline.  (No early stop on a stalled margin: with leak
    0 most points sit on a plateau while the few that move are the ones that find the
    counterexample.)"""
    d = len(t.lo)
    width = t.hi - t.lo
    X = t.lo + rng.random((starts, d)) * width
    for s in range(steps):
        if time.monotonic() > deadline:
            return
        Y, active = fnet.forward(X)
        m, G = margins(t, X, Y)
        i = int(np.argmax(m))
        if m[i] >= 0:
            yield X[i].copy()
        grad = G[:, :d] + fnet.pullback(G[:, d:], active, leak)
        X = np.clip(X + width * (FIRST_STEP * DECAY**s) * np.sign(grad), t.lo, t.hi)


def attack(
    fnet: FloatNetwork,
    targets: list[Target],
    deadline: float,
    seed: int = 0,
    stats: dict | None = None,
    runs: range | None = None,
) -> Iterator[tuple[int, np.ndarray]]:
    """(target index, point) proposals: for each leak of LEAKS in turn (CYCLES times), one run
    of ``ascend`` on every target, each from new random starts; only the runs numbered in
    ``runs`` (default all).  Run r draws its starts from a generator seeded by (seed, r), so
    runs 0-1 then 2-9 propose what runs 0-9 do.  ``stats["gradient_runs"]`` counts the runs."""
    schedule = LEAKS * CYCLES
    for r in runs if runs is not None else range(len(schedule)):
        if r >= len(schedule):
            return
        rng = np.random.default_rng((seed, r))
        for n, t in enumerate(targets):
            if time.monotonic() > deadline:
                return
            if stats is not None:
                stats["gradient_runs"] = stats.get("gradient_runs", 0) + 1
            for x in ascend(fnet, t, rng, schedule[r], deadline):
                yield n, x
