"""Draw the cells and linear regions of a 2-D region count (matplotlib, optional).

Each cell's closure is an exact polygon (``geometry.polygon``), filled with the colour of its
linear region (20 colours, cycled) and outlined thinly in white.  Coordinates are converted to
floats for drawing only.
"""

from __future__ import annotations

from ..kernel.polyhedron import Box
from .geometry import polygon

PIP_HINT = "pip install matplotlib (or pip install 'exactmax[plot]')"


def plot_problem(path: str) -> str | None:
    """Why ``path`` cannot take a plot (no matplotlib, an unknown suffix, no such directory),
    or None: checked before the count so that a long run does not end in an error."""
    import os

    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError:
        return f"needs matplotlib, which is not installed: {PIP_HINT}"
    kinds = Figure().canvas.get_supported_filetypes()
    suffix = os.path.splitext(path)[1].lstrip(".").lower()
    if suffix not in kinds:
        return (
            f"{path}: the file name must end in one of "
            + ", ".join("." + k for k in sorted(kinds))
            + (f", not .{suffix}" if suffix else "; it has no suffix")
        )
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        return f"{path}: the directory {folder} does not exist or is not writable"
    return None


def plot_regions(count, box: Box, path: str, title: str = "") -> None:
    """Write a picture of ``count`` (a 2-D RegionCount) to ``path`` (format from the suffix)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Polygon as Patch
    except ImportError:
        raise ImportError(f"--plot needs matplotlib, which is not installed: {PIP_HINT}") from None
    cmap = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(6, 6))
    for cell, region in zip(count.cells, count.region_of):
        pts = [(float(x), float(y)) for x, y in polygon(cell.rows, box)]
        if len(pts) >= 3:
            ax.add_patch(
                Patch(
                    pts, closed=True, facecolor=cmap(region % 20), edgecolor="white", linewidth=0.3
                )
            )
    ax.set_xlim(float(box.lower[0]), float(box.upper[0]))
    ax.set_ylim(float(box.lower[1]), float(box.upper[1]))
    ax.set_aspect("equal")
    ax.set_xlabel("x0")
    ax.set_ylabel("x1")
    ax.set_title(
        title
        or f"{count.linear_regions} linear regions, {count.activation_regions} activation regions"
    )
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
