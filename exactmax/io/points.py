"""Files of input points: one point per line, exact numbers separated by commas (the syntax of
``--input``), blank lines and ``#`` comments skipped."""

from __future__ import annotations

from .errors import InputError
from .jsonfile import read_text_file
from .numbers import NumberSyntaxError, parse_rational


def read_points(path: str, dim: int) -> tuple[list[tuple], list[int]]:
    """(points, line numbers) of a points file whose points all have ``dim`` coordinates."""
    points, lines = [], []
    for number, line in enumerate(read_text_file(path, "a text file of points").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        items = [t.strip() for t in text.split(",")]
        if len(items) != dim:
            raise InputError(
                path,
                f"line {number}",
                f"expected {dim} comma-separated numbers "
                f"(the model's input dimension), got {len(items)}",
            )
        point = []
        for i, t in enumerate(items):
            try:
                point.append(parse_rational(t))
            except NumberSyntaxError as e:
                raise InputError(path, f"line {number}: item {i}", str(e)) from None
        points.append(tuple(point))
        lines.append(number)
    if not points:
        raise InputError(
            path,
            "",
            "no points (one point per line: exact numbers separated by commas, e.g. 1/2,-3,0.25)",
        )
    return points, lines
