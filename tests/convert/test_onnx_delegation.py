"""When the engine gives a node to onnx's converter: only when onnx has an adapter known to be
correct (steps.ONNX_CORRECT, read from onnx's convert.h) for every step of the node's path, one
rewriter also has an adapter for (even a no-op registered as type-only) included, since onnx's
converter takes each step with its own adapter."""

from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from rewriter.convert import convert_model, registry, steps


def _attention(opset: int):
    graph = helper.make_graph(
        [helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn")], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 3, 4]) for n in "qkv"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def test_a_node_whose_every_step_onnx_takes_correctly_is_delegated():
    assert steps.step_kind("Attention", 23, 24) == steps.step_kind("Attention", 24, 25) == "onnx"
    _, report = convert_model(_attention(23), 25, plan_only=True)
    assert report.delegated == {"Attention": 1} and not report.blockers


@pytest.fixture
def no_op_adapter(monkeypatch):
    """A no-op adapter registered as type-only for Attention 23 -> 24."""
    registry.lookup("Abs", 1, 6)  # the adapter families are loaded before the registry is patched
    monkeypatch.setitem(registry.ADAPTERS, ("Attention", 23, 24), lambda node, ctx: None)
    monkeypatch.setitem(registry.KINDS, ("Attention", 23, 24), "type-only")
    registry.has_adapters.cache_clear()
    yield
    registry.has_adapters.cache_clear()


def test_a_no_op_own_step_onnx_also_takes_correctly_does_not_stop_the_delegation(no_op_adapter):
    assert steps.step_kind("Attention", 23, 24) == "own"
    _, report = convert_model(_attention(23), 25, plan_only=True)
    assert report.delegated == {"Attention": 1} and not report.blockers


def test_a_no_op_own_step_onnx_has_no_correct_adapter_for_blocks(no_op_adapter, monkeypatch):
    monkeypatch.setattr(steps, "ONNX_CORRECT", steps.ONNX_CORRECT - {("Attention", 23, 24)})
    _, report = convert_model(_attention(23), 25, plan_only=True)
    assert not report.delegated
    (blocker,) = report.blockers
    assert blocker.step == "24 -> 25"
    assert "lacks a correct adapter for step 23 -> 24" in blocker.reason
