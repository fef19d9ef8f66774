"""A runtime target is one typed object: its runtime and release come from the parser, never
from its name. A profile is a profile whatever its name says: it never borrows a named runtime's
tables (ONNX Runtime's half kernels, inlining quirks).

Oracles: ONNX Runtime's half-kernel table as shipped (the named release's decision), and the
profile file's own contents."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import rewriter
from rewriter.cli.main import main
from rewriter.targets import parse_target
from rewriter.targets.half_kernels import has_half_kernel


def _model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Softmax", ["m"], ["y"], name="sm", axis=-1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _profile(tmp_path, name: str) -> str:
    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"name": name, "opsets": {"": 17}, "ir_version": 8}))
    return str(path)


def _runs_half(model, node) -> bool:
    """Whether ``node`` computes in float16 (its output's type, as ONNX shape inference gives it)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in (*inferred.graph.value_info, *inferred.graph.output)}
    return types[node.output[0]] == TensorProto.FLOAT16


def test_a_named_release_is_typed():
    t = parse_target("onnxruntime==1.15.1")
    assert (t.runtime, t.release, t.release_of("onnxruntime"), t.release_of("tensorrt")) == \
        ("onnxruntime", (1, 15), "1.15", None)
    between = parse_target("tensorrt==8.7")  # between 8.6 and 10.0: 8.6's data, the release asked kept
    assert between.runtime == "tensorrt" and between.release == (8, 7) and between.data_release == "tensorrt 8.6"


@pytest.mark.parametrize("name", ["onnxruntime", "onnxruntime 1.15 (our fork)", "tensorrt 8.6"])
def test_a_profile_is_a_profile_whatever_its_name(name, tmp_path):
    t = parse_target(_profile(tmp_path, name))
    assert t.runtime is None and t.release is None and t.release_of("onnxruntime") is None and not t.rules


def test_a_profile_named_like_onnxruntime_converts_to_half(tmp_path):
    """It used to be an internal IndexError ("onnxruntime".split()[1])."""
    out = tmp_path / "out.onnx"
    src = tmp_path / "m.onnx"
    onnx.save(_model(), src)
    assert main(["convert", str(src), "--dtype", "float16", "--target", _profile(tmp_path, "onnxruntime"),
                 "-o", str(out), "-q", "--no-verify"]) == 0
    assert _runs_half(onnx.load(out), next(n for n in onnx.load(out).graph.node if n.name == "sm"))


def test_a_profile_named_like_a_release_does_not_take_its_half_kernel_table(tmp_path):
    """ONNX Runtime 1.15 has no float16 CPU kernel for Softmax-13 (the shipped table says so): for
    that release the node stays float32; for a profile that merely has the name, it runs in half."""
    assert has_half_kernel("1.15", "", "Softmax", 13, "float16") is False
    sm = lambda m: next(n for n in m.graph.node if n.name == "sm")  # noqa: E731
    release = rewriter.convert_precision(_model(), "float16", target="onnxruntime==1.15")
    fork = rewriter.convert_precision(_model(), "float16", target=_profile(tmp_path, "onnxruntime 1.15 (our fork)"))
    assert not _runs_half(release, sm(release))
    assert _runs_half(fork, sm(fork))
