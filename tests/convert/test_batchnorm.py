"""BatchNormalization 6/7/9/14/15: consumed_inputs, is_test, spatial, training_mode, type split."""

from __future__ import annotations

import pytest

from rewriter.convert import convert_model
from tests.convert.support.feature_util import (LATEST, TensorProto, assert_valid, cases, converts, helper, model, np,
                                        reference, refused, run_backend_case)

RNG = np.random.default_rng(0)
X = RNG.normal(size=[2, 3, 4, 5]).astype(np.float32)
PARAMS = [RNG.uniform(0.5, 1.5, size=[3]).astype(np.float32) for _ in range(4)]


def _bn(opset, outputs=("y",), param_types=(TensorProto.FLOAT,) * 4, **attrs):
    inits = [helper.make_tensor(n, t, [3], p.astype(helper.tensor_dtype_to_np_dtype(t)).tolist())
             for n, t, p in zip(["s", "b", "m", "v"], param_types, PARAMS)]
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], list(outputs), name="bn", **attrs)
    outs = [(o, TensorProto.FLOAT, None) for o in outputs if o]
    return model([node], opset, [("x", TensorProto.FLOAT, [2, 3, 4, 5])], outs, initializers=inits)


@pytest.mark.parametrize("source,target", [(15, 7), (15, 9), (15, 14), (9, 15), (7, LATEST), (14, 7)])
def test_inference_mode_round_trips(source, target):
    result, report = converts(_bn(source), target, {"x": X}, rtol=1e-5)
    assert not report.version_converter_called
    assert not any(a.name == "training_mode" for a in result.graph.node[0].attribute)


def test_below_7_is_test_written_and_read_back():
    down, _ = convert_model(_bn(15), 6)
    assert {a.name: a.i for a in down.graph.node[0].attribute}["is_test"] == 1
    down1, _ = convert_model(_bn(15), 5)
    assert {a.name for a in down1.graph.node[0].attribute} == {"is_test", "consumed_inputs"}
    converts(down1, 15, {"x": X}, expected=reference(_bn(15), {"x": X}), rtol=1e-5)


def test_old_training_default_keeps_training_mode_going_up():
    """is_test absent at 6 means training: the node gets the outputs that signal training at 7."""
    m = _bn(6, is_test=0)
    result, _ = convert_model(m, 9)
    assert_valid(result)
    assert len([o for o in result.graph.node[0].output if o]) == 5
    up, _ = convert_model(m, 15)
    assert {a.name: a.i for a in up.graph.node[0].attribute}["training_mode"] == 1


def test_training_mode_round_trip_14_9():
    m = _bn(15, outputs=("y", "rm", "rv"), training_mode=1, momentum=0.5)
    down, _ = convert_model(m, 9)
    assert list(down.graph.node[0].output)[:3] == ["y", "rm", "rv"] and len(down.graph.node[0].output) == 5
    assert_valid(down)
    back, _ = convert_model(down, 15)
    assert_valid(back)
    assert list(back.graph.node[0].output) == ["y", "rm", "rv"]
    assert {a.name: a.i for a in back.graph.node[0].attribute}["training_mode"] == 1


def test_refusals():
    refused(_bn(9, outputs=("y", "m2", "v2", "sm", "sv")), 14, "'bn'", "9 -> 14", "saved_mean")
    refused(_bn(7, spatial=0), 9, "'bn'", "7 -> 9", "spatial=0")
    refused(_bn(15, param_types=(TensorProto.FLOAT16,) * 2 + (TensorProto.FLOAT,) * 2), 14, "'bn'",
            "15 -> 14", "'s' must have the type of X")
    refused(_bn(14, param_types=(TensorProto.FLOAT,) * 2 + (TensorProto.DOUBLE,) * 2), 9, "'bn'",
            "14 -> 9", "'m' must have the type of X")
    refused(_bn(6, outputs=("y", "m2"), is_test=1), 7, "'bn'", "6 -> 7", "is_test=1")


@pytest.mark.parametrize("case", cases("BatchNormalization"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)
