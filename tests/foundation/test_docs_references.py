"""The repository speaks only of itself: every file its docs link to is in it, and no doc,
docstring or comment cites design material that is not."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: citations of material kept outside the repository
FOREIGN = re.compile(r"DESIGN(\.md| §)|EXAMPLES\.md|CONVENTIONS\.md|\bseeds/\d|\bseeds'")
DOC_PATH = re.compile(r"\bdocs/[a-z0-9-]+\.md")


def _tracked(*suffixes: str) -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return [ROOT / n for n in names if n.endswith(suffixes) and (ROOT / n).is_file()]


def test_no_text_cites_material_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _tracked(".py", ".md", ".ttl", ".template", ".toml")
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if FOREIGN.search(line)
    ]
    assert found == []


def test_every_relative_markdown_link_names_a_file_of_the_repository() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_docs_page_a_docstring_or_comment_names_exists() -> None:
    missing = sorted(
        {
            f"{path.relative_to(ROOT)}: {name}"
            for path in _tracked(".py", ".ttl", ".template", ".md")
            for name in DOC_PATH.findall(path.read_text(encoding="utf-8"))
            if not (ROOT / name).exists()
        }
    )
    assert missing == []
