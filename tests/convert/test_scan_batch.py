"""Scan 8 -> 9: Scan-8's batch axis (rewriter/convert/adapters/scan.py).

Batch 1 is squeezed off around a Scan-9 with the same body; a larger static batch is unrolled
inside the body (Scan-9 along axis 1 of the batched tensors). Each converted model must pass
the full checker and give, under ONNX Runtime, exactly what the original Scan-8 model gives
under ONNX Runtime (onnx.reference cannot run Scan-8: it takes the empty sequence_lens for a
state) and what numpy computes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
import onnx.reference
import pytest
from onnx import TensorProto, helper, numpy_helper

from rewriter.convert import convert_model, registry, steps
from rewriter.convert.planner import ConversionBlocked

LATEST = onnx.defs.onnx_opset_version()
TARGETS = (9, 11, 13, 18, LATEST)
F = TensorProto.FLOAT


def _cumsum_body(width: int = 2) -> onnx.GraphProto:
    """ONNX's Scan example: a running sum as the state, each partial sum as the scan output."""
    return helper.make_graph(
        [helper.make_node("Add", ["sum_in", "next"], ["sum_out"]),
         helper.make_node("Identity", ["sum_out"], ["scan_out"])], "body",
        [helper.make_tensor_value_info("sum_in", F, [width]), helper.make_tensor_value_info("next", F, [width])],
        [helper.make_tensor_value_info("sum_out", F, [width]), helper.make_tensor_value_info("scan_out", F, [width])])


def _scan_model(batch, seq=3, width=2, directions=None, body=None, seq_lens=None, initializers=(),
                name="scan") -> onnx.ModelProto:
    """Scan-8 of ``body`` (default: the running sum) over initial [batch, width] and x [batch, seq, width].
    ``seq_lens``: "input" for a graph input, an array for an initializer."""
    attrs = {} if directions is None else {"directions": directions}
    inputs = [helper.make_tensor_value_info("initial", F, [batch, width]),
              helper.make_tensor_value_info("x", F, [batch, seq, width])]
    inits = list(initializers)
    lens = ""
    if isinstance(seq_lens, str):
        lens = "lens"
        inputs.insert(0, helper.make_tensor_value_info("lens", TensorProto.INT64, [batch]))
    elif seq_lens is not None:
        lens = "lens"
        inits.append(numpy_helper.from_array(np.asarray(seq_lens, dtype=np.int64), "lens"))
    node = helper.make_node("Scan", [lens, "initial", "x"], ["y", "z"], name=name, body=body or _cumsum_body(width),
                            num_scan_inputs=1, **attrs)
    graph = helper.make_graph([node], "g", inputs,
                              [helper.make_tensor_value_info("y", F, [batch, width]),
                               helper.make_tensor_value_info("z", F, [batch, seq, width])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=4)


def _ort(model, feeds):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def _feeds(batch, seq=3, width=2):
    rng = np.random.default_rng(batch * 100 + seq)
    return {"initial": rng.integers(-5, 5, (batch, width)).astype(np.float32),
            "x": rng.integers(-9, 9, (batch, seq, width)).astype(np.float32)}


def _cumsum_expected(initial, x, reverse=False):
    """Exact: small integers in float32."""
    order = x[:, ::-1] if reverse else x
    z = initial[:, None, :] + np.cumsum(order, axis=1)
    return [z[:, -1], z]


def _convert(model, target):
    converted, report = convert_model(model, target)
    onnx.checker.check_model(converted, full_check=True)
    assert [o.version for o in converted.opset_import if o.domain in ("", "ai.onnx")] == [target]
    assert [o.name for o in converted.graph.output] == ["y", "z"]
    return converted, report


def _scans(model):
    return [n for n in model.graph.node if n.op_type == "Scan"]


# ---------------------------------------------------------------- the step is an adapter now


def test_the_step_has_an_adapter():
    assert steps.step_kind("Scan", 8, 9) == "own"
    assert registry.lookup("Scan", 8, 9) is not None and registry.lookup("Scan", 9, 8) is not None
    assert ("Scan", 8, 9) not in steps.IMPOSSIBLE


# ---------------------------------------------------------------- batch 1


@pytest.mark.parametrize("directions", [None, [0], [1]])
@pytest.mark.parametrize("target", TARGETS)
def test_batch_of_one(target, directions):
    model = _scan_model(1, directions=directions)
    feeds = _feeds(1)
    converted, report = _convert(model, target)
    (scan,) = _scans(converted)
    attrs = {a.name: helper.get_attribute_value(a) for a in scan.attribute}
    assert "directions" not in attrs and len(scan.input) == 2
    assert attrs.get("scan_input_directions", [0]) == (directions or [0])
    assert report.changes["Scan-8 batch of 1 squeezed off around Scan-9"] == 1
    body = attrs["body"]
    assert [n.op_type for n in body.node] == ["Add", "Identity"]  # the body is untouched
    expected = _cumsum_expected(feeds["initial"], feeds["x"], reverse=directions == [1])
    got = _ort(converted, feeds)
    original = _ort(model, feeds)
    for g, o, e in zip(got, original, expected):
        assert g.shape == e.shape and g.dtype == np.float32
        np.testing.assert_array_equal(g, e)
        np.testing.assert_array_equal(g, o)
    if directions != [1]:  # onnx.reference runs Scan-9 forward only
        ref = onnx.reference.ReferenceEvaluator(converted).run(None, feeds)
        for r, e in zip(ref, expected):
            np.testing.assert_array_equal(r, e)


def test_batch_of_one_with_a_subgraph_in_the_body():
    """Nothing is copied for batch 1: a body holding an If converts, the If's branches too."""
    then = helper.make_graph([helper.make_node("Unsqueeze", ["next"], ["u"], axes=[0]),
                              helper.make_node("Squeeze", ["u"], ["t"], axes=[0])], "then", [],
                             [helper.make_tensor_value_info("t", F, [2])])
    other = helper.make_graph([helper.make_node("Neg", ["next"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, [2])])
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(np.array(True), "c")),
         helper.make_node("If", ["cond"], ["picked"], then_branch=then, else_branch=other),
         helper.make_node("Add", ["sum_in", "picked"], ["sum_out"]),
         helper.make_node("Identity", ["sum_out"], ["scan_out"])], "body",
        [helper.make_tensor_value_info("sum_in", F, [2]), helper.make_tensor_value_info("next", F, [2])],
        [helper.make_tensor_value_info("sum_out", F, [2]), helper.make_tensor_value_info("scan_out", F, [2])])
    model = _scan_model(1, body=body)
    feeds = _feeds(1)
    expected = _cumsum_expected(feeds["initial"], feeds["x"])
    for target in (11, 13, LATEST):
        converted, _ = _convert(model, target)
        for g, e in zip(_ort(converted, feeds), expected):
            np.testing.assert_array_equal(g, e)


# ---------------------------------------------------------------- batch > 1: unrolled in the body


@pytest.mark.parametrize("batch, directions", [(2, None), (3, None), (3, [1]), (2, [0])])
@pytest.mark.parametrize("target", TARGETS)
def test_batch_unrolled(target, batch, directions):
    model = _scan_model(batch, seq=4, directions=directions)
    feeds = _feeds(batch, seq=4)
    converted, report = _convert(model, target)
    (scan,) = _scans(converted)
    assert list(scan.input) == ["initial", "x"] and list(scan.output) == ["y", "z"] and scan.name == "scan"
    assert len(converted.graph.node) == 1  # nothing around the node: the batch lives in the body
    attrs = {a.name: helper.get_attribute_value(a) for a in scan.attribute}
    assert attrs["scan_input_axes"] == [1] and attrs["scan_output_axes"] == [1]
    assert attrs.get("scan_input_directions", [0]) == (directions or [0])
    assert report.changes["Scan-8 batch unrolled in the body of Scan-9"] == 1
    ops = [n.op_type for n in attrs["body"].node]
    assert ops.count("Add") == batch and ops.count("Gather") == 2 * batch and ops.count("Concat") == 2
    expected = _cumsum_expected(feeds["initial"], feeds["x"], reverse=directions == [1])
    got = _ort(converted, feeds)
    original = _ort(model, feeds)
    for g, o, e in zip(got, original, expected):
        assert g.shape == e.shape and g.dtype == np.float32
        np.testing.assert_array_equal(g, e)
        np.testing.assert_array_equal(g, o)


def _busy_body() -> onnx.GraphProto:
    """A body whose ops need converting (Clip-6 min/max, Unsqueeze/ReduceSum axes, Softmax-1)
    and that reads an outer value ('scale'): its copies need types to convert."""
    return helper.make_graph(
        [helper.make_node("Clip", ["next"], ["clipped"], min=-3.0, max=4.0),
         helper.make_node("Unsqueeze", ["clipped"], ["u"], axes=[0]),
         helper.make_node("ReduceSum", ["u"], ["r"], axes=[0], keepdims=0),
         helper.make_node("Mul", ["r", "scale"], ["scaled"]),
         helper.make_node("Add", ["sum_in", "scaled"], ["sum_out"]),
         helper.make_node("Softmax", ["sum_out"], ["soft"], axis=0)], "body",
        [helper.make_tensor_value_info("sum_in", F, [2]), helper.make_tensor_value_info("next", F, [2])],
        [helper.make_tensor_value_info("sum_out", F, [2]), helper.make_tensor_value_info("soft", F, [2])])


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("target", TARGETS)
def test_a_body_whose_ops_convert_too(target, batch):
    scale = numpy_helper.from_array(np.array([2.0, 0.5], np.float32), "scale")
    model = _scan_model(batch, seq=3, body=_busy_body(), initializers=[scale])
    feeds = _feeds(batch)
    converted, _ = _convert(model, target)
    if target >= 13:  # every copy's Softmax is seen on the last axis of a 1-D value: typed like the original
        (scan,) = _scans(converted)
        body = next(a.g for a in scan.attribute if a.name == "body")
        ops = [n.op_type for n in body.node]
        assert ops.count("Softmax") == batch and "Flatten" not in ops, ops
    state = feeds["initial"][:, None, :] + np.cumsum(np.clip(feeds["x"], -3, 4) * np.array([2.0, 0.5]), axis=1)
    soft = np.exp(state - state.max(-1, keepdims=True))
    soft /= soft.sum(-1, keepdims=True)
    got = _ort(converted, feeds)
    original = _ort(model, feeds)
    np.testing.assert_array_equal(got[0], state[:, -1].astype(np.float32))
    np.testing.assert_allclose(got[1], soft, rtol=1e-6, atol=1e-7)
    for g, o in zip(got, original):
        np.testing.assert_allclose(g, o, rtol=1e-6, atol=1e-7)


def _edge_model(batch, seq=3, directions=(0, 1)) -> onnx.ModelProto:
    """Two states (one float running sum, one int64 scalar the body passes straight through),
    two scan inputs (the second int64, scanned in ``directions[1]``), a body output listed twice,
    a body initializer, and a scan output read from the outer graph through an Identity."""
    I = TensorProto.INT64
    body = helper.make_graph(
        [helper.make_node("Add", ["s1", "x"], ["s1_out"]),
         helper.make_node("Mul", ["w", "two"], ["b"]),
         helper.make_node("Identity", ["k"], ["kk"])], "body",
        [helper.make_tensor_value_info("s1", F, [2]), helper.make_tensor_value_info("s2", I, []),
         helper.make_tensor_value_info("x", F, [2]), helper.make_tensor_value_info("w", I, [3])],
        [helper.make_tensor_value_info("s1_out", F, [2]), helper.make_tensor_value_info("s2", I, []),
         helper.make_tensor_value_info("s1_out", F, [2]), helper.make_tensor_value_info("b", I, [3]),
         helper.make_tensor_value_info("kk", F, [2])],
        initializer=[numpy_helper.from_array(np.array(2, np.int64), "two")])
    node = helper.make_node("Scan", ["", "s1i", "s2i", "xi", "wi"], ["o1", "o2", "a", "bb", "c"], name="scan",
                            body=body, num_scan_inputs=2, directions=list(directions))
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("s1i", F, [batch, 2]), helper.make_tensor_value_info("s2i", I, [batch]),
         helper.make_tensor_value_info("xi", F, [batch, seq, 2]),
         helper.make_tensor_value_info("wi", I, [batch, seq, 3])],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in
         [("o1", F, [batch, 2]), ("o2", I, [batch]), ("a", F, [batch, seq, 2]), ("bb", I, [batch, seq, 3]),
          ("c", F, [batch, seq, 2])]],
        initializer=[numpy_helper.from_array(np.array([7, 8], np.float32), "k")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=4)


def _edge_case(batch, directions, seq=3):
    rng = np.random.default_rng(batch)
    feeds = {"s1i": rng.integers(-5, 5, (batch, 2)).astype(np.float32), "s2i": np.arange(batch, dtype=np.int64) + 5,
             "xi": rng.integers(-5, 5, (batch, seq, 2)).astype(np.float32), "wi": rng.integers(0, 9, (batch, seq, 3))}
    a = feeds["s1i"][:, None] + np.cumsum(feeds["xi"], axis=1)
    w = feeds["wi"][:, ::-1] if directions[1] else feeds["wi"]
    expected = [a[:, -1], feeds["s2i"], a, w * 2, np.broadcast_to(np.array([7, 8], np.float32), (batch, seq, 2))]
    return _edge_model(batch, seq, directions), feeds, expected


@pytest.mark.parametrize("batch", [2, 4])
@pytest.mark.parametrize("target", TARGETS)
def test_unrolled_body_edge_cases(target, batch):
    """Under ONNX Runtime against numpy (ORT's own Scan returns garbage for the original here: it
    mishandles a body output that is a body input or that is listed twice; in the unrolled body
    every output is a Concat)."""
    model, feeds, expected = _edge_case(batch, (0, 1))
    converted, _ = convert_model(model, target)
    onnx.checker.check_model(converted, full_check=True)
    for g, e in zip(_ort(converted, feeds), expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("target", [9, 11, 13, LATEST])
def test_batch_of_one_edge_cases(target):
    """Batch 1 leaves such a body as it is: checked with onnx.reference (forward scans only)."""
    model, feeds, expected = _edge_case(1, (0, 0))
    converted, _ = convert_model(model, target)
    onnx.checker.check_model(converted, full_check=True)
    for g, e in zip(onnx.reference.ReferenceEvaluator(converted).run(None, feeds), expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


def test_test_scan_sum_backend_case():
    """The official backend case (opset 8, batch 1): converts and reproduces its outputs."""
    from tests.oracle import backend_cases

    (case,) = [c for c in backend_cases("Scan") if c.name == "test_scan_sum"]
    inputs, expected = case.data_sets[0]
    feeds = {vi.name: numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)
             for vi, v in zip(case.model.graph.input, inputs)}
    for target in (9, 11, 13, 17, 18, LATEST):
        converted, _ = convert_model(case.model, target)
        onnx.checker.check_model(converted, full_check=True)
        for g, e in zip(_ort(converted, feeds), expected):
            np.testing.assert_array_equal(g, np.asarray(e))


# ---------------------------------------------------------------- sequence_lens


def test_sequence_lens_as_a_graph_input_is_refused():
    model = _scan_model(2, seq_lens="input", name="my_scan")
    with pytest.raises(ConversionBlocked) as info:
        convert_model(model, 13)
    message = str(info.value)
    assert "my_scan" in message and "sequence_lens" in message and "8 -> 9" in message
    (blocker,) = info.value.blockers
    assert blocker.op == "Scan" and blocker.step == "8 -> 9" and "my_scan" in blocker.node


def test_sequence_lens_shorter_than_the_sequence_is_refused():
    model = _scan_model(2, seq=3, seq_lens=[3, 2], name="my_scan")
    with pytest.raises(ConversionBlocked, match="my_scan.*sequence_lens"):
        convert_model(model, 11)


@pytest.mark.parametrize("batch", [1, 2])
def test_sequence_lens_of_the_full_length_is_dropped(batch):
    model = _scan_model(batch, seq=3, seq_lens=[3] * batch)
    feeds = _feeds(batch)
    converted, _ = _convert(model, 13)
    (scan,) = _scans(converted)
    assert "lens" not in scan.input and "lens" not in [t.name for t in converted.graph.initializer]
    expected = _cumsum_expected(feeds["initial"], feeds["x"])
    for g, o, e in zip(_ort(converted, feeds), _ort(model, feeds), expected):
        np.testing.assert_array_equal(g, e)
        np.testing.assert_array_equal(g, o)


# ---------------------------------------------------------------- other refusals


def test_unknown_batch_size_is_refused():
    model = _scan_model(1, name="my_scan")
    for vi in [*model.graph.input, *model.graph.output]:
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    with pytest.raises(ConversionBlocked, match="my_scan.*batch size.*not known statically"):
        convert_model(model, 13)


def test_batch_sizes_that_disagree_are_refused():
    model = _scan_model(2, name="my_scan")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1  # initial [1, 2], x [2, 3, 2]
    with pytest.raises(ConversionBlocked, match="my_scan.*disagree on the batch size"):
        convert_model(model, 13)


def test_a_batch_too_large_to_unroll_is_refused():
    model = _scan_model(65, name="my_scan")
    with pytest.raises(ConversionBlocked, match="my_scan.*at most 64"):
        convert_model(model, 13)


def test_a_batch_with_a_subgraph_in_the_body_is_refused():
    branch = helper.make_graph([helper.make_node("Identity", ["next"], ["t"])], "b", [],
                               [helper.make_tensor_value_info("t", F, [2])])
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["cond"], value=numpy_helper.from_array(np.array(True), "c")),
         helper.make_node("If", ["cond"], ["picked"], then_branch=branch, else_branch=branch),
         helper.make_node("Add", ["sum_in", "picked"], ["sum_out"]),
         helper.make_node("Identity", ["sum_out"], ["scan_out"])], "body",
        [helper.make_tensor_value_info("sum_in", F, [2]), helper.make_tensor_value_info("next", F, [2])],
        [helper.make_tensor_value_info("sum_out", F, [2]), helper.make_tensor_value_info("scan_out", F, [2])])
    with pytest.raises(ConversionBlocked, match="my_scan.*subgraphs"):
        convert_model(_scan_model(2, body=body, name="my_scan"), 13)


def test_scan_9_down_to_8_is_refused():
    body = _cumsum_body()
    node = helper.make_node("Scan", ["initial", "x"], ["y", "z"], name="s9", body=body, num_scan_inputs=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("initial", F, [2]),
                                            helper.make_tensor_value_info("x", F, [3, 2])],
                              [helper.make_tensor_value_info("y", F, [2]),
                               helper.make_tensor_value_info("z", F, [3, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=4)
    with pytest.raises(ConversionBlocked, match="s9.*9 -> 8"):
        convert_model(model, 8)
