"""Parameter counts of Maxout networks and Transformers (total and non-zero), per layer."""

from __future__ import annotations

from ..kernel.affine import SparseVector
from ..kernel.maxout import MaxoutNetwork
from ..kernel.rational import ZERO
from ..kernel.transformer import FeedForward, Transformer


def parameter_count(net: MaxoutNetwork) -> int:
    """sum_l sum_i k_{l,i} (N_{l-1} + 1) + m (N_D + 1) (the output counts when present)."""
    n = sum(
        len(u.pieces) * (prev + 1)
        for prev, layer in zip(net.widths, net.layers)
        for u in layer.units
    )
    if net.output is not None:
        n += net.output.out_dim * (net.output.in_dim + 1)
    return n


def _count(*matrices) -> tuple[int, int]:
    """(entries, non-zero entries) of matrices given as tuples of rows or flat vectors."""
    total = nonzero = 0
    for M in matrices:
        if isinstance(M, SparseVector) and isinstance(M.zero, tuple):  # rows, most of them 0
            total += (len(M) - len(M.values)) * len(M.zero)
            M = M.values
        for row in M:
            if isinstance(row, SparseVector):
                total += len(row)
                nonzero += len(row.values)
            elif isinstance(row, tuple):
                total += len(row)
                nonzero += len(row) - row.count(ZERO)  # identity first: fast on shared 0
            else:
                total += 1
                nonzero += 1 if row else 0
    return total, nonzero


def sublayer_counts(tf: Transformer) -> list[tuple[int, int]]:
    """(parameters, non-zero parameters) of each sub-layer (a head's scale counts as one)."""
    out = []
    for s in tf.sublayers:
        if isinstance(s, FeedForward):
            out.append(_count(s.inner.W, s.inner.b, s.outer.W, s.outer.b))
        else:
            t = nz = 0
            for h in s.heads:
                a, b = _count(h.query, h.key, h.value, h.out, (h.scale,))
                t, nz = t + a, nz + b
            out.append((t, nz))
    return out


def transformer_counts(tf: Transformer) -> dict:
    """Totals: embedding, positions, sub-layers and read-out together."""
    parts = [
        _count(tf.embedding),
        _count(tf.positions),
        _count(tf.readout.map.W, tf.readout.map.b),
    ] + sublayer_counts(tf)
    return {"params": sum(p[0] for p in parts), "nonzero": sum(p[1] for p in parts)}


def maxout_layer_counts(net: MaxoutNetwork) -> list[int]:
    """sum_i k_{l,i} (N_{l-1} + 1) for each layer l."""
    return [
        sum(len(u.pieces) * (prev + 1) for u in layer.units)
        for prev, layer in zip(net.widths, net.layers)
    ]


def size_report(net: MaxoutNetwork, tf: Transformer, merged: bool) -> dict:
    """Per Maxout layer and in total: Maxout vs Transformer parameters (total, non-zero)."""
    subs = sublayer_counts(tf)
    D = len(net.layers)
    if merged:  # [FF1_0, A_0, F_01, A_1, F_12, ..., A_{D-1}, FF2_{D-1}]
        owners = [[0, 1, 2]] + [[2 * l + 1, 2 * l + 2] for l in range(1, D)]
    else:
        owners = [[3 * l, 3 * l + 1, 3 * l + 2] for l in range(D)]
    layers = []
    for l, (mp, idx) in enumerate(zip(maxout_layer_counts(net), owners)):
        layers.append(
            {
                "layer": l + 1,
                "width": net.layers[l].width,
                "rank": net.layers[l].rank,
                "maxout_params": mp,
                "sublayers": idx,
                "heads": net.layers[l].width,
                "transformer_params": sum(subs[i][0] for i in idx),
                "transformer_nonzero": sum(subs[i][1] for i in idx),
            }
        )
    tot = transformer_counts(tf)
    return {
        "layers": layers,
        "maxout_params": parameter_count(net),
        "transformer_params": tot["params"],
        "transformer_nonzero": tot["nonzero"],
        "ratio_params": tot["params"] / parameter_count(net),
        "ratio_nonzero": tot["nonzero"] / parameter_count(net),
        "tokens": tf.n_tokens,
        "heads": sum(l.width for l in net.layers),
        "d_model": tf.d_model,
        "sublayers": len(tf.sublayers),
    }
