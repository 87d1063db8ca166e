"""Plots drawn in text: the nines distribution (harness.stats.nines) in braille dots, so
that a terminal cell holds 2 x 4 points, and a zero-based rate sparkline."""

from __future__ import annotations

from harness.units import format_us

# Braille dot bits by (column, row) inside a cell.
_DOTS = ((0x01, 0x02, 0x04, 0x40), (0x08, 0x10, 0x20, 0x80))


def _label(nines: int) -> str:
    return "0%" if nines == 0 else f"{100 - 10 ** (2 - nines):.{max(nines - 2, 0)}f}%"


def render(points: list[tuple[float, int]], width: int, height: int) -> list[str]:
    """Lines of text, width x height cells, y axis labels on the left, x labels below."""
    if width < 20 or height < 4:
        return []
    label_width = 8
    columns, rows = width - label_width - 1, height - 1
    if not points:
        return [" " * label_width + "|"] * rows + [" " * label_width + "+ no samples yet"]
    x_max = max(points[-1][0], 1.0)
    y_max = max(max(v for _, v in points), 1)
    dots_x, dots_y = columns * 2, rows * 4
    cells = [[0] * columns for _ in range(rows)]

    def dot(px: int, py: int) -> None:
        px = min(max(px, 0), dots_x - 1)
        py = min(max(py, 0), dots_y - 1)
        row = rows - 1 - py // 4
        cells[row][px // 2] |= _DOTS[px % 2][3 - py % 4]

    previous: tuple[float, float] | None = None
    for x, v in points:
        px, py = x / x_max * (dots_x - 1), v / y_max * (dots_y - 1)
        if previous is not None:
            # Join the points, so that a steep tail reads as a line, not scattered dots.
            steps = int(max(abs(px - previous[0]), abs(py - previous[1]))) + 1
            for s in range(1, steps + 1):
                dot(round(previous[0] + (px - previous[0]) * s / steps),
                    round(previous[1] + (py - previous[1]) * s / steps))
        else:
            dot(round(px), round(py))
        previous = (px, py)
    lines = []
    for r in range(rows):
        if r == 0:
            label = format_us(y_max)
        elif r == rows - 1:
            label = "0"
        elif r == rows // 2:
            label = format_us(y_max / 2)
        else:
            label = ""
        lines.append(f"{label:>{label_width}}|" + "".join(chr(0x2800 + c) for c in cells[r]))
    axis = [" "] * columns
    for n in range(int(x_max) + 1):
        text = _label(n)
        at = min(round(n / x_max * (columns - 1)), columns - len(text))
        if all(c == " " for c in axis[max(at - 1, 0):at + len(text)]):
            axis[at:at + len(text)] = text
    lines.append(" " * label_width + "+" + "".join(axis))
    return lines


_EIGHTHS = " ▁▂▃▄▅▆▇█"


def bars(values: list[float], width: int, height: int) -> list[str]:
    """A sparkline of the last `width` values, `height` rows tall, scaled from zero (a
    min-to-max scale would turn 3,999 against 4,001 msg/s into a cliff)."""
    values = values[-width:]
    top = max(values, default=0.0)
    if width < 1 or height < 1:
        return []
    rows = []
    for row in range(height - 1, -1, -1):
        line = []
        for value in values:
            eighths = round(value / top * height * 8) if top > 0 else 0
            line.append(_EIGHTHS[min(max(eighths - row * 8, 0), 8)])
        rows.append("".join(line))
    return rows
