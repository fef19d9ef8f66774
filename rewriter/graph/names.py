"""Fresh names: the one loop every rewrite that adds values or nodes uses."""

from __future__ import annotations

__all__ = ["fresh_name", "first_few", "named_after"]


def fresh_name(used: set, base: str, first: int = 1, sep: str = "_") -> str:
    """``base``, or ``base`` ``sep`` ``N`` with the smallest N >= ``first`` not in ``used``; added to ``used``."""
    name, i = base, first - 1
    while name in used:
        i += 1
        name = f"{base}{sep}{i}"
    used.add(name)
    return name


def first_few(labels, n: int = 3) -> str:
    """``labels`` for a message: the first ``n`` joined by commas, then how many more there are."""
    labels = list(labels)
    return ", ".join(labels[:n]) + (f" and {len(labels) - n} more" if len(labels) > n else "")


def named_after(name: str, names) -> str | None:
    """The longest of ``names`` that ``name`` extends by "_..." (a node named after the one it
    replaced, as fresh_name and the lowerings name them), else None."""
    return max((n for n in names if name.startswith(n + "_")), key=len, default=None)
