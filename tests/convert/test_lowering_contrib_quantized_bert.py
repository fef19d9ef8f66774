"""QAttention and QEmbedLayerNormalization as ONNX Runtime's own quantizer writes them: a fused BERT layer
(EmbedLayerNormalization, Attention, a MatMul) through ``onnxruntime.quantization.quantize_dynamic``
(its IntegerOps registry: QEmbedLayerNormalization with uint8 tables, DynamicQuantizeLinear + QAttention,
DynamicQuantizeLinear + MatMulInteger), lowered, against ONNX Runtime's run of the quantized model
(hypothesis over sizes, heads, weight types, per-channel, reduce_range, masks); the corpus' quantized
BERT-tiny models (tools/corpus/make_contrib.py --quant) through convert --target, in OpenVINO 2026.4 and
tract 0.23 when their venvs are there.

The tolerance: every integer (the int32 sums, the codes DynamicQuantizeLinear makes) is ONNX Runtime's
when the float values before each DynamicQuantizeLinear are; they are within float32 rounding, and a value
one ulp off can move its row's scale by an ulp and a code lying on a rounding boundary by one step. So:
relative L2 <= 1e-5 (the issue's float32 bar) when no code moved; when one did, every code within one
step, at most 1% of them moved, and relative L2 <= 1e-3 (measured on bert_tiny_opt_qdyn in OpenVINO 2026.4
and tract 0.23: 1 code of 1792 moved in layer 0 by the runtime's own LayerNormalization rounding, 1.0e-4).
A code that moved changes what every later DynamicQuantizeLinear quantizes, its scale included, so the
codes of those after the first one with a moved code are not compared, and the output is held to
relative L2 <= 1e-2: on an Intel Xeon with AMX (seed 452, 4 heads of 8, batch 3, 5 tokens, a mask,
QInt8 per tensor) 1 of 480 embedding codes moved by one step, then 466 of 480 attention codes by up to
2 with the attention output's scale, and the output was 3.6e-3 from ONNX Runtime's."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper

from rewriter.convert.lower_ops import lower_ops
from tests.convert.support.lowering_oracle import ort_run

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
quantization = pytest.importorskip("onnxruntime.quantization")
CORPUS = Path(os.environ.get("REWRITER_CORPUS", "/work/corpus")) / "contrib"
VOCAB, POSITIONS = 50, 16


def _fused_bert(rng, hidden: int, heads: int, mask: bool, unidirectional: int) -> onnx.ModelProto:
    def init(name, value, dtype=np.float32):
        return onnx.numpy_helper.from_array(np.asarray(value, dtype), name)

    inits = [init("word", rng.normal(size=(VOCAB, hidden))), init("pos", rng.normal(size=(POSITIONS, hidden))),
             init("seg", rng.normal(size=(2, hidden))), init("gamma", rng.uniform(0.5, 1.5, hidden)),
             init("beta", rng.normal(size=hidden) * 0.1), init("qkv", rng.normal(size=(hidden, 3 * hidden)) * 0.2),
             init("qkv_bias", rng.normal(size=3 * hidden) * 0.1), init("out_w", rng.normal(size=(hidden, hidden)))]
    nodes = [helper.make_node("EmbedLayerNormalization", ["ids", "segments", "word", "pos", "seg", "gamma", "beta",
                                                          "mask" if mask else ""], ["emb", "mask_index"],
                              domain="com.microsoft", epsilon=1e-12),
             helper.make_node("Attention", ["emb", "qkv", "qkv_bias", "mask_index" if mask else ""], ["attn"],
                              domain="com.microsoft", num_heads=heads, unidirectional=unidirectional),
             helper.make_node("MatMul", ["attn", "out_w"], ["y"])]
    inputs = [helper.make_tensor_value_info(n, T.INT32, ["b", "s"]) for n in ("ids", "segments", "mask")[:2 + mask]]
    graph = helper.make_graph(nodes, "bert_layer", inputs, [helper.make_tensor_value_info("y", T.FLOAT, ["b", "s", hidden])],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                   helper.make_opsetid("com.microsoft", 1)], ir_version=8)


def _quantized(model: onnx.ModelProto, folder: Path, weights: str, per_channel: bool,
               reduce_range: bool) -> onnx.ModelProto:
    src, dst = folder / "float.onnx", folder / "quantized.onnx"
    onnx.save(model, src)
    quantization.quantize_dynamic(src, dst, weight_type=getattr(quantization.QuantType, weights),
                                  per_channel=per_channel, reduce_range=reduce_range,
                                  extra_options={"DefaultTensorType": T.FLOAT})
    return onnx.load(dst)


def _rel_l2(want, got) -> float:
    want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
    return float(np.linalg.norm(want - got) / max(np.linalg.norm(want), 1e-30))


def _with_codes(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy with every DynamicQuantizeLinear's codes as graph outputs after the model's own."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in model.graph.node:
        if node.op_type == "DynamicQuantizeLinear":
            copy.graph.output.append(helper.make_tensor_value_info(node.output[0], T.UINT8, None))
    return copy


def _judge(want: list, got: list) -> str:
    """Fails unless ``got`` (output, then the codes in graph order) is ONNX Runtime's ``want`` within the
    tolerance above; after the first DynamicQuantizeLinear with a moved code, the later ones compute
    from other values (a cascade) and only the output's bound is held."""
    moved, total, cascade = 0, 0, False
    for a, b in zip(want[1:], got[1:]):
        step = np.abs(a.astype(np.int32) - np.asarray(b).reshape(a.shape).astype(np.int32))
        if moved:
            cascade = cascade or bool(step.any())
            continue
        assert step.max(initial=0) <= 1, f"a code moved by {step.max()} steps"
        moved, total = moved + int((step > 0).sum()), total + step.size
        assert moved <= 0.01 * max(total, 1), (moved, total)
    error = _rel_l2(want[0], np.asarray(got[0]).reshape(want[0].shape))
    assert error <= (1e-2 if cascade else 1e-3 if moved else 1e-5), (error, moved, total, cascade)
    return f"{error:.1e} ({moved} of {total} codes moved{', then a cascade' if cascade else ''})"


def _feeds(rng, batch: int, seq: int, mask: bool) -> dict:
    feeds = {"ids": rng.integers(0, VOCAB, (batch, seq)).astype(np.int32),
             "segments": rng.integers(0, 2, (batch, seq)).astype(np.int32)}
    if mask:
        lengths = rng.integers(1, seq + 1, batch)
        feeds["mask"] = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    return feeds


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), heads=st.sampled_from([1, 2, 4]), head_size=st.sampled_from([4, 8]),
       batch=st.integers(1, 3), seq=st.integers(1, POSITIONS), mask=st.booleans(), unidirectional=st.integers(0, 1),
       weights=st.sampled_from(["QInt8", "QUInt8"]), per_channel=st.booleans(), reduce_range=st.booleans())
@example(seed=452, heads=4, head_size=8, batch=3, seq=5, mask=True, unidirectional=0, weights="QInt8",
         per_channel=False, reduce_range=False)
def test_quantize_dynamic_bert_layer_lowered(tmp_path, seed, heads, head_size, batch, seq, mask, unidirectional,
                                            weights, per_channel, reduce_range):
    rng = np.random.default_rng(seed)
    quantized = _quantized(_fused_bert(rng, heads * head_size, heads, mask, unidirectional), tmp_path, weights,
                           per_channel, reduce_range)
    ops = {n.op_type for n in quantized.graph.node if n.domain == "com.microsoft"}
    assert ops == {"QEmbedLayerNormalization", "QAttention"}, ops  # (what ONNX Runtime's quantizer wrote)
    lowered, report = lower_ops(quantized)
    onnx.checker.check_model(lowered, full_check=True)
    assert all(n.domain in ("", "ai.onnx") for n in lowered.graph.node)
    feeds = _feeds(rng, batch, seq, mask)
    _judge(ort_run(_with_codes(quantized), feeds), ort_run(_with_codes(lowered), feeds))


def _corpus(name: str) -> tuple[onnx.ModelProto, dict]:
    path = CORPUS / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} absent (python tools/corpus/make_contrib.py --quant)")
    with np.load(path.with_suffix(".npz")) as data:
        return onnx.load(path), {k: data[k] for k in data.files}


@pytest.mark.parametrize("name", ["bert_tiny_opt_qdyn", "bert_tiny_opt_qdyn_u8pc", "bert_tiny_opt_noembed_qdyn"])
@pytest.mark.parametrize("runtime,release", [("openvino", "2026.4"), ("tract", "0.23")])
def test_quantized_bert_tiny_in_the_runtimes(name, runtime, release):
    """The lowering (DynamicQuantizeLinear kept) runs in both and matches; convert --target either matches or
    refuses naming the DynamicQuantizeLinear nodes: OpenVINO 2026.4's is measured wrong (written with exact
    residuals, but not after float ops it computes within ulps), and tract 0.23 keeps it only after exact
    ops (kept_if_exact_input: bert_tiny_opt_qdyn was 1.0e-4 from ONNX Runtime there)."""
    from rewriter.convert.for_target import convert_for
    from rewriter.errors import RewriterError
    from tests.targets.runtime_runs import run_in

    model, feeds = _corpus(name)
    assert {"QAttention"} <= {n.op_type for n in model.graph.node if n.domain == "com.microsoft"}
    want = ort_run(_with_codes(model), feeds)
    lowered, _ = lower_ops(model)
    try:
        converted, _ = convert_for(model, runtime=f"{runtime}=={release}")
    except RewriterError as e:
        assert "node '" in str(e) and "DynamicQuantizeLinear" in str(e) and "within ulps" in str(e), e
        converted = None
    for result in (lowered, converted):
        if result is None:
            continue
        assert all(n.domain in ("", "ai.onnx") for n in result.graph.node)
        result = _with_codes(result)
        _judge(want, ort_run(result, feeds))
        ran = run_in(runtime, release, result, feeds)
        assert ran.get("ok"), ran
        _judge(want, ran["values"])


def test_openvino_refusal_names_the_dynamic_quantize_node(tmp_path, monkeypatch):
    """OpenVINO 2026.4's DynamicQuantizeLinear is measured wrong: its form writes it with exact residuals
    (quant_dynamic.py), but not after float ops OpenVINO computes within ulps (the BERT's: refused by
    name); without that form convert expands it, and the expansion's QuantizeLinear (which OpenVINO
    computes otherwise) blocks: the refusal names the user's node and op."""
    from rewriter.convert.for_target import convert_for
    from rewriter.convert.lowering import quant_explicit
    from rewriter.errors import RewriterError

    quantized = _quantized(_fused_bert(np.random.default_rng(3), 8, 2, True, 0), tmp_path, "QInt8", False, False)
    dynamic = [n.name for n in quantized.graph.node if n.op_type == "DynamicQuantizeLinear"]
    with pytest.raises(RewriterError) as e:  # x through LayerNormalization / float sums: refused by name
        convert_for(quantized, runtime="openvino==2026.4")
    assert dynamic and all(f"node '{name}' (DynamicQuantizeLinear)" in str(e.value) for name in dynamic)
    assert "within ulps of ONNX Runtime" in str(e.value)
    measured = quant_explicit.quantized_forms

    def without_form(target):
        entry = measured(target)
        return {**entry, "forms": {op: v for op, v in entry.get("forms", {}).items() if op != "DynamicQuantizeLinear"}}

    monkeypatch.setattr(quant_explicit, "quantized_forms", without_form)
    with pytest.raises(RewriterError) as e:
        convert_for(quantized, runtime="openvino==2026.4")
    for name in dynamic:
        assert f"the conversion of node '{name}' (DynamicQuantizeLinear) wrote" in str(e.value)
