"""Fresh names: the one loop every rewrite that adds values or nodes uses."""

from __future__ import annotations

__all__ = ["fresh_name"]


def fresh_name(used: set, base: str, first: int = 1) -> str:
    """``base``, or ``base_N`` with the smallest N >= ``first`` not in ``used``; added to ``used``."""
    name, i = base, first - 1
    while name in used:
        i += 1
        name = f"{base}_{i}"
    used.add(name)
    return name
