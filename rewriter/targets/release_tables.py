"""Tables measured per runtime release (``data/*.json``: ``{"releases": {"1.15": ...}}``),
looked up by "MAJOR.MINOR"."""

from __future__ import annotations

import json

__all__ = ["release_key", "load_releases"]


def release_key(release: str) -> tuple[int, int] | None:
    """(major, minor) of "MAJOR.MINOR[.PATCH]"; None when it is not such a string."""
    parts = release.strip().split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def load_releases(path: str) -> dict:
    """{(major, minor): entry} of the table at ``path``."""
    with open(path, encoding="utf-8") as f:
        table = json.load(f)
    return {release_key(r): entry for r, entry in table["releases"].items()}
