"""Message sizes that vary (--size-mix): drawn by weight, uniform over a range, or read from a
file.

    256:0.8,4k:0.15,64k:0.05     by weight (weights need not sum to 1)
    100..10k                     uniform between 100 bytes and 10 KiB
    @sizes.txt                   a size a line (as -ms takes them), sent in the file's order

Each thread deals its sizes in turn from a deck drawn once from its own seeded stream (the
same in every run), so that a message's size costs nothing to choose; every message's own
size is what its bytes count.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput
from harness.textfiles import read_text
from harness.units import parse_range, parse_size, parse_weighted

# Sizes drawn for each thread's deck: enough that the drawn mix is close to the weights.
DECK = 200
# Sizes a file may give (one deck, dealt in turn).
MOST_FROM_FILE = 100_000


@dataclass(frozen=True)
class Sizes:
    kind: str  # mix, range or file
    values: tuple[int, ...]
    weights: tuple[float, ...] = ()

    @property
    def largest(self) -> int:
        return max(self.values)

    def deck(self, seed: str) -> list[int]:
        """The sizes a thread deals in turn."""
        draw = random.Random(seed)
        if self.kind == "mix":
            return draw.choices(self.values, self.weights, k=DECK)
        if self.kind == "range":
            low, high = self.values
            return [draw.randint(low, high) for _ in range(DECK)]
        return list(self.values)


def parse_sizes(text: str) -> Sizes:
    """Sizes from their text (this module's grammar); ValueError saying what is wrong."""
    text = text.strip()
    if text.startswith("@"):
        return _from_file(Path(text[1:]))
    if ".." in text:
        return Sizes("range", parse_range(text, parse_size))
    return Sizes("mix", *parse_weighted(text, parse_size, "SIZE"))


def _from_file(path: Path) -> Sizes:
    try:
        lines = read_text(path).splitlines()
    except BadInput as exc:
        raise ValueError(f"cannot read sizes from {exc.where}: {exc.problem}") from None
    values = []
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            values.append(parse_size(line))
        except ValueError as exc:
            raise ValueError(f"{path}, line {number}: {exc}") from None
    if not values:
        raise ValueError(f"{path} gives no sizes")
    if len(values) > MOST_FROM_FILE:
        raise ValueError(f"{path} gives {len(values):,} sizes; at most {MOST_FROM_FILE:,}")
    return Sizes("file", tuple(values))
