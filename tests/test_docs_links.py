"""The docs refer only to files that are in the repository (or, named as such, in the upstream reference
data, which lives outside it by design). A newcomer following a link or a file name must find it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.services import REPO

DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# `name.md` mentioned in prose or code spans, e.g. "docs/compatibility.md", "DESIGN.md".
MENTION = re.compile(r"(?<![\w/.-])([\w./-]+\.md)\b")
# Files of the upstream reference data (GPUFLEET_REFERENCE_DIR) and outputs a command writes.
OUTSIDE = {"dcgm/hami.md", "shared/reference/README.md", "plan.md"}


def prose(text: str) -> str:
    """The text without code blocks and code spans (a regex such as `[a-z](...)` is not a link)."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))


def exists(doc: Path, target: str) -> bool:
    return any((base / target).exists() for base in (doc.parent, REPO))


def test_links_resolve_to_files_in_the_repository() -> None:
    broken = [f"{doc.relative_to(REPO)}: {target}" for doc in DOCS
              for target in LINK.findall(prose(doc.read_text(encoding="utf-8")))
              if "://" not in target and not target.startswith("mailto:") and not exists(doc, target)]
    assert not broken, broken


def test_files_named_in_the_docs_are_in_the_repository() -> None:
    missing = [f"{doc.relative_to(REPO)}: {name}" for doc in DOCS
               for name in set(MENTION.findall(doc.read_text(encoding="utf-8")))
               if name not in OUTSIDE and not exists(doc, name)]
    assert not missing, missing
