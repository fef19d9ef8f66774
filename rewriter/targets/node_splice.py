"""What the per-release rewrites (``rewrite_forms``) share: the names a model already uses, and
nodes of a scope replaced by the nodes a rewrite writes for each."""

from __future__ import annotations

from typing import Callable

import onnx

from rewriter.graph import traversal

__all__ = ["splice", "taken_names"]


def taken_names(model: onnx.ModelProto) -> set:
    """Every node name and value name of every scope, and every scope's inputs, outputs and
    initializers (a subgraph input no node reads included): what a new name must not be."""
    taken = set()
    for s in traversal.iter_scopes(model):
        body = s.body
        taken |= {n for node in body.node for n in [*node.input, *node.output, node.name]}
        taken |= {getattr(v, "name", v) for v in [*body.input, *body.output, *getattr(body, "initializer", [])]}
    return taken  # (a function's inputs and outputs are names; it has no initializers)


def splice(scope: traversal.Scope, found: dict, write: Callable) -> list[str]:
    """Replace in place each node of ``scope`` whose index is a key of ``found`` by
    ``write(node, found[index])`` (a list of nodes); the replaced nodes' labels (name, else first
    output).  A subgraph's scope is spliced before the graph whose node holds it (the caller's order)."""
    nodes, done = [], []
    for i, node in enumerate(scope.body.node):
        if i in found:
            nodes += write(node, found[i])
            done.append(node.name or node.output[0])
        else:
            nodes.append(node)
    del scope.body.node[:]
    scope.body.node.extend(nodes)
    return done


def splice_found(model: onnx.ModelProto, plan_of: Callable, write: Callable) -> list[str]:
    """Replace in place, in every scope, each node for which ``plan_of(node, scope)`` is not None by
    ``write(node, plan, taken)`` (``taken``: the model's names, which new ones must avoid); the
    replaced nodes' labels. Subgraphs are spliced before the graph whose node holds them."""
    plans = []
    for scope in traversal.iter_scopes(model):
        found = {i: plan for i, node in enumerate(scope.body.node) if (plan := plan_of(node, scope)) is not None}
        if found:
            plans.append((scope, found))
    if not plans:
        return []
    taken, done = taken_names(model), []
    for scope, found in reversed(plans):
        done += splice(scope, found, lambda node, plan: write(node, plan, taken))
    return done
