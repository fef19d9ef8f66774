"""com.microsoft Attention and MultiHeadAttention lowered to standard ONNX (MatMul/Softmax below opset
23, ONNX Attention-23 from 23), against ONNX Runtime's CPU kernels (the oracle) in ONNX Runtime and
onnx.reference, within float32 rounding: every mask format the CPU kernel takes, unidirectional,
past/present, attention_bias, unequal q/k/v widths, scale and mask_filter_value; the named
blockers."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T

from rewriter.convert.lower_ops import lower_ops
from rewriter.errors import RewriterError
from tests.convert.support.contrib_oracle import com_model, const
from tests.convert.support.lowering_oracle import check_lowering

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
TOL = {"exact_ort": False, "exact_ref": False, "rtol": 1e-5, "atol": 1e-5}
B, S, D, N = 2, 5, 16, 2


def _masks(rng, past=0):
    total = past + S
    return {
        "none": None,
        "end": (np.array([total, 3], np.int32), ["b"]),
        "end_zero": (np.array([0, total], np.int32), ["b"]),  # a row with every key masked
        "end_own_symbol": (np.array([total, 3], np.int32), ["m"]),  # [B] or [2B]: told at run time
        "end_start": (np.array([total, 4, 0, 2], np.int32), ["bb"]),
        "raw2d": ((rng.random((B, total)) > 0.3).astype(np.int32), ["b", "t"]),
        "raw3d": ((rng.random((B, S, total)) > 0.3).astype(np.int32), ["b", "s", "t"]),
    }


def _attention(rng, mask, *, past=0, bias=True, attn_bias=False, sizes=None, present=False, **attrs):
    sizes = sizes or [D, D, D]
    names = [("X", T.FLOAT, ["b", "s", D]), "W", "bias" if bias else "", ("M", T.INT32, mask[1]) if mask else ""]
    names.append(("P", T.FLOAT, [2, "b", N, "p", sizes[1] // N]) if past else "")
    names.append(("AB", T.FLOAT, [1, N, "s", "t"]) if attn_bias else "")
    inits = [const("W", rng.normal(size=(D, sum(sizes))) * 0.3, np.float32),
             const("bias", rng.normal(size=sum(sizes)), np.float32)]
    outs = [("Y", T.FLOAT, ["b", "s", sizes[2]])]
    if present:
        outs.append(("Present", T.FLOAT, [2, "b", N, "t", sizes[1] // N]))
    if sizes != [D, D, D]:
        attrs["qkv_hidden_sizes"] = sizes
    feeds = {"X": rng.normal(size=(B, S, D)).astype(np.float32)}
    if mask:
        feeds["M"] = mask[0]
    if past:
        feeds["P"] = rng.normal(size=(2, B, N, past, sizes[1] // N)).astype(np.float32)
    if attn_bias:
        feeds["AB"] = rng.normal(size=(1, N, S, past + S)).astype(np.float32)
    return com_model("Attention", names, outs, initializers=[i for i in inits if i.name in names], num_heads=N,
                     **attrs), feeds


@pytest.mark.parametrize("mask", ["none", "end", "end_zero", "end_own_symbol", "end_start", "raw2d", "raw3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
@pytest.mark.parametrize("opset", [None, 23])
def test_attention_masks(mask, unidirectional, opset):
    rng = np.random.default_rng(1)
    model, feeds = _attention(rng, _masks(rng)[mask], unidirectional=unidirectional)
    check_lowering(model, feeds, opset=opset, **TOL)


@pytest.mark.parametrize("opset", [None, 23])
@pytest.mark.parametrize("mask", ["none", "end", "raw2d"])
def test_attention_past_present_bias_and_attributes(opset, mask):
    rng = np.random.default_rng(2)
    model, feeds = _attention(rng, _masks(rng, past=3)[mask], past=3, present=True, unidirectional=1, scale=0.3,
                              mask_filter_value=-500.0)
    check_lowering(model, feeds, opset=opset, **TOL)
    model, feeds = _attention(rng, _masks(rng)[mask], attn_bias=True, present=True, mask_filter_value=-500.0)
    check_lowering(model, feeds, opset=opset, **TOL)


@pytest.mark.parametrize("symbol, computed", [("b", False), ("m", True), (B, False), (None, True)])
def test_a_mask_index_as_long_as_the_batch_is_read_without_computed_bounds(symbol, computed):
    """A 1-d mask whose length is the queries' batch (the same symbol or number) holds end positions
    only: no Slice by the batch, no zeros for the start positions (LiteRT's onnx2tf loses the dims
    through those; tests/targets/test_computed_shapes.py). Another length is told at run time."""
    rng = np.random.default_rng(6)
    model, feeds = _attention(rng, (np.array([S, 3], np.int32), [symbol or "m"]))
    if symbol == B:
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = B
    if symbol is None:  # both unknown: not known to be equal
        for value in model.graph.input[:1] + [i for i in model.graph.input if i.name == "M"]:
            value.type.tensor_type.shape.dim[0].Clear()
    lowered, _ = lower_ops(model)
    ops = [n.op_type for n in lowered.graph.node]
    assert ("Slice" in ops and "ConstantOfShape" in ops) == computed
    check_lowering(model, feeds, **TOL)


def _after_positions(anonymous_sum: bool):
    """Attention over x + P[:, :seq] (a [1, 32, D] position table sliced to the length read by Shape),
    with a mask index declared [b]: ONNX's inference knows none of the Slice's dims, so the sum's
    batch is known only from the table's leading 1 kept (contrib_types._sliced)."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(9)
    model, feeds = _attention(rng, (np.array([S, 2], np.int32), ["b"]))
    table = numpy_helper.from_array((rng.normal(size=(1, 32, D)) * 0.1).astype(np.float32), "P")
    consts = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("i1", 1), ("z", [0]), ("a1", [1]))]
    nodes = [helper.make_node("Shape", ["X"], ["shape"]), helper.make_node("Gather", ["shape", "i1"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "z"], ["end"]),
             helper.make_node("Identity", ["a1"], ["a1x"]),  # axes not a constant: nothing known kept
             helper.make_node("Slice", ["P", "z", "end", "a1x" if anonymous_sum else "a1"], ["pos"]),
             helper.make_node("Add", ["X", "pos"], ["q"])]
    model.graph.node[0].input[0] = "q"
    model.graph.node.insert(0, nodes[-1])
    for node in reversed(nodes[:-1]):
        model.graph.node.insert(0, node)
    model.graph.initializer.extend([table, *consts])
    return model, feeds


@pytest.mark.parametrize("axes_kept", [True, False])
def test_a_mask_index_after_a_sliced_position_table(axes_kept):
    """Sliced along axis 1 only, the table keeps its 1 and the sum its batch b: the mask index is read
    as end positions. With the axes computed (an Identity of them), nothing is kept, and the mask's
    length is told at run time. Both against ONNX Runtime."""
    from rewriter.convert.lowering.contrib_types import _known, dims_of
    from rewriter.convert.lowering.types import model_types

    model, feeds = _after_positions(anonymous_sum=not axes_kept)
    pos = dims_of(model_types(model)["pos"])[1]
    assert [d if _known(d) else None for d in pos] == ([1, None, D] if axes_kept else [None, None, None])
    lowered = check_lowering(model, feeds, **TOL)
    ops = [n.op_type for n in lowered.graph.node]
    assert ("ConstantOfShape" not in ops) == axes_kept


def test_known_dims_are_values_and_the_model_s_names():
    from rewriter.convert.lowering.contrib_types import _more_dims, tensor_type

    assert _more_dims(tensor_type(T.FLOAT, ["b", None, 16]), tensor_type(T.FLOAT, ["unk__2", "unk__3", 16]))
    assert not _more_dims(tensor_type(T.FLOAT, [None, None, 16]), tensor_type(T.FLOAT, ["unk__2", "unk__3", 16]))
    assert not _more_dims(tensor_type(T.FLOAT, ["b", None, 16]), tensor_type(T.FLOAT, ["b", "s", 16]))
    assert not _more_dims(tensor_type(T.FLOAT, ["b", "s"]), tensor_type(T.FLOAT, [None, None, 16]))


def test_attention_unequal_widths_and_no_bias():
    rng = np.random.default_rng(3)
    model, feeds = _attention(rng, _masks(rng)["raw2d"], bias=False, sizes=[8, 8, 12])
    check_lowering(model, feeds, **TOL)


@pytest.mark.parametrize("attrs,inputs,match", [({"do_rotary": 1}, {}, "do_rotary"),
                                                ({"past_present_share_buffer": 1}, {}, "shared KV buffer")])
def test_attention_blockers(attrs, inputs, match):
    rng = np.random.default_rng(4)
    model, _ = _attention(rng, None, **attrs)
    with pytest.raises(RewriterError, match=match):
        lower_ops(model)


def test_attention_refuses_a_4d_mask():
    rng = np.random.default_rng(5)
    model, _ = _attention(rng, (None, ["b", 1, "s", "t"]))
    with pytest.raises(RewriterError, match="rank 4"):
        lower_ops(model)


def _mha(rng, *, kv=S, bias=True, mask=None, past=0, attn_bias=False, present=False, **attrs):
    names = [("Q", T.FLOAT, ["b", "s", D]), ("K", T.FLOAT, ["b", "l", D]), ("V", T.FLOAT, ["b", "l", D]),
             "bias" if bias else "", ("M", T.INT32, mask[1]) if mask else "",
             ("AB", T.FLOAT, ["b", N, "s", "t"]) if attn_bias else "",
             ("PK", T.FLOAT, ["b", N, "p", D // N]) if past else "",
             ("PV", T.FLOAT, ["b", N, "p", D // N]) if past else ""]
    outs = [("Y", T.FLOAT, ["b", "s", D])]
    if present:
        outs += [("PresK", T.FLOAT, ["b", N, "t", D // N]), ("PresV", T.FLOAT, ["b", N, "t", D // N])]
    feeds = {"Q": rng.normal(size=(B, S, D)).astype(np.float32), "K": rng.normal(size=(B, kv, D)).astype(np.float32),
             "V": rng.normal(size=(B, kv, D)).astype(np.float32)}
    if mask:
        feeds["M"] = mask[0]
    if attn_bias:
        feeds["AB"] = rng.normal(size=(B, N, S, past + kv)).astype(np.float32)
    if past:
        feeds["PK"], feeds["PV"] = (rng.normal(size=(B, N, past, D // N)).astype(np.float32) for _ in range(2))
    inits = [const("bias", rng.normal(size=3 * D), np.float32)] if bias else []
    while names and names[-1] == "":
        names.pop()
    return com_model("MultiHeadAttention", names, outs, initializers=inits, num_heads=N, **attrs), feeds


@pytest.mark.parametrize("opset", [None, 23])
@pytest.mark.parametrize("case", ["self", "cross", "end_mask", "raw_mask", "past", "causal_past_bias"])
def test_multi_head_attention(opset, case):
    rng = np.random.default_rng(6)
    kwargs = {"self": {}, "cross": {"kv": 7, "bias": False}, "end_mask": {"mask": (np.array([5, 2], np.int32), ["b"])},
              "raw_mask": {"mask": ((rng.random((B, S)) > 0.3).astype(np.int32), ["b", "t"])},
              "past": {"past": 2, "present": True, "bias": False},
              "causal_past_bias": {"past": 2, "present": True, "attn_bias": True, "unidirectional": 1, "bias": False,
                                   "scale": 0.5}}[case]
    model, feeds = _mha(rng, **kwargs)
    check_lowering(model, feeds, opset=opset, **TOL)


def test_multi_head_attention_refuses_packed_qkv():
    model = com_model("MultiHeadAttention", [("Q", T.FLOAT, ["b", "s", N, 3, D // N])], [("Y", T.FLOAT, ["b", "s", D])],
                      num_heads=N)
    with pytest.raises(RewriterError, match="packed QKV"):
        lower_ops(model)
