"""RNN/GRU/LSTM: layout (14), output_sequence (7), GRU linear_before_reset (3)."""

from __future__ import annotations

import pytest

from rewriter.convert import convert_model
from tests.convert.support.feature_util import (LATEST, TensorProto, assert_valid, cases, converts, helper, model, np,
                                        reference, refused, run_backend_case)

RNG = np.random.default_rng(0)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _rnn(op, opset, outputs=("y", "y_h"), **attrs):
    g, h, i = GATES[op], 4, 3
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [1, g * h, i], RNG.normal(size=g * h * i).tolist()),
             helper.make_tensor("r", TensorProto.FLOAT, [1, g * h, h], RNG.normal(size=g * h * h).tolist())]
    node = helper.make_node(op, ["x", "w", "r"], list(outputs), name="rnn", hidden_size=h, **attrs)
    outs = [(o, TensorProto.FLOAT, None) for o in outputs if o]
    return model([node], opset, [("x", TensorProto.FLOAT, [5, 2, 3])], outs, initializers=inits)


X = RNG.normal(size=[5, 2, 3]).astype(np.float32)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("source,target", [(LATEST, 13), (LATEST, 7), (7, LATEST), (14, 7)])
def test_layout_0_round_trips(op, source, target):
    attrs = {"layout": 0} if source >= 14 else {}
    result, report = converts(_rnn(op, source, **attrs), target, {"x": X}, rtol=1e-5)
    assert not report.version_converter_called
    assert not any(a.name == "layout" for a in result.graph.node[0].attribute) or target >= 14


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("outputs", [("y", "y_h"), ("", "y_h"), ("y",), ("y", "y_h", "y_c")])
@pytest.mark.parametrize("initial", [False, True])
def test_layout_1_becomes_transposes(op, outputs, initial):
    if len(outputs) == 3 and op != "LSTM":
        return
    g, h = GATES[op], 4
    inputs = ["x", "w", "r"] + (["", "", "h0"] + (["c0"] if op == "LSTM" else []) if initial else [])
    inits = [helper.make_tensor("w", TensorProto.FLOAT, [2, g * h, 3], RNG.normal(size=2 * g * h * 3).tolist()),
             helper.make_tensor("r", TensorProto.FLOAT, [2, g * h, h], RNG.normal(size=2 * g * h * h).tolist())]
    node = helper.make_node(op, inputs, list(outputs), name="rnn", hidden_size=h, layout=1,
                            direction="bidirectional")
    graph_inputs = [("x", TensorProto.FLOAT, [2, 5, 3])]
    feeds = {"x": RNG.normal(size=[2, 5, 3]).astype(np.float32)}
    if initial:
        for n in ["h0"] + (["c0"] if op == "LSTM" else []):
            graph_inputs.append((n, TensorProto.FLOAT, [2, 2, h]))
            feeds[n] = RNG.normal(size=[2, 2, h]).astype(np.float32)
    m = model([node], 14, graph_inputs, [(o, TensorProto.FLOAT, None) for o in outputs if o], initializers=inits)
    # ONNX Runtime refuses layout=1: the reference computes the original
    result, report = converts(m, 13, feeds, expected=reference(m, feeds), rtol=1e-5)
    assert report.changes[f"{op} layout=1 -> Transposes around layout 0"] == 1
    if outputs[0]:
        assert next(n for n in result.graph.node if outputs[0] in n.output).name == "rnn"


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_output_sequence_below_7(op):
    down, _ = convert_model(_rnn(op, 13), 6)
    assert_valid(down)
    assert {a.name: a.i for a in down.graph.node[0].attribute if a.name == "output_sequence"} == \
        {"output_sequence": 1}
    back, _ = convert_model(down, 13)
    assert not any(a.name == "output_sequence" for a in back.graph.node[0].attribute)
    converts(back, 14, {"x": X}, rtol=1e-5)


def test_gru_below_3():
    refused(_rnn("GRU", 13, linear_before_reset=1), 2, "'rnn'", "3 -> 1", "linear_before_reset=1")
    down, _ = convert_model(_rnn("GRU", 13, outputs=("y",)), 2)
    assert_valid(down)
    node = down.graph.node[0]
    assert len(node.output) == 2 and node.output[1]
    assert {a.name: a.s for a in node.attribute if a.name == "direction"} == {"direction": b"forward"}


@pytest.mark.parametrize("case", cases("RNN", "GRU", "LSTM"), ids=lambda c: c.name)
def test_backend_cases(case):
    run_backend_case(case)
