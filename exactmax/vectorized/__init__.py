"""Fast exact evaluation of single inputs and batches: integer matrices in fixed-width words
(``fixedwidth.py`` on the C extension ``_fixedwidth``) for single inputs and small batches,
integer arrays in radix 2^21 on numpy (``integers.py``) for large batches, and the Maxout and
hardmax Transformer evaluators built on each.

Untrusted, like every producer: the kernel's definitional evaluators (``kernel/maxout.py``,
``kernel/transformer.py``) are the reference, nothing that says "proved" or "refuted" depends
on this package, and the tests compare them on random networks with ties.  The integer-scaled
evaluators of ``scaled.py`` are the base the others are built on and the fallback.
:func:`batch_evaluator` picks, per call, whichever is fastest for the batch.
"""

from __future__ import annotations

from ..kernel.affine import SparseVector
from ..kernel.maxout import MaxoutNetwork, check_maxout_shapes, evaluate_maxout
from .scaled import MaxoutEvaluator, TransformerEvaluator

MAXOUT_FIXED_UNTIL = 200_000
TRANSFORMER_FIXED_UNTIL = 1_200_000
"""Batches whose integer multiply-adds (inputs times ``macs`` per input) stay below these are
evaluated on fixed-width words, larger ones vectorized.  Measured on the benchmark networks:
the vectorized Maxout evaluator overtakes the fixed-width one from about 12 inputs at
(16, 32, 4, 4) (13,983 multiply-adds each) and 3 at (64, 64, 4, 6) (93,859), not before 256
at (4, 8, 3, 3) (522); on their compiled Transformers (66,652 and 407,304 multiply-adds) from
about 18 and 4 inputs, at (4, 8, 3, 3) (2,832) not before 256."""

MAXOUT_FROM = 4000
TRANSFORMER_FROM = 10000
"""Batches whose work (inputs times pre-activations, or times token rows, per input) reaches
these go to the vectorized evaluator, below them to the integer-scaled one, when the fixed-width
evaluator is not there (no C compiler at install time) or a number outgrows its words.
Measured on the benchmark networks: the vectorized Maxout evaluator wins from 28 inputs at
(4, 8, 3, 3), 6 at (16, 32, 4, 4) and 4 at (64, 64, 4, 6); the Transformer one from 6, 1 and
1 of their compiled Transformers."""


CHUNK_WORK = 20_000_000
"""Large batches are evaluated in chunks of this much work (inputs times work per input), which
keeps the digit arrays at tens of megabytes however long the batch is."""


def mostly_sparse(net: MaxoutNetwork) -> bool:
    """At most a quarter of the network's piece weights are non-zero (a convolutional
    network: each piece reads a window), counted on the stored sparse vectors."""
    stored = nnz = 0
    for layer in net.layers:
        for unit in layer.units:
            for p in unit.pieces:
                stored += len(p.w)
                nnz += len(p.w.values) if isinstance(p.w, SparseVector) else len(p.w)
    return 4 * nnz <= stored


class SparseMaxoutEvaluator:
    """Exact evaluation in work proportional to the non-zero weights: the kernel's
    definitional evaluator, whose inner products read a sparse vector's entries only (the
    dense integer evaluators would multiply every zero of a convolution's pieces)."""

    __slots__ = ("net",)

    def __init__(self, net: MaxoutNetwork):
        check_maxout_shapes(net)
        self.net = net

    def evaluate(self, x):
        return evaluate_maxout(self.net, x)

    def evaluate_batch(self, xs) -> list:
        return [evaluate_maxout(self.net, x) for x in xs]


class BatchEvaluator:
    """Exact evaluation of one Maxout network or hardmax Transformer, prepared once: single
    inputs and small batches on fixed-width words, large batches vectorized; the
    integer-scaled evaluator when the fixed-width one is missing or overflows and the batch
    is small."""

    __slots__ = ("scaled", "fixed", "fixed_until", "vectorized", "work", "threshold")

    def __init__(self, model):
        from .fixedwidth import AVAILABLE, FixedWidthMaxoutEvaluator, FixedWidthTransformerEvaluator
        from .maxout import VectorizedMaxoutEvaluator
        from .transformer import VectorizedTransformerEvaluator, supports

        self.scaled: MaxoutEvaluator | TransformerEvaluator | SparseMaxoutEvaluator
        self.vectorized: VectorizedMaxoutEvaluator | VectorizedTransformerEvaluator | None
        self.fixed: FixedWidthMaxoutEvaluator | FixedWidthTransformerEvaluator | None = None
        if isinstance(model, MaxoutNetwork) and mostly_sparse(model):
            self.scaled, self.vectorized = SparseMaxoutEvaluator(model), None
            self.fixed_until, self.work, self.threshold = 0, 0, 0
        elif isinstance(model, MaxoutNetwork):
            self.scaled = MaxoutEvaluator(model)
            if AVAILABLE:
                try:
                    self.fixed = FixedWidthMaxoutEvaluator(model)
                except OverflowError:  # a scaled weight beyond 64 bits
                    pass
            self.vectorized = VectorizedMaxoutEvaluator(model)
            self.fixed_until = MAXOUT_FIXED_UNTIL
            self.work = sum(l.rank * l.width for l in model.layers)
            self.threshold = MAXOUT_FROM
        else:
            self.scaled = TransformerEvaluator(model)
            if AVAILABLE:
                try:
                    self.fixed = FixedWidthTransformerEvaluator(model)
                except OverflowError:
                    pass
            self.fixed_until = TRANSFORMER_FIXED_UNTIL
            self.vectorized = VectorizedTransformerEvaluator(model) if supports(model) else None
            self.work = model.n_tokens * sum(
                len(s.inner.b) + model.d_model
                if hasattr(s, "inner")
                else sum(len(h.key) + len(h.value) for h in s.heads) + model.d_model
                for s in model.sublayers
            )
            self.threshold = TRANSFORMER_FROM

    def evaluate(self, x):
        """The exact output at the rational point x."""
        return self.evaluate_batch([x])[0]

    def evaluate_batch(self, xs) -> list:
        """[f(x) for x in xs], exactly."""
        xs = list(xs)
        if self.fixed is not None and (
            self.vectorized is None or len(xs) * self.fixed.macs < self.fixed_until
        ):
            try:
                return self.fixed.evaluate_batch(xs)
            except OverflowError:  # numbers beyond the word limit: FLINT/numpy have none
                pass
        if self.vectorized is None or len(xs) * self.work < self.threshold:
            return self.scaled.evaluate_batch(xs)
        size = max(1, CHUNK_WORK // max(1, self.work))
        out = []
        for start in range(0, len(xs), size):
            out += self.vectorized.evaluate_batch(xs[start : start + size])
        return out


def batch_evaluator(model) -> BatchEvaluator:
    """The evaluator of a Maxout network or a hardmax Transformer for batches."""
    return BatchEvaluator(model)
