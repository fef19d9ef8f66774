"""How the converter says no: a :class:`Blocker` per node that cannot be converted, with the
node's label, the step, the reason and the targets for which it would convert."""

from __future__ import annotations

import dataclasses

from rewriter.convert import registry
from rewriter.graph import traversal

__all__ = ["Blocker", "Label", "reason_after_label", "works_for"]


@dataclasses.dataclass
class Blocker:
    """One node that cannot be converted, and why."""

    node: str  # the node's label: name, op, where
    op: str
    step: str  # "18 -> 17", or "expand" for an op newer than the target
    reason: str
    works: str  # the targets for which this node would convert, in words
    key: tuple | None = dataclasses.field(default=None, repr=False, compare=False)  # (id(body), outputs)
    name: str = ""  # the node's own name ("" when it has none)
    where: str = ""  # the scope it is in ("main graph", "function 'f'", ...)

    def line(self) -> str:
        return f"{self.node}: {self.op} {self.step}: {self.reason} (would work for {self.works})"

    def to_dict(self) -> dict:
        return {"node": self.node, "name": self.name, "where": self.where, "op": self.op, "step": self.step,
                "reason": self.reason, "works": self.works}


class Label:
    """A node's label for messages, computed only when a message needs it."""

    __slots__ = ("_node", "_scope", "_text")

    def __init__(self, node, scope):
        self._node, self._scope, self._text = node, scope, None

    @property
    def name(self) -> str:
        return self._node.name

    @property
    def where(self) -> str:
        return self._scope.location if self._scope is not None else ""

    def __str__(self) -> str:
        if self._text is None:
            self._text = traversal.node_label(self._node, self._scope)
        return self._text

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


def reason_after_label(message: str, label: str) -> str:
    return message[len(label) + 2:] if message.startswith(label + ": ") else message


def works_for(op: str, a: int, b: int) -> str:
    """The targets for which a node stopped at step a -> b would convert."""
    if b < a:
        return f"targets >= {a}"
    versions = registry.schema_versions(op)
    return f"targets <= {b - 1}" if versions and versions[0] == a else f"targets {a}..{b - 1}"
