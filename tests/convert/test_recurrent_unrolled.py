"""RNN / GRU / LSTM unrolled over a static sequence length (rewriter/convert/decompositions/recurrent.py)
for a runtime without them (TVM 0.27): the unrolled model, run in ONNX Runtime, against ONNX
Runtime's own kernels over the attribute space (hypothesis), onnx.reference as a second oracle,
the official backend node tests with their own outputs, the refusals, the choice per target
(never for ONNX Runtime), and the unrolled forms run in TVM 0.27, tract 0.23 and LiteRT 2.6
(skipped without their venvs)."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewriter
from rewriter.convert.for_target import convert_for
from tests.convert.support.recurrent_models import (Recurrent, build, ort_outputs, reference_outputs,
                                                    relative_error)
from tests.oracle import backend_cases

ROUNDOFF = 1e-5  # float32 sums in another order; ONNX Runtime's recurrent kernels' own tanh / sigmoid

_GATE_FUNCS = [("Sigmoid", None, None), ("HardSigmoid", 0.3, 0.4), ("Softsign", None, None),
               ("Tanh", None, None), ("HardSigmoid", None, None)]
_OTHER_FUNCS = [("Tanh", None, None), ("Relu", None, None), ("LeakyRelu", 0.2, None), ("Affine", 0.5, 0.25),
                ("ScaledTanh", 1.5, 0.7), ("Elu", 0.8, None), ("Softplus", None, None), ("Softsign", None, None),
                ("Sigmoid", None, None), ("ThresholdedRelu", 0.3, None), ("LeakyRelu", None, None)]


def _run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _unrolled(r: Recurrent, target="tvm==0.27"):
    model, feeds = build(r)
    result, report = convert_for(model, runtime=target)
    assert r.op not in {n.op_type for n in result.graph.node}
    assert report.decomposed[r.op] == 1
    return _run(result, feeds)


def _close(want, got, bound=ROUNDOFF):
    """Each output within ``bound`` of the oracle's, relative to its largest value or 1, whichever is
    more (a gate's sum of O(1) terms that cancels to a small value keeps their absolute roundoff)."""
    assert len(want) == len(got)
    for w, g in zip(want, got):
        w, g = np.asarray(w, np.float64), np.asarray(g, np.float64)
        assert w.shape == g.shape
        err = float(np.max(np.abs(w - g), initial=0.0)) / max(1.0, float(np.max(np.abs(w), initial=0.0)))
        assert err <= bound, (err, relative_error(w, g), w, g)


@st.composite
def recurrents(draw, default_functions=False):
    op = draw(st.sampled_from(["RNN", "GRU", "LSTM"]))
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    steps, batch = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    attrs = {}
    per = {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
    dirs = 2 if direction == "bidirectional" else 1
    if not default_functions and draw(st.booleans()):
        funcs = []
        for _ in range(dirs):
            if op == "RNN":
                funcs += [draw(st.sampled_from(_OTHER_FUNCS))]
            else:
                funcs += [draw(st.sampled_from(_GATE_FUNCS))] + draw(st.lists(st.sampled_from(_OTHER_FUNCS),
                                                                               min_size=per - 1, max_size=per - 1))
        attrs["activations"] = [f[0] for f in funcs]
        alphas = [f[1] for f in funcs if f[1] is not None]
        betas = [f[2] for f in funcs if f[2] is not None]
        if alphas and len(alphas) == sum(f[0] in ("HardSigmoid", "LeakyRelu", "Affine", "ScaledTanh", "Elu",
                                                  "ThresholdedRelu") for f in funcs):
            attrs["activation_alpha"] = alphas  # one for every function that takes one
        if betas and len(betas) == sum(f[0] in ("HardSigmoid", "Affine", "ScaledTanh") for f in funcs):
            attrs["activation_beta"] = betas
    if not default_functions and draw(st.booleans()):
        attrs["clip"] = draw(st.sampled_from([0.5, 1.0, 3.0]))
    if op == "GRU" and draw(st.booleans()):
        attrs["linear_before_reset"] = 1
    if op == "LSTM" and draw(st.booleans()):
        attrs["input_forget"] = 1
    lens = None
    if not default_functions and draw(st.booleans()):
        lens = draw(st.lists(st.integers(0, steps), min_size=batch, max_size=batch))
    return Recurrent(op, steps, batch, draw(st.integers(1, 3)), draw(st.integers(1, 4)), direction=direction,
                     layout=draw(st.sampled_from([0, 1])), attrs=attrs, bias=draw(st.booleans()), lens=lens,
                     lens_fed=draw(st.booleans()), initial=draw(st.booleans()),
                     peepholes=op == "LSTM" and draw(st.booleans()), fed_weights=draw(st.booleans()),
                     seed=draw(st.integers(0, 1000)))


@settings(max_examples=150, deadline=None)
@given(recurrents())
def test_unrolled_equals_onnxruntime_kernels(r):
    _close(ort_outputs(r), _unrolled(r))


@settings(max_examples=60, deadline=None)
@given(recurrents(default_functions=True))
def test_unrolled_equals_onnx_reference(r):
    r = dataclasses.replace(r, attrs={k: v for k, v in r.attrs.items() if k != "input_forget"})
    _close(reference_outputs(r), _unrolled(r))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_rows_shorter_than_the_sequence_and_empty_rows(op):
    """Y is zero past a row's length, Y_h / Y_c hold its last valid step (zero for a row of length 0),
    and the reverse direction starts at each row's own last valid step (as ONNX Runtime computes)."""
    r = Recurrent(op, 5, 4, 2, 3, direction="bidirectional", lens=[5, 0, 2, 1], attrs={"clip": 2.0})
    want, got = ort_outputs(r), _unrolled(r)
    _close(want, got)
    assert not np.any(got[0][2:, :, 2]) and not np.any(got[0][:, :, 1]) and not np.any(got[1][:, 1])
    assert np.any(got[0][1, 1, 2])  # the reverse direction's step 1 of the row of length 2 was computed


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_one_activation_list_serves_both_directions(op):
    funcs = {"RNN": ["Relu"], "GRU": ["HardSigmoid", "Softsign"], "LSTM": ["HardSigmoid", "Softsign", "Elu"]}[op]
    r = Recurrent(op, 3, 2, 2, 3, direction="bidirectional", attrs={"activations": funcs * 2})
    _close(ort_outputs(r), _unrolled(r))


@pytest.mark.parametrize("fn", ["ThresholdedRelu", "Affine", "ScaledTanh", "LeakyRelu", "HardSigmoid", "Elu"])
def test_alpha_and_beta_default_as_onnxruntime_takes_them(fn):
    r = Recurrent("RNN", 3, 4, 2, 5, attrs={"activations": [fn]}, seed=7)
    _close(ort_outputs(r), _unrolled(r))


CASES = [c for op in ("RNN", "GRU", "LSTM") for c in backend_cases(op)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_backend_case(case):
    inputs, expected = case.data_sets[0]
    feeds = {vi.name: np.asarray(v) for vi, v in zip(case.model.graph.input, inputs)}
    result, report = convert_for(case.model, runtime="tvm==0.27")
    assert report.decomposed[case.model.graph.node[0].op_type] == 1
    got = _run(result, feeds)
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        assert g.shape == np.asarray(e).shape and g.dtype == np.asarray(e).dtype
        np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol)


def test_the_backend_cases_are_there():
    assert {"test_gru_seq_length", "test_gru_batchwise", "test_lstm_with_peepholes", "test_lstm_batchwise",
            "test_rnn_seq_length", "test_simple_rnn_batchwise", "test_gru_bidirectional"} <= {c.name for c in CASES}


def test_a_symbolic_sequence_length_is_refused_naming_the_node_and_the_input_shape_to_give():
    model, _ = build(Recurrent("GRU", 4, 2, 2, 3))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "seq"
    with pytest.raises(rewriter.RewriterError, match=r"node 'the_gru' \(GRU\).*sequence length \(axis 0 of input "
                                                     r"'X'\) is not static.*--input-shape NAME:DIMS for 'X' \[seq, 2, 2\]"):
        convert_for(model, runtime="tvm==0.27")


def test_too_many_steps_are_refused():
    from rewriter.convert.decompositions.recurrent import MAX_STEPS

    model, _ = build(Recurrent("RNN", MAX_STEPS // 2 + 1, 1, 1, 1, direction="bidirectional", initial=False))
    with pytest.raises(rewriter.RewriterError, match=rf"{MAX_STEPS // 2 + 1} steps \(2 direction\(s\)\) is not unrolled"):
        convert_for(model, runtime="tvm==0.27")


def test_an_unknown_activation_is_refused():
    model, _ = build(Recurrent("RNN", 2, 1, 1, 1, attrs={"activations": ["Gelu"]}))
    with pytest.raises(rewriter.RewriterError, match="activation 'gelu' is not one ONNX defines"):
        convert_for(model, runtime="tvm==0.27")


@pytest.mark.parametrize("target", ["onnxruntime==1.20", "openvino==2026.4"])
def test_kept_where_the_runtime_runs_it(target):
    model, _ = build(Recurrent("GRU", 3, 2, 2, 3, lens=[3, 1]))
    result, report = convert_for(model, runtime=target)
    assert [n.op_type for n in result.graph.node] == ["GRU"] and not report.decomposed


def test_tract_unrolls_only_a_model_whose_node_it_refuses():
    constant, _ = build(Recurrent("GRU", 3, 2, 2, 3, lens=[3, 1], lens_fed=False, initial=False))
    result, report = convert_for(constant, runtime="tract==0.23")
    assert [n.op_type for n in result.graph.node] == ["GRU"]
    fed = Recurrent("GRU", 3, 2, 2, 3, lens=[3, 1])
    _close(ort_outputs(fed), _unrolled(fed, "tract==0.23"))


def test_litert_unrolls_a_gru_whose_sequence_lens_is_fed():
    fed = Recurrent("GRU", 3, 2, 2, 3, lens=[3, 1])
    _close(ort_outputs(fed), _unrolled(fed, "litert==2.6"))
    plain, _ = build(Recurrent("GRU", 3, 2, 2, 3))
    result, _ = convert_for(plain, runtime="litert==2.6")
    assert [n.op_type for n in result.graph.node] == ["GRU"]


_IN_RUNTIMES = [Recurrent("GRU", 4, 2, 3, 5, direction="bidirectional", lens=[4, 2],
                          attrs={"linear_before_reset": 1}),
                Recurrent("LSTM", 3, 2, 2, 4, direction="reverse", lens=[1, 3], peepholes=True),
                Recurrent("RNN", 3, 2, 2, 3, layout=1, attrs={"activations": ["Relu"]})]


@pytest.mark.parametrize("runtime,release,target", [("tvm", "0.27", "tvm==0.27"), ("tract", "0.23", "tract==0.23"),
                                                    ("litert", "2.6", "litert==2.6")])
@pytest.mark.parametrize("r", _IN_RUNTIMES, ids=lambda r: f"{r.op}-{r.direction}-layout{r.layout}")
def test_the_unrolled_form_runs_in_the_runtime(r, runtime, release, target):
    from tests.targets.runtime_runs import run_in

    model, feeds = build(r)
    result, report = convert_for(model, runtime=target)
    if r.op not in {n.op_type for n in model.graph.node} or not report.decomposed:
        pytest.skip(f"{target} runs this {r.op} itself")
    got = run_in(runtime, release, result, feeds)
    assert got["ok"], got
    _close(ort_outputs(r), got["values"], 1e-5)
