"""A blocker raised on a node that an adapter made names the model's own node it replaces."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import rewriter
from rewriter.convert.planner import ConversionBlocked


def test_a_blocked_node_made_by_an_adapter_names_the_node_it_came_from():
    # ArgMax select_last_index=1 below 12 reads the reversed axis (a Slice with steps -1), which
    # below 10 needs the axis size: unknown here
    graph = h.make_graph([h.make_node("ArgMax", ["x"], ["y"], axis=-1, select_last_index=1, name="am")], "g",
                         [h.make_tensor_value_info("x", T.DOUBLE, ["a", "b"])],
                         [h.make_tensor_value_info("y", T.INT64, ["a", 1])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.checker.check_model(model, full_check=True)
    with pytest.raises(ConversionBlocked) as e:
        rewriter.convert_opset(model, 7)
    message = str(e.value)
    assert "(Slice)" in message and "made converting node 'am' (ArgMax) in main graph" in message
    assert rewriter.convert_opset(model, 11) is not None  # with the Slice's steps, it converts
