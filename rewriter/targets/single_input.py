"""A Concat of one input written as an Identity for a release that refuses that form
(``form_verdicts`` ``single_input``, measured by ``tools/runtime_probe.py``: a Concat whose one
input is a Shape of the fed input, which then reshapes it, as torch's exports write a view's
shape). LiteRT's onnx2tf 2.6.9 writes a custom op for such a Concat (``ONNX_CONCAT``, refused by
the interpreter), while it runs a Concat of two inputs and an Identity. A Concat of one input
computes its input, element for element; the Identity keeps the node's name and output."""

from __future__ import annotations

import onnx

from rewriter.targets.measured_verdicts import node_versions, rewrite_note

__all__ = ["SINGLE_INPUT", "single_input_concats"]

SINGLE_INPUT = "single_input"


def single_input_concats(model: onnx.ModelProto, table: dict, release: str) -> list[str]:
    """Rewrite, in place, every Concat with one input of a version whose ``single_input`` form
    ``table`` (``form_verdicts``) says is not right as an Identity; the notes of what was done."""
    refused = {int(v) for v, forms in table.get("", {}).get("Concat", {}).items() if forms.get(SINGLE_INPUT, "ok") != "ok"}
    if not refused:
        return []
    done = []
    for node, _scope, domain, version in node_versions(model):
        if domain == "" and node.op_type == "Concat" and version in refused and len(node.input) == 1 and node.input[0]:
            node.op_type = "Identity"
            del node.attribute[:]
            done.append(node.name or node.output[0])
    return rewrite_note(done, "Concat node(s) of one input written as Identity", release)
