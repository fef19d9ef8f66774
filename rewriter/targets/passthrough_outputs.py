"""``Loop`` / ``Scan`` ``identity_written`` (and tract's ``Scan`` ``read_outputs_written``, below): a body output that is one of the body's own inputs
(a loop-carried value the body passes on unchanged: tf2onnx's while loops carry their weights
so, piper_nakdimon's four LSTM Loops five values each) is written by an Identity node of its own.

Measured (tests/targets/test_passthrough_outputs.py): OpenVINO 2026.4.1 refuses such a Loop and
such a Scan at load ("The provided loop body graph canonical inputs size (16), does not match the
sum of loop carried dependencies and two mandatory inputs (11)"); OpenVINO 2024.6.0 runs both
right; tract 0.23.9 aborts on the Scan (a panic). With an Identity writing each such output they
run and give the values the spec defines. ONNX Runtime 1.15 to 1.32 compute such a Scan wrongly
themselves (zeros, or what memory held, for the passed-on state and for every scan row after the
first) and right written so: their targets take the form for Scan too. The same values: an Identity.

``read_outputs_written`` (tract's Scan) also gives an Identity to a body output that a body node
reads (onnx-asr's wespeaker frames its samples with a Scan whose frame, a scan output, is sliced for
the next state): tract 0.23.9 refuses such a Scan at load, its dims static or not ("output-0-adjust-dim
AddDims ... Impossible to unify 2 with 3"), and runs it with the Identity.
"""

from __future__ import annotations

import onnx
from onnx import helper

from rewriter.graph import traversal
from rewriter.graph.names import first_few, fresh_name
from rewriter.graph.schemas import is_default_domain
from rewriter.targets.node_splice import taken_names

__all__ = ["identity_written", "scans_written"]


def _outputs_to_write(body: onnx.GraphProto, read: bool) -> set[str]:
    """The outputs of ``body`` that are body inputs and, with ``read``, those a body node reads too."""
    names = {v.name for v in body.input}
    if read:
        names |= {i for node in body.node for i in node.input}
    return names & {v.name for v in body.output}


def _write_passthroughs(body: onnx.GraphProto, taken: set[str], read: bool = False) -> int:
    """Give every output of ``body`` that :func:`_outputs_to_write` names an Identity; how many."""
    inputs = _outputs_to_write(body, read)
    count = 0
    for value in body.output:
        if value.name in inputs:
            out = fresh_name(taken, f"{value.name}_passed")
            body.node.append(helper.make_node("Identity", [value.name], [out], name=fresh_name(taken, out)))
            value.name = out
            count += 1
    return count


def _passing(model: onnx.ModelProto, op: str, read: bool = False) -> list[tuple[onnx.NodeProto, onnx.GraphProto]]:
    """(node, body) of each ``op`` node, in any scope, whose body has an output that is a body input
    (with ``read``: or that a body node reads)."""
    found = []
    for scope in traversal.iter_scopes(model):
        for node in scope.body.node:
            if node.op_type != op or not is_default_domain(node.domain):
                continue
            body = next((a.g for a in node.attribute if a.name == "body" and a.type == onnx.AttributeProto.GRAPH), None)
            if body is not None and _outputs_to_write(body, read):
                found.append((node, body))
    return found


def scans_written(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` itself when no Scan passes a body input on as a body output, else a copy with each
    such output written by an Identity: the form ONNX Runtime computes right (``--verify`` runs the
    original and the result so, where ONNX Runtime would give both the same wrong values)."""
    if not _passing(model, "Scan"):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    identity_written("Scan")(copy, "onnxruntime")
    return copy


def identity_written(op: str, read: bool = False):
    """The rewrite for ``op`` (Loop or Scan): in place, each body output of an ``op`` node (any
    scope) that is a body input (``read``: or that a body node reads) written by an Identity; one
    note naming the nodes."""
    what = "pass a body input on unchanged, or are read in the body too," if read else \
        "pass a body input on unchanged"

    def rewrite(model: onnx.ModelProto, release: str, inferred=None) -> list[str]:
        del inferred  # (the form is read from the bodies' names)
        found = _passing(model, op, read)
        if not found:
            return []
        taken = taken_names(model)
        count = sum(_write_passthroughs(body, taken, read) for _, body in found)
        done = [node.name or node.output[0] for node, _ in found]
        return [f"{count} output(s) of {len(done)} {op} bodies that {what} written by an Identity "
                f"({release} refuses, aborts on or miscomputes such a body: measured): {first_few(repr(n) for n in done)}"]
    return rewrite
