"""The equation of an Einsum node read for the ranks of its inputs (the Einsum-12 operator docs,
as NumPy's ``einsum`` reads it): one label per input axis, ellipsis dims as labels of their own.

- Terms are separated by ``,``; ``->`` starts the explicit output; spaces are ignored; letters
  are labels (``a`` and ``A`` differ).
- An ellipsis ``...`` (at most one per term) stands for the axes of its operand that the term's
  letters leave over; every ellipsis covers the same number ``E`` of dims (the operator docs;
  ONNX's shape inference and ONNX Runtime refuse others), labelled ``...0`` to ``...(E-1)``, so
  that equal labels are the dims that broadcast together.
- Implicit output (no ``->``): the ellipsis dims first (when any term has an ellipsis), then the
  letters that occur exactly once in the whole left-hand side, sorted by code point (upper case
  before lower case).
- Explicit output: its letters must be distinct and occur on the left; an output without an
  ellipsis while the ellipses cover dims is refused (NumPy refuses it too).
"""

from __future__ import annotations

import string
from dataclasses import dataclass

__all__ = ["Equation", "ellipsis_label", "implied_ranks", "parse_equation", "shown"]

_LETTERS = frozenset(string.ascii_letters)


def ellipsis_label(j: int) -> str:
    """The label of broadcast dim ``j`` (counted from the left of the ``E`` broadcast dims)."""
    return f"...{j}"


def shown(label: str) -> str:
    """How a message names a label."""
    return label if len(label) == 1 else f"'...' dim {label[3:]}"


@dataclass(frozen=True)
class Equation:
    """One label per axis of each input (``inputs``) and of the output (``output``)."""

    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]


def _split_term(term: str, where: str) -> tuple[str, str, bool]:
    """(letters before the ellipsis, letters after it, whether it has one)."""
    if term.count("...") > 1:
        raise ValueError(f"{where} has more than one ellipsis")
    before, has, after = term.partition("...")
    for c in before + after:
        if c not in _LETTERS:
            raise ValueError(f"{where} has the character {c!r}, which is neither a letter nor part of '...'")
    return before, after, bool(has)


def implied_ranks(equation: str) -> list[int | None]:
    """Per term, the rank its operand must have when the term has no ellipsis (its number of
    letters), else None."""
    terms = equation.replace(" ", "").partition("->")[0].split(",")
    return [None if "..." in t else len(t) for t in terms]


def parse_equation(equation: str, ranks: list[int]) -> Equation:
    """The labels of ``equation`` for inputs of ``ranks``; ValueError(reason) when the equation
    is not valid for them."""
    eq = equation.replace(" ", "")
    if eq.count("->") > 1:
        raise ValueError(f"equation {equation!r} has more than one '->'")
    lhs, explicit, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"equation {equation!r} has {len(terms)} term(s) for {len(ranks)} input(s)")
    parts = [_split_term(t, f"term {k} ({t!r})") for k, t in enumerate(terms)]
    covered = []
    for k, ((before, after, has), rank) in enumerate(zip(parts, ranks)):
        extra = rank - len(before) - len(after)
        if extra < 0 or (extra and not has):
            raise ValueError(f"term {k} ({terms[k]!r}) does not fit input {k} of rank {rank}")
        covered.append(extra)
    widths = {e for e, (_, _, has) in zip(covered, parts) if has}
    if len(widths) > 1:
        raise ValueError(f"the ellipses of equation {equation!r} cover {sorted(widths)} dims: Einsum needs "
                         f"every ellipsis to cover the same number")
    width = max(covered, default=0)
    inputs = tuple(tuple(before) + tuple(ellipsis_label(j) for j in range(width - e, width)) + tuple(after)
                   for (before, after, _), e in zip(parts, covered))
    letters = [c for before, after, _ in parts for c in before + after]
    any_ellipsis = any(has for _, _, has in parts)
    if not explicit:
        once = sorted(c for c in set(letters) if letters.count(c) == 1)
        output = (tuple(ellipsis_label(j) for j in range(width)) if any_ellipsis else ()) + tuple(once)
        return Equation(inputs, output)
    before, after, has = _split_term(rhs, f"the output term ({rhs!r})")
    out_letters = before + after
    for c in out_letters:
        if out_letters.count(c) > 1:
            raise ValueError(f"the output term ({rhs!r}) names {c!r} more than once")
        if c not in letters:
            raise ValueError(f"the output term ({rhs!r}) names {c!r}, which no input term has")
    if width and not has:
        raise ValueError(f"the output term ({rhs!r}) has no '...' for the {width} dim(s) the ellipses cover")
    output = tuple(before) + tuple(ellipsis_label(j) for j in range(width if has else 0)) + tuple(after)
    return Equation(inputs, output)
