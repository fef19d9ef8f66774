"""A refusal of a node the conversion wrote names the model's node it came from, whichever step
wrote it (an expansion into a function body, a lowering)."""

from __future__ import annotations

import pytest
from onnx import TensorProto as T, helper


def _model(nodes, inputs, outputs, opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def test_a_refused_node_an_expansion_wrote_names_the_users_node(monkeypatch):
    """DynamicQuantizeLinear expanded for OpenVINO 2026.4 (its data without the DynamicQuantizeLinear
    form, which writes the node instead: quant_dynamic.py) writes a QuantizeLinear under its own name,
    which that release's data refuses: the refusal also names the model's node and its op."""
    from rewriter import RewriterError
    from rewriter.convert.for_target import convert_for
    from rewriter.convert.lowering import quant_explicit

    measured = quant_explicit.quantized_forms

    def without_form(target):
        entry = measured(target)
        return {**entry, "forms": {op: v for op, v in entry.get("forms", {}).items() if op != "DynamicQuantizeLinear"}}

    monkeypatch.setattr(quant_explicit, "quantized_forms", without_form)

    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"], name="dql")
    model = _model([node], [helper.make_tensor_value_info("x", T.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", T.UINT8, [4]), helper.make_tensor_value_info("s", T.FLOAT, []),
                    helper.make_tensor_value_info("z", T.UINT8, [])])
    with pytest.raises(RewriterError, match=r"node 'dql' \(QuantizeLinear\).*the conversion of node 'dql' "
                                            r"\(DynamicQuantizeLinear\)"):
        convert_for(model, runtime="openvino==2026.4")
