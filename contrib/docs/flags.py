"""Rewrites the manual's flag tables (docs/running.md) from the option table
(harness.spec.options), between the markers `<!-- flags -->` and `<!-- /flags -->`.
tests/test_options.py fails while the page and the table differ: run
`python contrib/docs/flags.py` after changing an option."""

from __future__ import annotations

from pathlib import Path

from harness.spec.options import markdown_tables

PAGE = Path(__file__).resolve().parent / "docs" / "running.md"
START, END = "<!-- flags -->\n", "<!-- /flags -->\n"


def rewritten(text: str) -> str:
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}{markdown_tables()}{END}{tail}"


if __name__ == "__main__":
    PAGE.write_text(rewritten(PAGE.read_text()))
    print(f"wrote the flag tables into {PAGE}")
