"""The docs name only what exists: every file path in docs/ and README.md is a real file or
folder of this checkout (so a move or a rename cannot leave a page pointing at nothing)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("agent", "gates", "skills", "storage", "lab", "tests", "docs")
PATH = re.compile(r"`((?:" + "|".join(ROOMS) + r")/[\w./-]*?)(?:::[\w]+)?`")


def named_paths(text: str) -> set[str]:
    found = set()
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if "*" in path or "<" in path:
            continue
        found.add(path)
    return found


def test_every_path_the_docs_name_exists() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = {
        f"{page.relative_to(ROOT)}: {path}"
        for page in pages
        for path in named_paths(page.read_text(encoding="utf-8"))
        if not (ROOT / path).exists()
    }
    assert not missing, sorted(missing)


def test_the_architecture_page_names_the_files_of_a_dm() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert len(named_paths(text)) >= 30
