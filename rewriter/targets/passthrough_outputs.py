"""``Loop`` / ``Scan`` ``identity_written``: a body output that is one of the body's own inputs
(a loop-carried value the body passes on unchanged: tf2onnx's while loops carry their weights
so, piper_nakdimon's four LSTM Loops five values each) is written by an Identity node of its own.

Measured (tests/targets/test_passthrough_outputs.py): OpenVINO 2026.4.1 refuses such a Loop and
such a Scan at load ("The provided loop body graph canonical inputs size (16), does not match the
sum of loop carried dependencies and two mandatory inputs (11)"); OpenVINO 2024.6.0 runs both
right; tract 0.23.9 aborts on the Scan (a panic). With an Identity writing each such output they
run and give the values the spec defines. The same values: an Identity. (ONNX Runtime 1.15 to 1.32
compute such a Scan wrongly themselves: zeros, or what memory held, for the passed-on state and
every scan row after the first; written so, they compute it right.)
"""

from __future__ import annotations

import onnx
from onnx import helper

from rewriter.graph import traversal
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.node_splice import taken_names

__all__ = ["identity_written"]


def _taken(model: onnx.ModelProto) -> set[str]:
    """Every name of every scope, the subgraphs' inputs, outputs and initializers too (a body input
    no node reads is a name a new one must not take)."""
    names = taken_names(model)
    for scope in traversal.iter_scopes(model):
        body = scope.body
        names |= {getattr(v, "name", v) for v in [*body.input, *body.output, *getattr(body, "initializer", [])]}
    return names


def _write_passthroughs(body: onnx.GraphProto, taken: set[str]) -> int:
    """Give every output of ``body`` that is one of its inputs an Identity; how many."""
    inputs = {v.name for v in body.input}
    count = 0
    for value in body.output:
        if value.name in inputs:
            out = fresh_name(taken, f"{value.name}_passed")
            body.node.append(helper.make_node("Identity", [value.name], [out], name=fresh_name(taken, out)))
            value.name = out
            count += 1
    return count


def identity_written(op: str):
    """The rewrite for ``op`` (Loop or Scan): in place, each body output of an ``op`` node (any
    scope) that is a body input written by an Identity; one note naming the nodes."""
    def rewrite(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
        del inferred  # (the form is read from the bodies' names)
        taken, done, count = None, [], 0
        for scope in list(traversal.iter_scopes(model)):
            for node in scope.body.node:
                if node.op_type != op or not is_default_domain(node.domain):
                    continue
                body = next((a.g for a in node.attribute if a.name == "body" and a.type == onnx.AttributeProto.GRAPH),
                            None)
                if body is None or not {v.name for v in body.input} & {v.name for v in body.output}:
                    continue
                taken = _taken(model) if taken is None else taken
                count += _write_passthroughs(body, taken)
                done.append(node.name or node.output[0])
        if not done:
            return []
        return [f"{count} output(s) of {len(done)} {op} bodies that pass a body input on unchanged written by an "
                f"Identity ({release} refuses such a body or aborts on it): {first_few(repr(n) for n in done)}"]
    return rewrite
