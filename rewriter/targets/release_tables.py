"""Tables measured per runtime release (``data/*.json``: ``{"releases": {"1.15": ...}}``),
looked up by "MAJOR.MINOR"."""

from __future__ import annotations

import functools
import json
import os

__all__ = ["release_key", "load_table", "load_releases", "release_names", "release_text"]

_DATA = os.path.join(os.path.dirname(__file__), "data")


def release_key(release: str) -> tuple[int, int] | None:
    """(major, minor) of "MAJOR.MINOR[.PATCH]"; None when it is not such a string."""
    parts = release.strip().split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def release_text(key: tuple[int, int]) -> str:
    """"MAJOR.MINOR" of a (major, minor) key."""
    return f"{key[0]}.{key[1]}"


@functools.cache
def load_table(name: str) -> dict:
    """The data file ``data/<name>`` as it is (read once): the one reader of the shipped tables."""
    with open(os.path.join(_DATA, name), encoding="utf-8") as f:
        return json.load(f)


@functools.cache
def load_releases(name: str) -> dict:
    """{(major, minor): entry} of the table ``data/<name>``."""
    return {release_key(r): entry for r, entry in load_table(name)["releases"].items()}


def release_names(name: str) -> list[str]:
    """The releases measured in the table ``data/<name>``, oldest first."""
    return [release_text(k) for k in sorted(load_releases(name))]
