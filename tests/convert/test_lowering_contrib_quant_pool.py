"""com.microsoft QLinearSoftmax and QLinearGlobalAveragePool lowered to standard ONNX: ONNX Runtime's
integers (the original run by ONNX Runtime is the oracle) in ONNX Runtime and onnx.reference; the
softmax with a static and a run-time reduced length, both opset conventions, saturation of either
type; the pooling in both layouts, with static and symbolic spatial dims."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from onnx import TensorProto as T

from rewriter.convert.lower_ops import lower_ops
from rewriter.errors import RewriterError
from tests.convert.support.contrib_oracle import NP, com_model, qparams, random_q
from tests.convert.support.lowering_oracle import check_lowering

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
Q8 = [T.UINT8, T.INT8]
SOFTMAX_CASES = [((4, 10), -1, 13), ((3, 5, 7), 1, 13), ((3, 5, 7), 1, 11), ((2, 300), 1, 13), ((2, 3, 16), -1, 17),
                 ((6, 1), 1, 13)]


def _softmax(elem, shape, sx, sy, zy, axis, opset, dynamic):
    dims = [f"d{i}" for i in range(len(shape))] if dynamic else list(shape)
    inits = qparams("x", sx, 0, elem) + qparams("y", sy, zy, elem)
    return com_model("QLinearSoftmax", [("X", elem, dims), "x_s", "x_z", "y_s", "y_z"], [("Y", elem, dims)],
                     initializers=inits, axis=axis, opset=opset)


@pytest.mark.parametrize("elem", Q8)
@pytest.mark.parametrize("case", SOFTMAX_CASES)
@pytest.mark.parametrize("dynamic", [False, True])
def test_softmax(elem, case, dynamic):
    shape, axis, opset = case
    rng = np.random.default_rng(len(shape) * 100 + shape[-1] + dynamic)
    info = np.iinfo(NP[elem])
    for t in range(6):
        sx = np.float32(np.exp(rng.uniform(-6, 0)))
        sy = np.float32(1 / 256) if t % 2 else np.float32(np.exp(rng.uniform(-12, -3)))  # floor(1/sy) up to 1.6e5
        zy = info.min if t % 3 == 0 else int(rng.integers(info.min, info.max + 1))
        x = random_q(rng, elem, shape)
        if t == 1:
            x[...] = x.max()  # every element the maximum
        check_lowering(_softmax(elem, shape, sx, sy, zy, axis, opset, dynamic), {"X": x})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(Q8), st.floats(2.0 ** -8, 1.0, width=32), st.floats(2.0 ** -16, 2.0 ** -4, width=32),
       st.integers(1, 40), st.integers(0, 2 ** 32 - 1))
def test_softmax_any_scales(elem, sx, sy, width, seed):
    rng = np.random.default_rng(seed)
    info = np.iinfo(NP[elem])
    zy = int(rng.choice([info.min, 0, int(rng.integers(info.min, info.max + 1))]))
    model = _softmax(elem, (3, width), sx, sy, zy, -1, 13, bool(seed % 2))
    check_lowering(model, {"X": random_q(rng, elem, (3, width))})


def test_softmax_refuses_a_missing_opset():
    inits = qparams("x", 0.1, 0, T.UINT8) + qparams("y", 1 / 256, 0, T.UINT8)
    model = com_model("QLinearSoftmax", [("X", T.UINT8, [2, 3]), "x_s", "x_z", "y_s", "y_z"], [("Y", T.UINT8, [2, 3])],
                      initializers=inits, axis=-1)
    with pytest.raises(RewriterError, match="opset is missing"):
        lower_ops(model)


def _pool(elem, shape, last, sx, zx, sy, zy, dynamic):
    spatial = range(1, len(shape) - 1) if last else range(2, len(shape))
    out = [1 if i in spatial else d for i, d in enumerate(shape)]
    dims = [f"d{i}" for i in range(len(shape))] if dynamic else list(shape)
    out = [f"d{i}" if dynamic and i not in spatial else d for i, d in enumerate(out)]
    inits = qparams("x", sx, zx, elem) + qparams("y", sy, zy, elem)
    return com_model("QLinearGlobalAveragePool", [("X", elem, dims), "x_s", "x_z", "y_s", "y_z"], [("Y", elem, out)],
                     initializers=inits, channels_last=last)


@pytest.mark.parametrize("elem", Q8)
@pytest.mark.parametrize("shape,last", [((2, 3, 5, 5), 0), ((2, 5, 5, 3), 1), ((1, 17, 40), 0), ((2, 9, 7, 3, 2), 0),
                                        ((1, 1, 1, 1), 0), ((3, 20, 20, 1), 1)])
@pytest.mark.parametrize("dynamic", [False, True])
def test_global_average_pool(elem, shape, last, dynamic):
    rng = np.random.default_rng(sum(shape) + last + 10 * dynamic)
    info = np.iinfo(NP[elem])
    for _ in range(5):
        sx = np.float32(np.exp(rng.uniform(-5, 0)))
        sy = np.float32(sx * np.exp(rng.uniform(-2, 2)))
        zx, zy = (int(rng.integers(info.min, info.max + 1)) for _ in range(2))
        check_lowering(_pool(elem, shape, last, sx, zx, sy, zy, dynamic), {"X": random_q(rng, elem, shape)})


def test_global_average_pool_refuses_an_unknown_rank():
    model = _pool(T.UINT8, (1, 2, 3, 3), 0, 0.1, 0, 0.1, 0, False)
    model.graph.input[0].type.tensor_type.ClearField("shape")
    with pytest.raises(RewriterError, match="rank"):
        lower_ops(model)


AVERAGE_POOL_CASES = [
    ((1, 3, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((2, 4, 7, 9), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((2, 4, 7, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ((1, 2, 7, 7), {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 0, 1, 0],
                    "count_include_pad": 1}),
    ((1, 7, 7, 3), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "channels_last": 1}),
    ((2, 3, 10), {"kernel_shape": [4], "strides": [3], "pads": [2, 1]}),
    ((1, 2, 4, 5, 6), {"kernel_shape": [2, 2, 3], "strides": [1, 2, 2]}),
    ((1, 2, 7, 7), {"kernel_shape": [7, 7]}),
]


@pytest.mark.parametrize("elem", Q8)
@pytest.mark.parametrize("case", range(len(AVERAGE_POOL_CASES)))
def test_average_pool(elem, case):
    """Bit for bit: the float window sums in the kernel's order, padding, ceil mode, both counts."""
    shape, attrs = AVERAGE_POOL_CASES[case]
    rng = np.random.default_rng(case * 2 + elem)
    info = np.iinfo(NP[elem])
    for _ in range(4):
        sx = np.float32(np.exp(rng.uniform(-5, 0)))
        sy = np.float32(sx * np.exp(rng.uniform(-1, 1)))
        zx, zy = (int(rng.integers(info.min, info.max + 1)) for _ in range(2))
        inits = qparams("x", sx, zx, elem) + qparams("y", sy, zy, elem)
        model = com_model("QLinearAveragePool", [("X", elem, list(shape)), "x_s", "x_z", "y_s", "y_z"],
                          [("Y", elem, [None] * len(shape))], initializers=inits, **attrs)
        check_lowering(model, {"X": random_q(rng, elem, shape)})


def test_average_pool_refuses_dynamic_spatial_dims():
    inits = qparams("x", 0.1, 0, T.UINT8) + qparams("y", 0.1, 0, T.UINT8)
    model = com_model("QLinearAveragePool", [("X", T.UINT8, [1, 2, "h", 4]), "x_s", "x_z", "y_s", "y_z"],
                      [("Y", T.UINT8, [None] * 4)], initializers=inits, kernel_shape=[2, 2])
    with pytest.raises(RewriterError, match="not static"):
        lower_ops(model)


def _dfl(elem, sx, sy, zy, batch="batch", anchors="anchors", before=True):
    """YOLOv8's DFL head as onnxruntime.quantization writes it (nudenet_320n_qop): x [b, 64, a] (after a
    QLinearSigmoid when ``before``, so ONNX's inference knows nothing of it) reshaped to the shape
    Concat(b, 4, 16, a) read from its own Shape, transposed to [b, 16, 4, a], QLinearSoftmax over axis
    1 (16 wide)."""
    from onnx import helper, numpy_helper

    inits = qparams("x", sx, 0, elem) + qparams("y", sy, zy, elem) + [
        numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
        (("i0", 0), ("i2", 2), ("four", [4]), ("sixteen", [16]), ("ax0", [0]))]
    com = "com.microsoft"
    nodes = [helper.make_node("QLinearSigmoid", ["X", "x_s", "x_z", "x_s", "x_z"], ["xs"], domain=com) if before
             else helper.make_node("Identity", ["X"], ["xs"]),
             helper.make_node("Shape", ["xs"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"], axis=0), helper.make_node("Gather", ["s", "i2"], ["a"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax0"], ["bu"]), helper.make_node("Unsqueeze", ["a", "ax0"], ["au"]),
             helper.make_node("Concat", ["bu", "four", "sixteen", "au"], ["shape"], axis=0),
             helper.make_node("Reshape", ["xs", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("QLinearSoftmax", ["t", "x_s", "x_z", "y_s", "y_z"], ["Y"], domain=com, axis=1, opset=13,
                              name="dfl")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", elem, [batch, 64, anchors])],
                              [helper.make_tensor_value_info("Y", elem, [batch, 16, 4, anchors])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(com, 1)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("elem", Q8)
@pytest.mark.parametrize("dims", [("batch", "anchors"), (1, 40)])
@pytest.mark.parametrize("before", [True, False])
def test_softmax_after_a_reshape_to_dims_read_from_a_shape(elem, dims, before):
    """The reduced length, 16, is a constant of the Reshape's computed shape: the lowering reads it
    there (the kernel's own table, no run-time choice of table), whatever the other dims."""
    rng = np.random.default_rng(7 + before)
    info = np.iinfo(NP[elem])
    model = _dfl(elem, np.float32(0.05), np.float32(1 / 256), info.min, *dims, before=before)
    lowered = check_lowering(model, {"X": random_q(rng, elem, (2 if dims[0] == "batch" else 1, 64, 40))})
    ops = {n.op_type for n in lowered.graph.node}
    assert not {"LessOrEqual", "Range", "Exp"} & ops, ops  # the 16-wide table is a constant


@pytest.mark.parametrize("shape, dims, want", [
    (["b", [4], [16], "a"], [2, 64, 40], [2, 4, 16, 40]),           # read from the Shape: static input
    (["b", [4], [16], "a"], ["n", 64, "m"], [None, 4, 16, None]),   # only the constants are known
    ([[0], [4], [16], [-1]], [2, 64, 40], [2, 4, 16, 40]),           # 0 copies the input's dim, -1 the rest
    ([[0], [4], [16], [-1]], ["n", 64, 40], [None, 4, 16, None]),
    ([[0], [-1], [16], [8]], [3, 64, 40], [3, 20, 16, 8]),
])
def test_reshape_dims_read_from_the_known_elements_of_its_shape(shape, dims, want):
    """ONNX's inference knows nothing after a contrib node; the types the lowerings read give a Reshape
    the dims its computed shape's known elements say, checked against ONNX Runtime's output shape."""
    from onnx import helper, numpy_helper

    from rewriter.convert.lowering.contrib_types import dims_of
    from rewriter.convert.lowering.types import model_types

    inits = qparams("x", 0.05, 0, T.UINT8) + [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                                              (("i0", 0), ("i2", 2), ("ax0", [0]))]
    nodes = [helper.make_node("QLinearSigmoid", ["X", "x_s", "x_z", "x_s", "x_z"], ["xs"], domain="com.microsoft"),
             helper.make_node("Shape", ["xs"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b0"], axis=0), helper.make_node("Gather", ["s", "i2"], ["a0"], axis=0),
             helper.make_node("Unsqueeze", ["b0", "ax0"], ["b"]), helper.make_node("Unsqueeze", ["a0", "ax0"], ["a"])]
    parts = []
    for k, part in enumerate(shape):
        if isinstance(part, list):
            inits.append(numpy_helper.from_array(np.array(part, np.int64), f"c{k}"))
            part = f"c{k}"
        parts.append(part)
    nodes += [helper.make_node("Concat", parts, ["shape"], axis=0), helper.make_node("Reshape", ["xs", "shape"], ["Y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", T.UINT8, dims)],
                              [helper.make_tensor_value_info("Y", T.UINT8, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    got = dims_of(model_types(model)["Y"])[1]
    assert [d if isinstance(d, int) else None for d in got] == want
    import onnxruntime as ort

    static = [d if isinstance(d, int) else 2 for d in dims]
    x = np.zeros(static, np.uint8)
    out = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    assert all(w is None or w == o for w, o in zip(want, out.shape)) and len(out.shape) == len(want)
