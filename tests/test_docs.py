"""The manual builds strictly (a broken link or anchor fails) and the README stays a front
page."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_the_manual_builds_strictly(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT / "contrib" / "docs",
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    # Nothing but MkDocs's own INFO lines: no warning, no banner from the theme.
    assert all(line.startswith("INFO") for line in done.stderr.splitlines() if line.strip()), \
        done.stderr
    for page in ("index", "running", "transports", "measures", "extending"):
        assert (tmp_path / "site" / page / "index.html").is_file() or page == "index"
    assert (tmp_path / "site" / "index.html").is_file()


def test_the_readme_is_a_front_page_that_maps_the_manual() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    for page in (ROOT / "contrib" / "docs" / "docs").glob("*.md"):
        assert f"contrib/docs/docs/{page.name}" in text, page.name
