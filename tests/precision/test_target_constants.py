"""--target with a runtime that has no half kernel for a node: the node computes in float32, its
constants stored in half where they fit; those that do not fit (an epsilon of 1e-12 flushes to 0,
a magnitude beyond 65504 becomes inf) stay float32 (issue 39).

Oracles: the tensors' bytes against the source's, and ONNX Runtime computing the source's outputs.
(ONNX Runtime loads a float16 Add all the same, inserting Casts itself: the premise, no float16 CPU
kernel for Add, Mul and Div in the installed release, is the kernel table's, checked in the summary.)
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

RELEASE = ".".join(ort.__version__.split(".")[:2])  # the installed one: its result runs here
F16_MAX = float(np.finfo(np.float16).max)


def _vi(name, shape):
    return h.make_tensor_value_info(name, T.FLOAT, shape)


def _model():
    """y = 1 / (x*x + eps) * big + x * w: Add, Div and Mul, which ONNX Runtime's CPU provider runs
    only in float32; eps = 1e-12 (below float16's range), big beyond 65504, w fits."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array(np.array(1e-12, np.float32), "eps"),
             nh.from_array(np.array([1e5, -7e4, 3.0, 1.0], np.float32), "big"),
             nh.from_array(rng.standard_normal(4).astype(np.float32), "w"),
             nh.from_array(np.array(1.0, np.float32), "one")]
    nodes = [h.make_node("Mul", ["x", "x"], ["sq"], name="square"),
             h.make_node("Add", ["sq", "eps"], ["den"], name="add_eps"),
             h.make_node("Div", ["one", "den"], ["inv"], name="invert"),
             h.make_node("Mul", ["inv", "big"], ["scaled"], name="scale_big"),
             h.make_node("Mul", ["x", "w"], ["xw"], name="weigh"),
             h.make_node("Add", ["scaled", "xw"], ["y"], name="sum")]
    graph = h.make_graph(nodes, "g", [_vi("x", [4])], [_vi("y", [4])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def _run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def test_constants_that_do_not_fit_half_stay_float32_for_a_node_without_a_half_kernel(tmp_path):
    model = _model()
    src, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(model, src)
    run = subprocess.run([sys.executable, "-m", "rewriter", "convert", str(src), "--target", f"onnxruntime=={RELEASE}",
                          "--dtype", "float16", "-o", str(out)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    for op in ("Add", "Mul", "Div"):
        assert f"no float16 CPU kernel for {op}-14 in onnxruntime {RELEASE}" in run.stdout, run.stdout
    result = onnx.load(out)
    onnx.checker.check_model(result, full_check=True)
    source = {t.name: t for t in model.graph.initializer}
    got = {t.name: t for t in result.graph.initializer}
    for name in ("eps", "big"):  # the values half cannot hold: float32, the source's own bytes
        assert got[name].data_type == T.FLOAT, name
        np.testing.assert_array_equal(nh.to_array(got[name]), nh.to_array(source[name]))
    # the control: a weight that fits is stored in half (the nodes compute in float32 all the same)
    assert got["w"].data_type == T.FLOAT16
    assert sorted(n.input[0] for n in result.graph.node if n.op_type == "Cast") == ["one", "w"]
    x = np.array([0.0, 1e-3, -2.0, 0.5], np.float32)  # x = 0: 1 / 1e-12 (inf if eps were 0)
    want, have = _run(model, {"x": x}), _run(result, {"x": x})
    assert np.isfinite(have).all() and np.isfinite(want).all()
    np.testing.assert_allclose(have, want, rtol=1e-3)
    assert abs(float(want[1])) > F16_MAX  # (the outputs are float32: beyond half's range is fine)
