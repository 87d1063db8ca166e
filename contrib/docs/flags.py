"""Rewrites the manual's flag tables from the option table (harness.plan.options): every flag
in docs/running.md, between `<!-- flags -->` and `<!-- /flags -->`, and each transport's own
in its page (docs/<transport>.md), between `<!-- options -->` and `<!-- /options -->`.
tests/test_options.py fails while a page and the table differ: run
`python contrib/docs/flags.py` after changing an option."""

from __future__ import annotations

from pathlib import Path

from harness.modules import TRANSPORTS

from harness.plan.options import markdown_tables

DOCS = Path(__file__).resolve().parent / "docs"
PAGE = DOCS / "running.md"
START, END = "<!-- flags -->\n", "<!-- /flags -->\n"
OWN_START, OWN_END = "<!-- options -->\n", "<!-- /options -->\n"


def rewritten(text: str, table: str | None = None, start: str = START, end: str = END) -> str:
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    return f"{head}{start}{markdown_tables() if table is None else table}{end}{tail}"


if __name__ == "__main__":
    PAGE.write_text(rewritten(PAGE.read_text()))
    for name in TRANSPORTS:
        page = DOCS / f"{name}.md"
        page.write_text(rewritten(page.read_text(), markdown_tables(name), OWN_START, OWN_END))
    print(f"wrote the flag tables into {PAGE} and each transport's page")
