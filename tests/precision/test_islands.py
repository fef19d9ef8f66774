"""convert --dtype: a group of nodes in half with float32 nodes on every side and no weight of its
own buys nothing (rounding, Casts) and stays float32; a group holding a weight, or reading the
model's inputs or making its outputs, stays half. And where the runtime targeted has no half
kernel, a node computes in float32 from its weights stored in half. Checked with ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from rewriter.precision import convert_precision_proto
from rewriter.precision.islands import ISLAND
from rewriter.precision.regions import SIGNAL_PATH

RNG = np.random.default_rng(11)


def _model(nodes, inits, out_shape=(1, 4, 6, 6)):
    m = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 6, 6])],
                                  [h.make_tensor_value_info("y", T.FLOAT, list(out_shape))], inits),
                     opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _run(m, x):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _kept(report):
    return {k.label.split("'")[1]: k.reason for k in report.kept if "'" in k.label}


def _convs(between, extra_inits=()):
    """x -> Conv a -> ``between`` nodes (reading 'ca', making 'mid') -> Conv b -> y, both Convs kept."""
    inits = [nh.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3, "wa"),
             nh.from_array(RNG.standard_normal((4, 4, 1, 1)).astype(np.float32) * 0.3, "wb"), *extra_inits]
    nodes = [h.make_node("Conv", ["x", "wa"], ["ca"], pads=[1, 1, 1, 1], name="a"), *between,
             h.make_node("Conv", ["mid", "wb"], ["y"], name="b")]
    return _model(nodes, inits)


def test_a_weightless_group_between_float32_nodes_stays_float32():
    m = _convs([h.make_node("Clip", ["ca", "lo", "hi"], ["cl"], name="relu6"),
                h.make_node("Transpose", ["cl"], ["t"], perm=[0, 1, 3, 2], name="flip"),
                h.make_node("Transpose", ["t"], ["mid"], perm=[0, 1, 3, 2], name="back")],
               [nh.from_array(np.array(0.0, np.float32), "lo"), nh.from_array(np.array(6.0, np.float32), "hi")])
    r, report = convert_precision_proto(m, "float16", keep_op_types=("Conv",))
    kept = _kept(report)
    assert kept["relu6"] == kept["flip"] == kept["back"] == ISLAND and report.half_by_op == {}
    assert not [n for n in r.graph.node if n.op_type == "Cast"]  # nothing rounded, nothing added
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
    assert np.array_equal(_run(r, x), _run(m, x))


def test_a_group_holding_a_weight_stays_half():
    # the Relu holds no weight itself: it belongs to the group of the Add, which does
    m = _convs([h.make_node("Add", ["ca", "bias"], ["sh"], name="shift"), h.make_node("Relu", ["sh"], ["mid"])],
               [nh.from_array(RNG.standard_normal((1, 4, 1, 1)).astype(np.float32), "bias")])
    _, report = convert_precision_proto(m, "float16", keep_op_types=("Conv",))
    assert report.half_by_op == {"Add": 1, "Relu": 1}


def test_a_group_reading_the_input_or_making_the_output_stays_half():
    """A model computing on its inputs without weights is asked to compute in half: it does."""
    m = _model([h.make_node("Mul", ["x", "k"], ["s"], name="scale"), h.make_node("Sigmoid", ["s"], ["y"], name="sig")],
               [nh.from_array(np.array(0.5, np.float32), "k")], out_shape=(1, 3, 6, 6))
    _, report = convert_precision_proto(m, "float16")
    assert report.half_by_op == {"Mul": 1, "Sigmoid": 1}
    # one whose group reads the input and feeds float32 nodes only
    m = _convs([h.make_node("Relu", ["ca"], ["mid"], name="relu")])
    m.graph.node.insert(0, h.make_node("Mul", ["x", "k"], ["xs"], name="scale"))
    m.graph.node[1].input[0] = "xs"
    m.graph.initializer.append(nh.from_array(np.array(0.5, np.float32), "k"))
    _, report = convert_precision_proto(m, "float16", keep_op_types=("Conv",))
    assert _kept(report)["relu"] == ISLAND and report.half_by_op == {"Mul": 1}
    # and one whose group reads float32 nodes only but makes the output
    m = _convs([h.make_node("Relu", ["ca"], ["mid"], name="relu")])
    m.graph.node[-1].output[0] = "y_conv"
    m.graph.node.append(h.make_node("Sigmoid", ["y_conv"], ["y"], name="last"))
    _, report = convert_precision_proto(m, "float16", keep_op_types=("Conv",))
    assert _kept(report)["relu"] == ISLAND and report.half_by_op == {"Sigmoid": 1}


def test_a_node_the_runtime_has_no_half_kernel_for_computes_from_half_weights():
    from rewriter.targets import parse_target

    m = _convs([h.make_node("Relu", ["ca"], ["mid"], name="relu")])
    r, report = convert_precision_proto(m, "float16", target=parse_target("onnxruntime==1.17"))
    assert "no float16 CPU kernel for Conv" in _kept(report)["a"]
    assert {t.name: t.data_type for t in r.graph.initializer} == {"wa": T.FLOAT16, "wb": T.FLOAT16}
    assert report.applied.weights_stored_half == 2 and report.half_by_op == {}  # the Relu: an island
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
    want, got = _run(m, x), _run(r, x)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 2e-3


def test_an_stft_kept_for_the_runtime_keeps_its_window_float32():
    from rewriter.targets import parse_target

    n = 1024
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(256) / 256)).astype(np.float32)
    inits = [nh.from_array(window, "win"), nh.from_array(np.array(64, np.int64), "step"),
             nh.from_array(np.array([2], np.int64), "ax2")]
    nodes = [h.make_node("Unsqueeze", ["x", "ax2"], ["sig"], name="unsq"),
             h.make_node("STFT", ["sig", "step", "win"], ["y"], onesided=1, name="stft")]
    m = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, n])],
                                  [h.make_tensor_value_info("y", T.FLOAT, [1, None, 129, 2])], inits),
                     opset_imports=[h.make_opsetid("", 17)])
    r, report = convert_precision_proto(m, "float16", target=parse_target("onnxruntime==1.17"))
    assert _kept(report)["stft"] == SIGNAL_PATH
    assert next(t for t in r.graph.initializer if t.name == "win").data_type == T.FLOAT
