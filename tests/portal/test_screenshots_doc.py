"""The README shows current portal screenshots (refreshed by tests/portal/test_crawl.py), and they stay small."""

from __future__ import annotations

import re

from tests.support.services import REPO

SHOTS = REPO / "docs" / "screenshots"
PNG = b"\x89PNG\r\n\x1a\n"


def test_readme_pictures_exist_are_png_and_stay_small() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    linked = re.findall(r"\]\((docs/screenshots/[^)]+\.png)\)", readme)
    assert {"docs/screenshots/admin-home.png", "docs/screenshots/tenant-home.png", "docs/screenshots/invoice.png",
            "docs/screenshots/usage.png"} <= set(linked)
    for path in linked:
        assert (REPO / path).read_bytes()[:8] == PNG, path
    assert sum(p.stat().st_size for p in SHOTS.glob("*.png")) < 2_000_000
