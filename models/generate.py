"""Regenerate the sample models in this directory, deterministically.

    python models/generate.py            # writes models/*.onnx
    python models/generate.py --check    # exit 1 if a committed file differs

The ReduceProd examples follow the ONNX operator docs: data of shape [3, 2, 2]
([[[1,2],[3,4]],[[5,6],[7,8]],[[9,10],[11,12]]] in the docs), axes [1] with keepdims
0 and 1, default axes, and negative axes [-2], each at opsets 1, 11, 13 and 18 (negative
axes only from 11, where they became legal). ``foldable_opset13.onnx`` is the one ``fold`` and
``optimize`` visibly shrink (a ReduceProd over a weight, Shape -> ReduceProd, a dead node).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = pathlib.Path(__file__).resolve().parent
OPSETS = (1, 11, 13, 18)
# (name, axes, keepdims): the operator docs' examples
EXAMPLES = (
    ("keepdims0", [1], 0),
    ("keepdims1", [1], 1),
    ("default_axes", None, 1),
    ("negative_axes", [-2], 1),
)
DATA = np.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]], [[9, 10], [11, 12]]], dtype=np.float32)


def _ir_version(opset: int) -> int:
    return max(3, helper.find_min_ir_version_for([helper.make_opsetid("", opset)]))


def _model(graph, opset: int, functions=(), extra_opsets=()) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", opset), *extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions),
                              producer_name="rewriter-samples", producer_version="1")
    model.ir_version = _ir_version(opset)
    return model


def _out_shape(axes, keepdims):
    reduced = range(3) if axes is None else [a % 3 for a in axes]
    return [1 if i in reduced else d for i, d in enumerate(DATA.shape)
            if keepdims or i not in reduced]


def reduce_prod_node(opset, inputs, output, axes, keepdims, initializers, name):
    """A ReduceProd in the form of ``opset``: attribute axes below 18, an input from 18."""
    attrs = {"keepdims": keepdims}
    inputs = list(inputs)
    if axes is not None:
        if opset >= 18:
            initializers.append(numpy_helper.from_array(np.array(axes, dtype=np.int64), f"{name}_axes"))
            inputs.append(f"{name}_axes")
        else:
            attrs["axes"] = axes
    return helper.make_node("ReduceProd", inputs, [output], name=name, **attrs)


def example_model(opset, axes, keepdims):
    inits = []
    node = reduce_prod_node(opset, ["data"], "reduced", axes, keepdims, inits, "reduce_prod")
    graph = helper.make_graph(
        [node], "reduce_prod_example",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, list(DATA.shape))],
        [helper.make_tensor_value_info("reduced", TensorProto.FLOAT, _out_shape(axes, keepdims))],
        inits,
    )
    return _model(graph, opset)


def if_model(opset=13):
    """ReduceProd inside both branches of an If."""
    then_g = helper.make_graph(
        [helper.make_node("ReduceProd", ["data"], ["t"], name="then_prod", axes=[1], keepdims=0)],
        "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, 2])])
    else_g = helper.make_graph(
        [helper.make_node("ReduceProd", ["data"], ["e"], name="else_prod", axes=[-1], keepdims=0)],
        "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3, 2])])
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["out"], name="branch", then_branch=then_g, else_branch=else_g)],
        "reduce_prod_in_if",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, list(DATA.shape)),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3, 2])])
    return _model(graph, opset)


def function_model(opset=13):
    """A model-local function whose body uses ReduceProd, called from the main graph."""
    fn = helper.make_function(
        "local", "ProdRows", ["x"], ["y"],
        [helper.make_node("ReduceProd", ["x"], ["y"], name="fn_prod", axes=[-1], keepdims=1)],
        opset_imports=[helper.make_opsetid("", opset)])
    graph = helper.make_graph(
        [helper.make_node("ProdRows", ["data"], ["out"], name="call", domain="local")],
        "reduce_prod_in_function",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, list(DATA.shape))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3, 2, 1])])
    return _model(graph, opset, functions=[fn], extra_opsets=[helper.make_opsetid("local", 1)])


def mixed_model(opset=13):
    """ReduceProd beside ops whose schemas also change between 13 and 18 (Relu, Add, ReduceMean)."""
    inits = [numpy_helper.from_array(np.full([2], 0.5, dtype=np.float32), "bias")]
    nodes = [
        helper.make_node("Relu", ["data"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "bias"], ["a"], name="add"),
        helper.make_node("ReduceProd", ["a"], ["p"], name="prod", axes=[1], keepdims=0),
        helper.make_node("ReduceMean", ["a"], ["m"], name="mean", axes=[1], keepdims=0),
        helper.make_node("Mul", ["p", "m"], ["out"], name="mul"),
    ]
    graph = helper.make_graph(
        nodes, "mixed",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, list(DATA.shape))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [3, 2])], inits)
    return _model(graph, opset)


def foldable_model(opset=13):
    """What ``fold`` and ``optimize`` visibly shrink, as exporters write it: a ReduceProd over a
    weight (a per-channel scale computed at load time), the ``Shape -> ReduceProd`` number-of-
    elements pattern over an input of static shape, and a dead branch nothing reads."""
    rng = np.random.default_rng(13)
    weight = (rng.uniform(0.9, 1.1, (16, 64))).astype(np.float32)
    inits = [numpy_helper.from_array(weight, "scale_factors")]
    nodes = [
        helper.make_node("ReduceProd", ["scale_factors"], ["scale"], name="scale_prod", axes=[0], keepdims=0),
        helper.make_node("Mul", ["data", "scale"], ["scaled"], name="apply_scale"),
        helper.make_node("Shape", ["data"], ["data_shape"], name="shape"),
        helper.make_node("ReduceProd", ["data_shape"], ["numel"], name="numel", keepdims=1),
        helper.make_node("Cast", ["numel"], ["numel_f"], name="numel_float", to=TensorProto.FLOAT),
        helper.make_node("Div", ["scaled", "numel_f"], ["out"], name="normalize"),
        helper.make_node("Neg", ["data"], ["unused_neg"], name="dead"),
    ]
    graph = helper.make_graph(
        nodes, "foldable",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [4, 64])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4, 64])], inits)
    return _model(graph, opset)


def all_models() -> dict[str, onnx.ModelProto]:
    models = {}
    for opset in OPSETS:
        for name, axes, keepdims in EXAMPLES:
            if opset < 11 and axes is not None and min(axes) < 0:
                continue
            models[f"reduce_prod_{name}_opset{opset}.onnx"] = example_model(opset, axes, keepdims)
    models["reduce_prod_in_if_opset13.onnx"] = if_model()
    models["reduce_prod_in_function_opset13.onnx"] = function_model()
    models["mixed_opset13.onnx"] = mixed_model()
    models["foldable_opset13.onnx"] = foldable_model()
    return models


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    stale = []
    for name, model in all_models().items():
        onnx.checker.check_model(model, full_check=True)
        data = model.SerializeToString(deterministic=True)
        path = HERE / name
        if args.check:
            if not path.exists() or path.read_bytes() != data:
                stale.append(name)
        else:
            path.write_bytes(data)
    if stale:
        print("out of date:", ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
