"""The scopes the optimizer visits: every subgraph and function, and the ops that hold graphs."""

from __future__ import annotations

import onnx.defs
import onnx_ir as ir
from onnx import TensorProto, helper

from rewriter.optimize.scopes import GRAPH_OPS, graphs_and_functions


def test_the_graph_holding_ops_are_those_of_onnx_defs():
    kinds = (onnx.defs.OpSchema.AttrType.GRAPH, onnx.defs.OpSchema.AttrType.GRAPHS)
    found = {s.name for s in onnx.defs.get_all_schemas_with_history()
             if s.domain == "" and any(a.type in kinds for a in s.attributes.values())}
    assert found == set(GRAPH_OPS)


def _branch(name, inner=None):
    nodes = [helper.make_node("Identity", ["x"], [f"{name}_out"])]
    if inner is not None:
        nodes = [helper.make_node("If", ["c"], [f"{name}_out"], then_branch=inner[0], else_branch=inner[1])]
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [2])])


def test_every_graph_subgraph_and_function_parents_first():
    inner = (_branch("inner_then"), _branch("inner_else"))
    custom = helper.make_node("Holder", ["x"], ["h"], domain="custom.domain", body=_branch("custom_body"))
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=_branch("then", inner), else_branch=_branch("else")),
         custom],
        "main", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("h", TensorProto.FLOAT, [2])])
    function = onnx.helper.make_function(
        "local", "fn", ["c", "x"], ["y"],
        [helper.make_node("If", ["c"], ["y"], then_branch=_branch("fn_then"), else_branch=_branch("fn_else"))],
        [helper.make_opsetid("", 17)])
    model = helper.make_model(graph, functions=[function], opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("custom.domain", 1), helper.make_opsetid("local", 1)])
    names = [g.name for g in graphs_and_functions(ir.from_proto(model))]
    # attributes in the order the node holds them (onnx.helper sorts them: else_branch first)
    assert names == ["main", "else", "then", "inner_else", "inner_then", "custom_body", "fn", "fn_else", "fn_then"]
