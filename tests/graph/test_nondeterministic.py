"""One list of the ops whose outputs are random (rewriter.graph.nondeterministic), derived from
onnx.defs, and used by every pass that must not treat them as pure: the optimizer's constant
folder and its common-subexpression elimination.

Oracles: onnx.defs (the ops with a ``seed`` attribute); onnx.reference, whose training-mode
Dropout gives different masks for different seeds.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
import onnx_ir as ir
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from rewriter.graph.nondeterministic import NON_DETERMINISTIC_OPS


def _seeded_ops() -> set[str]:
    return {s.name for s in onnx.defs.get_all_schemas_with_history()
            if s.domain in ("", "ai.onnx") and "seed" in s.attributes}


def test_the_list_is_the_ops_onnx_gives_a_seed():
    assert NON_DETERMINISTIC_OPS == _seeded_ops()


def test_training_dropout_is_random_as_the_reference_runs_it():
    masks = []
    for seed in (1, 2):
        node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "m"], seed=seed)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                                  [helper.make_tensor_value_info("m", TensorProto.BOOL, [64])],
                                  [numpy_helper.from_array(np.array(0.5, np.float32), "r"),
                                   numpy_helper.from_array(np.array(True), "t")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        masks.append(ReferenceEvaluator(model).run(["m"], {"x": np.ones(64, np.float32)})[0])
    assert not np.array_equal(*masks)


def test_the_constant_folder_and_cse_use_the_list():
    from rewriter.optimize import constant_folding, cse

    assert set(constant_folding._NON_DETERMINISTIC) == NON_DETERMINISTIC_OPS
    assert set(cse._NON_DETERMINISTIC) == NON_DETERMINISTIC_OPS


def _two_training_dropouts(data_is_constant: bool) -> ir.Model:
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "r"), numpy_helper.from_array(np.array(True), "t")]
    inputs = []
    if data_is_constant:
        inits.append(numpy_helper.from_array(np.ones(8, np.float32), "x"))
    else:
        inputs.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [8]))
    graph = helper.make_graph(
        [helper.make_node("Dropout", ["x", "r", "t"], ["d1"], name="drop1"),
         helper.make_node("Dropout", ["x", "r", "t"], ["d2"], name="drop2"),
         helper.make_node("Add", ["d1", "d2"], ["y"], name="add")], "g", inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])], inits)
    return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


def test_cse_keeps_two_training_dropouts_of_one_input():
    from rewriter.optimize.cse import CommonSubexpressionEliminationPass

    model = _two_training_dropouts(data_is_constant=False)
    CommonSubexpressionEliminationPass()(model)
    assert [n.name for n in model.graph if n.op_type == "Dropout"] == ["drop1", "drop2"]


def test_the_folder_leaves_a_training_dropout_of_constants():
    from rewriter.optimize.constant_folding import FoldConstantsPass

    model = _two_training_dropouts(data_is_constant=True)
    FoldConstantsPass()(model)
    assert [n.name for n in model.graph if n.op_type == "Dropout"] == ["drop1", "drop2"]
