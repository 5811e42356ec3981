"""Fast exact evaluation of batches: integer arrays in radix 2^21 on numpy (``integers.py``)
and the Maxout and hardmax Transformer evaluators built on them.

Untrusted, like every producer: the kernel's evaluators (``kernel/maxout.py``,
``kernel/transformer.py``) are the reference, nothing that says "proved" or "refuted" depends
on this package, and the tests compare the two on random networks with ties.
:func:`batch_evaluator` picks, per call, whichever of the two is faster for the batch.
"""

from __future__ import annotations

from ..kernel.maxout import MaxoutEvaluator, MaxoutNetwork
from ..kernel.transformer import TransformerEvaluator

MAXOUT_FROM = 4000
TRANSFORMER_FROM = 10000
"""Batches whose work (inputs times pre-activations, or times token rows, per input) reaches
these go to the vectorized evaluator; below them the kernel's is faster.  Measured on the
benchmark networks: the vectorized Maxout evaluator wins from 28 inputs at (4, 8, 3, 3), 6 at
(16, 32, 4, 4) and 4 at (64, 64, 4, 6); the Transformer one from 6, 1 and 1 of their
compiled Transformers."""


CHUNK_WORK = 20_000_000
"""Large batches are evaluated in chunks of this much work (inputs times work per input), which
keeps the digit arrays at tens of megabytes however long the batch is."""


class BatchEvaluator:
    """Exact evaluation of one Maxout network or hardmax Transformer, prepared once: single
    inputs and small batches by the kernel's evaluator, large batches vectorized."""

    __slots__ = ("kernel", "vectorized", "work", "threshold")

    def __init__(self, model):
        from .maxout import VectorizedMaxoutEvaluator
        from .transformer import VectorizedTransformerEvaluator, supports
        if isinstance(model, MaxoutNetwork):
            self.kernel = MaxoutEvaluator(model)
            self.vectorized = VectorizedMaxoutEvaluator(model)
            self.work = sum(l.rank * l.width for l in model.layers)
            self.threshold = MAXOUT_FROM
        else:
            self.kernel = TransformerEvaluator(model)
            self.vectorized = VectorizedTransformerEvaluator(model) if supports(model) else None
            self.work = model.n_tokens * sum(
                len(s.inner.b) + model.d_model if hasattr(s, "inner")
                else sum(len(h.key) + len(h.value) for h in s.heads) + model.d_model
                for s in model.sublayers)
            self.threshold = TRANSFORMER_FROM

    def evaluate(self, x):
        """The exact output at the rational point x."""
        return self.evaluate_batch([x])[0]

    def evaluate_batch(self, xs) -> list:
        """[f(x) for x in xs], exactly."""
        xs = list(xs)
        if self.vectorized is None or len(xs) * self.work < self.threshold:
            return self.kernel.evaluate_batch(xs)
        size = max(1, CHUNK_WORK // max(1, self.work))
        out = []
        for start in range(0, len(xs), size):
            out += self.vectorized.evaluate_batch(xs[start:start + size])
        return out


def batch_evaluator(model) -> BatchEvaluator:
    """The evaluator of a Maxout network or a hardmax Transformer for batches."""
    return BatchEvaluator(model)
