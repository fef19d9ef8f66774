"""What the engine's walk knows about the nodes it is converting at one point: the opset they go
to and where they come from. A :class:`Frame` is passed down every call of the walk
(``Engine.convert``, ``Expansion.expand``, ...) and never changed: a call that converts
nodes for another opset, or nodes it made, passes a new one."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Frame"]


class Frame(NamedTuple):
    """The opset converted to and the provenance of the nodes being converted."""

    to_version: int  # the opset they are converted to
    derived: bool = False  # made by the conversion (a function body, a rewrite): counted apart in the plan
    inside: str | None = None  # "function body of <node>", "decomposition of <node>": the innermost expansion
    maker: str | None = None  # the label of the outermost node whose adapter made them
    current: tuple | None = None  # the outputs of the body's node being converted: its blockers' key

    # (built positionally: NamedTuple._replace costs a microsecond per node of the walk)

    def made(self) -> Frame:
        """For nodes the conversion made."""
        return self if self.derived else Frame(self.to_version, True, self.inside, self.maker, self.current)

    def within(self, what: str) -> Frame:
        """For the nodes that replace a node (``what``: "function body of ..."): a blocker among
        them says where it came from, and onnx's converter is not used."""
        return Frame(self.to_version, True, what, self.maker, self.current)

    def made_converting(self, label: str) -> Frame:
        """For the nodes an adapter inserted converting the node ``label`` (``Engine.convert``
        counts them as made by the conversion: they are not a body's own)."""
        return Frame(self.to_version, self.derived, self.inside, self.maker or label, self.current)

    def towards(self, to_version: int) -> Frame:
        return Frame(to_version, self.derived, self.inside, self.maker, self.current)

    def at(self, outputs: tuple) -> Frame:
        """For the conversion of the body's node with these outputs."""
        return Frame(self.to_version, self.derived, self.inside, self.maker, outputs)

    def label(self, label: str) -> str:
        """A blocker's node label, with where the node came from."""
        if self.inside is not None:
            return f"{label} (from the {self.inside})"
        if self.maker is not None:
            return f"{label} (made converting {self.maker})"
        return label
