"""The fold's integer-overflow policies (skip, wrap, saturate) and the kernel's modes (wrap,
saturate, raise) are two lists: each policy is computed by exactly one mode, and every place that
takes a policy (fold, optimize, the passes, the CLI) takes the same list.

Oracle: the exact product in Python integers, wrapped modulo 2^bits or clamped by hand.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import helper, numpy_helper

import rewriter
from rewriter.errors import KernelError
from rewriter.fold import FOLD_INT_OVERFLOW_POLICIES, INT_OVERFLOW_MODES, KERNEL_MODE, fold_model
from rewriter.kernels import reduce_prod
from rewriter.kernels._common import KERNEL_INT_OVERFLOW_MODES

DTYPES = [np.int32, np.int64, np.uint32, np.uint64]


def _data(dtype, overflowing: bool) -> np.ndarray:
    info = np.iinfo(dtype)
    if not overflowing:
        return np.array([[3, 5, 7], [2, 4, 6]], dtype=dtype)
    big = int(math.isqrt(int(info.max))) + 3  # big * big is just out of range
    rows = [[big, big, 1], [big, big, 2]] if info.min == 0 else [[big, big, 1], [-big, big, 2]]
    return np.array(rows, dtype=dtype)


def _exact(data: np.ndarray, policy: str):
    """(folded values, or None where the node stays) from Python integers."""
    info = np.iinfo(data.dtype)
    exact = [math.prod(int(v) for v in row) for row in data.tolist()]
    if any(not info.min <= p <= info.max for p in exact):
        if policy == "skip":
            return None
        if policy == "saturate":
            exact = [min(max(p, info.min), info.max) for p in exact]
        else:
            bits = data.dtype.itemsize * 8
            exact = [p % (1 << bits) for p in exact]
            exact = [p - (1 << bits) if info.min < 0 and p > info.max else p for p in exact]
    return np.array(exact, dtype=data.dtype)


def _model(data: np.ndarray) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("ReduceProd", ["d"], ["p"], name="rp", axes=[1], keepdims=0),
         helper.make_node("Add", ["p", "x"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(data.dtype), [2])],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(data.dtype), [2])],
        [numpy_helper.from_array(data, "d")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _folded(model: onnx.ModelProto):
    if any(n.op_type == "ReduceProd" for n in model.graph.node):
        return None
    (p,) = [t for t in model.graph.initializer if t.name == "p"]
    return numpy_helper.to_array(p)


def test_each_fold_policy_is_computed_by_exactly_one_kernel_mode():
    assert set(KERNEL_MODE) == set(FOLD_INT_OVERFLOW_POLICIES)
    assert sorted(KERNEL_MODE.values()) == sorted(KERNEL_INT_OVERFLOW_MODES)  # one to one, onto
    assert INT_OVERFLOW_MODES == FOLD_INT_OVERFLOW_POLICIES  # the old name, the same list


@pytest.mark.parametrize("overflowing", [False, True], ids=["fits", "overflows"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("policy", FOLD_INT_OVERFLOW_POLICIES)
def test_the_fold_under_a_policy_is_the_kernel_in_its_mode(policy, dtype, overflowing):
    data = _data(dtype, overflowing)
    expected = _exact(data, policy)
    folded = _folded(fold_model(_model(data), int_overflow=policy)[0])
    mode = KERNEL_MODE[policy]
    if expected is None:
        assert folded is None
        with pytest.raises(KernelError, match="overflow"):
            reduce_prod(data, [1], False, int_overflow=mode)
    else:
        assert folded is not None and folded.dtype == data.dtype
        np.testing.assert_array_equal(folded, expected)
        np.testing.assert_array_equal(reduce_prod(data, [1], False, int_overflow=mode), expected)


@pytest.mark.parametrize("policy", FOLD_INT_OVERFLOW_POLICIES)
def test_every_entry_point_takes_the_policies(policy):
    data = _data(np.int64, True)
    expected = _exact(data, policy)
    for out in (rewriter.fold_reduce_prod(_model(data), int_overflow=policy),
                rewriter.optimize_model(_model(data), int_overflow=policy),
                ir.to_proto(rewriter.FoldReduceProdPass(int_overflow=policy)(ir.from_proto(_model(data))).model)):
        folded = _folded(out)
        if expected is None:
            assert folded is None
        else:
            np.testing.assert_array_equal(folded, expected)


def test_anything_else_is_refused_by_every_entry_point():
    model = _model(_data(np.int64, False))
    for call in (lambda: rewriter.fold_reduce_prod(model, int_overflow="raise"),
                 lambda: rewriter.optimize_model(model, int_overflow="raise"),
                 lambda: rewriter.FoldReduceProdPass(int_overflow="raise"),
                 lambda: fold_model(model, int_overflow="clamp")):
        with pytest.raises(rewriter.RewriterError, match="skip, wrap, saturate"):
            call()


def test_the_command_line_offers_the_policies():
    from rewriter.cli.parser import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if a.choices and "fold" in a.choices).choices
    for command in ("fold", "optimize"):
        (flag,) = [a for a in subs[command]._actions if "--int-overflow" in a.option_strings]
        assert tuple(flag.choices) == FOLD_INT_OVERFLOW_POLICIES, command
        assert flag.default == "skip"
