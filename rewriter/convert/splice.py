"""How the nodes that replace a node take its place: their positions in the body
(:func:`splice`) and which of them carries the node's name (:func:`named`)."""

from __future__ import annotations

__all__ = ["splice", "named"]


def splice(nodes, position: int, node, sequence) -> int:
    """Put ``sequence`` in place of ``node``, which is at ``position`` of ``nodes`` (a body's
    repeated ``node`` field, or a list); returns the position just after the last of them.

    When ``node`` itself is in ``sequence`` it stays where it is and the others are inserted
    around it (a repeated field copies what is inserted: the node stays the object callers
    hold); otherwise it is deleted and every node of ``sequence`` inserted in its place."""
    if len(sequence) == 1 and sequence[0] is node:  # the common case: changed in place or kept
        return position + 1
    kept = next((m for m, n in enumerate(sequence) if n is node), None)
    if kept is None:
        del nodes[position]
        for m, n in enumerate(sequence):
            nodes.insert(position + m, n)
    else:
        for m, n in enumerate(sequence[:kept]):
            nodes.insert(position + m, n)
        after = position + kept + 1
        for m, n in enumerate(sequence[kept + 1:]):
            nodes.insert(after + m, n)
    return position + len(sequence)


def named(state, sequence: list, node, original_name: str, original_out: str | None, removed: bool = False) -> list:
    """``sequence`` (the nodes that replace ``node``, whose name and first output were
    ``original_name`` and ``original_out``) with the original name on the node that now produces
    the original first output; every other node of it keeps a unique name (``node`` itself, when
    it stays and does not carry it, gets a fresh one from ``state``). Doc string and metadata
    move to the carrier when it has none."""
    if not original_name or len(sequence) == 1 and sequence[0] is node:
        return sequence
    carrier = next((n for n in sequence if original_out in n.output), None)
    if carrier is None or carrier is node:
        return sequence
    if not removed:
        node.name = state.fresh_node_name(original_name)
    carrier.name = original_name
    if node.doc_string and not carrier.doc_string:
        carrier.doc_string = node.doc_string
    if node.metadata_props and not carrier.metadata_props:
        carrier.metadata_props.extend(node.metadata_props)
    return sequence
