"""Pages checked in a real browser: headless Chromium (Debian's package, which the suite's
set-up installs) renders a page to a screenshot, and what it drew is counted."""

from __future__ import annotations

import subprocess
from pathlib import Path

from PIL import Image

from harness.merge.report import PALETTE


def chromium(page: Path, screenshot: Path, height: int = 3000) -> list[str]:
    """Load page in headless Chromium; returns what its pages wrote to the console."""
    done = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", f"--screenshot={screenshot}", f"--window-size=1000,{height}",
         f"file://{page}"], capture_output=True, text=True, timeout=120)
    assert screenshot.exists(), done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def chart_pixels(screenshot: Path, colours: int = 4) -> int:
    """Pixels drawn in the charts' first line colours."""
    wanted = {tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in PALETTE[:colours]}
    image = Image.open(screenshot).convert("RGB")
    return sum(count for count, colour in image.getcolors(1 << 24) or []
               if any(sum(abs(a - b) for a, b in zip(colour, c, strict=True)) < 30
                      for c in wanted))
