"""convert --dtype: an STFT/DFT and the weightless nodes bringing it its signal stay float32.

The numerics are judged with ``onnx.reference``, which computes half precision in half (ONNX
Runtime's CPU provider runs most float16 nodes in float32); ONNX Runtime must load and run
the results too."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

from rewriter.precision import convert_precision_proto
from rewriter.precision.regions import SIGNAL_FILTER, SIGNAL_PATH, SPECTRUM

N = 4096
WINDOW = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(512) / 512)).astype(np.float32)
TONE = (0.5 * np.sin(2 * np.pi * 300 * np.arange(N) / 16000)).astype(np.float32)[None]


def _ints(**values):
    return [nh.from_array(np.array([v], np.int64), name) for name, v in values.items()]


def _log_spectrum(front, inputs, inits, opset=18):
    """``front`` nodes make 'pe' [1, N]; then STFT, power, log(power + 1e-6)."""
    nodes = front + [h.make_node("Unsqueeze", ["pe", "ax2"], ["sig"], name="unsq"),
                     h.make_node("STFT", ["sig", "step", "win"], ["spec"], onesided=1, name="stft"),
                     h.make_node("ReduceSumSquare", ["spec", "am1"], ["pw"], keepdims=0, name="power"),
                     h.make_node("Add", ["pw", "guard"], ["pg"], name="guarded"),
                     h.make_node("Log", ["pg"], ["y"], name="log")]
    inits = list(inits) + _ints(ax2=2, am1=-1) + [
        nh.from_array(np.array(128, np.int64), "step"), nh.from_array(np.array(1e-6, np.float32), "guard")]
    if not any(n.output[0] == "win" for n in front) and "win" not in [i.name for i in inputs]:
        inits.append(nh.from_array(WINDOW, "win"))
    m = h.make_model(h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", T.FLOAT, [1, None, 257])], inits),
                     opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _preemphasis_model():
    front = [h.make_node("Slice", ["x", "one", "big", "ax"], ["cur"], name="cur"),
             h.make_node("Slice", ["x", "zero", "m1", "ax"], ["prev"], name="prev"),
             h.make_node("Mul", ["prev", "k"], ["pk"], name="scaled"),
             h.make_node("Sub", ["cur", "pk"], ["d"], name="diff"),
             h.make_node("Slice", ["x", "zero", "one", "ax"], ["first"], name="first"),
             h.make_node("Concat", ["first", "d"], ["joined"], axis=1, name="joined"),
             h.make_node("Pad", ["joined", "pads"], ["pe"], name="padded")]
    inits = _ints(one=1, big=2 ** 62, ax=1, zero=0, m1=-1) + [nh.from_array(np.array(0.97, np.float32), "k"),
                                                                nh.from_array(np.zeros(4, np.int64), "pads")]
    return _log_spectrum(front, [h.make_tensor_value_info("x", T.FLOAT, [1, N])], inits)


def _rel_l2(want, got):
    want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def _kept(report):
    return {k.label.split("'")[1]: k.reason for k in report.kept}


def test_the_waveform_path_to_an_stft_stays_float32_and_the_spectrum_is_right():
    m = _preemphasis_model()
    r, report = convert_precision_proto(m, "float16")
    kept = _kept(report)
    assert {k for k, why in kept.items() if why == SIGNAL_PATH} == {"cur", "prev", "scaled", "diff", "first",
                                                                     "joined", "padded", "unsq", "stft"}
    # the power and its log: the spectrum ('guarded' adds 1e-6, below float16's range: kept for that)
    assert {k for k, why in kept.items() if why == SPECTRUM} == {"power", "log"}
    assert report.half_by_op == {}
    onnx.checker.check_model(r, full_check=True)
    want = ReferenceEvaluator(m).run(None, {"x": TONE})[0]
    got = ReferenceEvaluator(r).run(None, {"x": TONE})[0]
    # the same path in float16 is 6e-2 off: the rounding noise of the waveform fills the empty bins
    assert _rel_l2(want, got) < 2e-3
    ort_got = ort.InferenceSession(r.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": TONE})[0]
    assert _rel_l2(want, ort_got) < 1e-2
    assert r.graph.initializer[[t.name for t in r.graph.initializer].index("win")].data_type == T.FLOAT


def test_the_walk_stops_at_a_weight_and_follows_the_signal_only():
    # x -> Neg -> Mul by a 2-valued gain (a weight) -> Mul by a scalar Constant -> Relu -> STFT; window = Abs(w)
    front = [h.make_node("Neg", ["x"], ["n"], name="neg"),
             h.make_node("Mul", ["n", "gain"], ["g2"], name="gain"),
             h.make_node("ReduceMean", ["g2", "ax0"], ["g"], keepdims=1, name="mean"),
             h.make_node("Constant", [], ["half"], value_float=0.5, name="c"),
             h.make_node("Mul", ["g", "half"], ["s"], name="scalar"),
             h.make_node("Relu", ["s"], ["pe"], name="relu"),
             h.make_node("Abs", ["w"], ["win"], name="window")]
    inits = _ints(ax0=0) + [nh.from_array(np.array([[1.0], [0.5]], np.float32), "gain")]
    m = _log_spectrum(front, [h.make_tensor_value_info("x", T.FLOAT, [1, N]),
                              h.make_tensor_value_info("w", T.FLOAT, [512])], inits)
    r, report = convert_precision_proto(m, "float16")
    kept = _kept(report)
    assert {k for k, why in kept.items() if why == SIGNAL_PATH} == {"mean", "scalar", "relu", "unsq", "stft"}
    assert {k for k, why in kept.items() if why == SPECTRUM} == {"power", "log"}
    assert report.half_by_op == {"Neg": 1, "Mul": 1, "Abs": 1}
    feeds = {"x": TONE, "w": WINDOW}
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    assert _rel_l2(want, ort.InferenceSession(r.SerializeToString(), providers=["CPUExecutionProvider"])
                   .run(None, feeds)[0]) < 1e-2


def test_the_path_goes_on_through_a_node_kept_for_another_reason():
    m = _preemphasis_model()
    r, report = convert_precision_proto(m, "float16", keep_nodes=("diff",))
    kept = _kept(report)
    assert kept["diff"] == "--keep-nodes"
    assert {k for k, why in kept.items() if why == SIGNAL_PATH} == {"cur", "prev", "scaled", "first", "joined",
                                                                     "padded", "unsq", "stft"}
    # an STFT kept by name still has its signal path kept
    r, report = convert_precision_proto(m, "float16", keep_op_types=("STFT",))
    kept = _kept(report)
    assert kept["stft"] == "--keep-op-types"
    assert {k for k, why in kept.items() if why == SIGNAL_PATH} == {"cur", "prev", "scaled", "diff", "first",
                                                                     "joined", "padded", "unsq"}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_dft_reading_a_graph_input_stays_float32(dtype):
    nodes = [h.make_node("Unsqueeze", ["x", "ax2"], ["sig"], name="unsq"),
             h.make_node("DFT", ["sig", ""], ["spec"], onesided=1, name="dft"),
             h.make_node("Mul", ["spec", "spec"], ["sq"], name="square"),
             h.make_node("Mul", ["sq", "w"], ["y"], name="weighted")]
    m = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 64])],
                                  [h.make_tensor_value_info("y", T.FLOAT, [1, 33, 2])],
                                  _ints(ax2=2) + [nh.from_array(np.linspace(0.5, 2, 66, dtype=np.float32)
                                                                .reshape(33, 2), "w")]),
                     opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    r, report = convert_precision_proto(m, dtype)
    assert {k for k, why in _kept(report).items() if why == SIGNAL_PATH} == {"unsq", "dft"}
    if dtype == "float16":  # the spectrum after it too (bfloat16 has float32's range: no need)
        assert {k for k, why in _kept(report).items() if why == SPECTRUM} == {"square", "weighted"}
        assert not report.half_by_op
    else:
        assert report.half_by_op == {"Mul": 2}
    x = np.cos(np.arange(64, dtype=np.float32) / 3)[None]
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    assert _rel_l2(want, ReferenceEvaluator(r).run(None, {"x": x})[0]) < (1e-2 if dtype == "bfloat16" else 2e-3)


@pytest.mark.parametrize("gain, weight", [
    (h.make_node("Constant", [], ["c"], value_floats=[1.0, 0.5]), True),
    (h.make_node("Constant", [], ["c"], value=nh.from_array(np.array([1.0, 0.5], np.float32))), True),
    (h.make_node("Constant", [], ["c"], value=nh.from_array(np.array([0.5], np.float32))), False),
    (h.make_node("Constant", [], ["c"], value_float=0.5), False)])
def test_a_constant_node_of_two_values_is_a_weight_and_of_one_is_not(gain, weight):
    # a complex signal [1, N, 2] scaled by the Constant 'c', then STFT
    nodes = [h.make_node("Unsqueeze", ["x", "ax2"], ["s1"], name="unsq"),
             h.make_node("Concat", ["s1", "s1"], ["s2"], axis=2, name="complex"), gain,
             h.make_node("Mul", ["s2", "c"], ["sig"], name="gain"),
             h.make_node("STFT", ["sig", "step", "win"], ["y"], onesided=0, name="stft")]
    m = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, N])],
                                  [h.make_tensor_value_info("y", T.FLOAT, [1, None, 512, 2])],
                                  _ints(ax2=2) + [nh.from_array(np.array(128, np.int64), "step"),
                                                  nh.from_array(WINDOW, "win")]),
                     opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    _, report = convert_precision_proto(m, "float16")
    on_path = {k for k, why in _kept(report).items() if why == SIGNAL_PATH}
    assert on_path == ({"stft"} if weight else {"unsq", "complex", "gain", "stft"})


def _dft_basis(bins=33, k=64, exact=True):
    n = np.arange(k)
    f = np.arange(bins)[:, None]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * n / k)
    basis = np.concatenate([np.cos(2 * np.pi * f * n / k), -np.sin(2 * np.pi * f * n / k)]) * window
    # [2 * bins, 1, k], values float16 holds exactly: what the half copy loses is the waveform only
    return (basis.astype(np.float16) if exact else basis).astype(np.float32)[:, None, :]


def _conv_front_end(weight, gain=None, group=1, source="float"):
    """A waveform [1, N] -> Unsqueeze -> Conv ``weight`` (stride 32) -> power -> log(power + 1e-6).
    The waveform: graph input x (``source`` "float"), int16 PCM cast to float and scaled
    ("pcm"), or a constant expanded ("constant"); times ``gain`` when given (a weight on the
    path); copied to as many channels as the Conv takes."""
    nodes, inits = [], [nh.from_array(weight, "basis"), nh.from_array(np.array([1, N], np.int64), "shape")] + \
        _ints(ax1=1)
    inputs = [h.make_tensor_value_info("x", T.INT16 if source == "pcm" else T.FLOAT, [1, N])]
    if source == "pcm":
        nodes += [h.make_node("Cast", ["x"], ["xf"], to=T.FLOAT, name="pcm"),
                  h.make_node("Div", ["xf", "full_scale"], ["wave"], name="scale")]
        inits.append(nh.from_array(np.array(32768.0, np.float32), "full_scale"))
    elif source == "constant":
        nodes.append(h.make_node("Expand", ["level", "shape"], ["wave"], name="flat"))
        inits.append(nh.from_array(np.array(0.25, np.float32), "level"))
        inputs = []
    else:
        nodes.append(h.make_node("Identity", ["x"], ["wave"], name="wave"))
    signal = "wave"
    if gain is not None:
        nodes.append(h.make_node("Mul", [signal, "gain"], ["xg"], name="gain"))
        inits.append(nh.from_array(gain, "gain"))
        signal = "xg"
    channels = weight.shape[1] * group
    nodes += [h.make_node("Unsqueeze", [signal, "ax1"], ["s1"], name="unsq")]
    if channels > 1:
        nodes.append(h.make_node("Concat", ["s1"] * channels, ["s"], axis=1, name="channels"))
    nodes += [h.make_node("Conv", ["s" if channels > 1 else "s1", "basis"], ["c"], strides=[32], group=group,
                          name="bank"),
              h.make_node("Mul", ["c", "c"], ["pw"], name="power"),
              h.make_node("Add", ["pw", "guard"], ["pg"], name="guarded"),
              h.make_node("Log", ["pg"], ["y"], name="log")]
    inits.append(nh.from_array(np.array(1e-6, np.float32), "guard"))
    m = h.make_model(h.make_graph(nodes, "g", inputs, [h.make_tensor_value_info("y", T.FLOAT, [1, None, None])], inits),
                     opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    return m


def test_a_conv_filtering_the_waveform_computes_in_float32_from_half_weights():
    m = _conv_front_end(_dft_basis())
    r, report = convert_precision_proto(m, "float16")
    kept = _kept(report)
    assert kept == {"wave": SIGNAL_PATH, "unsq": SIGNAL_PATH, "bank": SIGNAL_FILTER, "guarded": kept["guarded"],
                    "power": SPECTRUM, "log": SPECTRUM}
    assert not report.half_by_op
    assert next(t for t in r.graph.initializer if t.name == "basis").data_type == T.FLOAT16
    bank = next(n for n in r.graph.node if n.op_type == "Conv")
    cast = next(n for n in r.graph.node if n.output[0] == bank.input[1])
    assert cast.op_type == "Cast" and cast.input[0] == "basis" and bank.input[0] == "s1"
    onnx.checker.check_model(r, full_check=True)
    want = ReferenceEvaluator(m).run(None, {"x": TONE})[0]
    # the same Conv on the waveform rounded to float16 is 8.5e-3 off: its noise fills the empty bands
    assert _rel_l2(want, ReferenceEvaluator(r).run(None, {"x": TONE})[0]) < 3e-3
    assert _rel_l2(want, ort.InferenceSession(r.SerializeToString(), providers=["CPUExecutionProvider"])
                   .run(None, {"x": TONE})[0]) < 3e-3


def test_a_filter_bank_on_pcm_samples_cast_to_float():
    _, report = convert_precision_proto(_conv_front_end(_dft_basis(), source="pcm"), "float16")
    kept = _kept(report)
    assert kept["bank"] == SIGNAL_FILTER and kept["scale"] == kept["pcm"] == kept["unsq"] == SIGNAL_PATH


@pytest.mark.parametrize("weight, options", [
    (np.repeat(_dft_basis(), 2, axis=1) / 2, {}),  # two input channels: not a waveform's filter bank
    (_dft_basis(), {"group": 2}),  # depthwise over two channels
    (_dft_basis(), {"gain": np.full(N, 0.5, np.float32)}),  # a weight on the way: the walk does not reach the input
    (_dft_basis(), {"source": "constant"})])  # no graph input at all
def test_other_convs_are_no_filter_banks(weight, options):
    _, report = convert_precision_proto(_conv_front_end(weight, **options), "float16")
    assert "bank" not in _kept(report) and report.half_by_op["Conv"] == 1


def _power_mel_front_end(layout=0, bank_weight=None, resample=False):
    """openWakeWord's melspectrogram as torchlibrosa exports it: waveform [1, N] -> Unsqueeze ->
    [Conv low-pass of one channel, stride 2 ->] Conv real / Conv imag (filter banks) -> Pow 2 each ->
    Add -> ``layout`` Identity nodes -> Transpose -> MatMul mel -> Clip(1e-10) -> Log -> * 10 / ln 10.
    The waveform on the int16 scale, as openWakeWord feeds it: its power overflows float16."""
    basis = _dft_basis() if bank_weight is None else bank_weight
    bins = basis.shape[0] // 2
    mel = np.abs(np.random.default_rng(3).standard_normal((bins, 8))).astype(np.float32) / bins
    inits = [nh.from_array(basis[:bins], "w_real"), nh.from_array(basis[bins:], "w_imag"), nh.from_array(mel, "melW"),
             nh.from_array(np.array(2.0, np.float32), "two"), nh.from_array(np.array(1e-10, np.float32), "floor"),
             nh.from_array(np.array(4.3429448, np.float32), "db")] + _ints(ax1=1)
    nodes = [h.make_node("Unsqueeze", ["x", "ax1"], ["s"], name="unsq")]
    signal = "s"
    if resample:
        inits.append(nh.from_array(np.full((1, 1, 5), 0.2, np.float32), "lowpass"))
        nodes.append(h.make_node("Conv", ["s", "lowpass"], ["sd"], strides=[2], pads=[2, 2], name="decimate"))
        signal = "sd"
    nodes += [h.make_node("Conv", [signal, "w_real"], ["re"], strides=[32], name="real"),
              h.make_node("Conv", [signal, "w_imag"], ["im"], strides=[32], name="imag"),
              h.make_node("Pow", ["re", "two"], ["re2"], name="re2"),
              h.make_node("Pow", ["im", "two"], ["im2"], name="im2"),
              h.make_node("Add", ["re2", "im2"], ["p0"], name="power")]
    for i in range(layout):
        nodes.append(h.make_node("Identity", [f"p{i}"], [f"p{i + 1}"], name=f"layout{i}"))
    nodes += [h.make_node("Transpose", [f"p{layout}"], ["pt"], perm=[0, 2, 1], name="frames"),
              h.make_node("MatMul", ["pt", "melW"], ["m"], name="mel"),
              h.make_node("Clip", ["m", "floor"], ["mc"], name="clip"),
              h.make_node("Log", ["mc"], ["lg"], name="log"),
              h.make_node("Mul", ["lg", "db"], ["y"], name="decibels")]
    m = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, N])],
                                  [h.make_tensor_value_info("y", T.FLOAT, [1, None, 8])], inits),
                     opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    return m


LOUD = (TONE * 2 * 20000).astype(np.float32)  # a tone at 20000 on the int16 scale


@pytest.mark.parametrize("layout", [0, 20])
def test_a_power_spectrum_stays_float32_up_to_its_log(layout):
    m = _power_mel_front_end(layout)
    r, report = convert_precision_proto(m, "float16")
    kept = _kept(report)
    spectrum = {k for k, why in kept.items() if why == SPECTRUM}
    # the walk goes on through layout of any length, and stops at the Log: the decibels run in half
    assert spectrum == {"re2", "im2", "power", "frames", "mel", "log"} | {f"layout{i}" for i in range(layout)}
    assert kept["real"] == kept["imag"] == SIGNAL_FILTER and "decibels" not in kept
    assert next(t for t in r.graph.initializer if t.name == "melW").data_type == T.FLOAT16  # stored in half
    onnx.checker.check_model(r, full_check=True)
    want = ReferenceEvaluator(m).run(None, {"x": LOUD})[0]
    for got in (ReferenceEvaluator(r).run(None, {"x": LOUD})[0],
                ort.InferenceSession(r.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": LOUD})[0]):
        assert np.isfinite(got).all()  # the power in half: inf
        assert _rel_l2(want, got) < 2e-3


def test_the_spectrum_rule_is_float16s_only():
    _, report = convert_precision_proto(_power_mel_front_end(), "bfloat16")
    assert SPECTRUM not in {k.reason for k in report.kept}
    assert report.half_by_op.get("Pow") == 2


def test_a_filter_bank_written_as_a_2d_conv_and_one_after_a_resampler():
    # tf2onnx writes conv1d as a 2-D Conv on [N, C, 1, T]: weight [C, 1, 1, K]
    m = _power_mel_front_end()
    for t in m.graph.initializer:
        if t.name in ("w_real", "w_imag"):
            t.CopyFrom(nh.from_array(nh.to_array(t)[:, :, None, :], t.name))
    unsq = next(n for n in m.graph.node if n.name == "unsq")
    unsq.input[1] = "ax12"
    m.graph.initializer.append(nh.from_array(np.array([1, 2], np.int64), "ax12"))
    for n in m.graph.node:
        if n.op_type == "Conv":
            n.attribute[0].CopyFrom(h.make_attribute("strides", [1, 32]))
        if n.name == "power":
            n.output[0] = "p4"
    m.graph.node.insert([i for i, n in enumerate(m.graph.node) if n.name == "power"][0] + 1,
                        h.make_node("Squeeze", ["p4", "ax2"], ["p0"], name="squeeze"))
    m.graph.initializer.extend(_ints(ax2=2))
    onnx.checker.check_model(m, full_check=True)
    _, report = convert_precision_proto(m, "float16")
    kept = _kept(report)
    assert kept["real"] == kept["imag"] == SIGNAL_FILTER and kept["squeeze"] == SPECTRUM
    # a low-pass filter of one channel before them (a constant-Q transform's decimation): the
    # walk back from the banks goes through it to the graph input
    _, report = convert_precision_proto(_power_mel_front_end(resample=True), "float16")
    kept = _kept(report)
    assert kept["real"] == kept["imag"] == kept["decimate"] == SIGNAL_FILTER and kept["unsq"] == SIGNAL_PATH


def test_a_2d_conv_of_one_channel_on_a_picture_is_no_filter_bank():
    """A grayscale picture's first Conv (weight [C, 1, 3, 3]) reads a graph input through nothing:
    no filter bank, it runs in half."""
    w = nh.from_array(np.random.default_rng(0).standard_normal((4, 1, 3, 3)).astype(np.float32), "w")
    m = h.make_model(h.make_graph([h.make_node("Conv", ["x", "w"], ["y"], name="conv")], "g",
                                  [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 8, 8])],
                                  [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 6, 6])], [w]),
                     opset_imports=[h.make_opsetid("", 17)])
    _, report = convert_precision_proto(m, "float16")
    assert report.half_by_op == {"Conv": 1}


def test_the_walk_back_stops_at_a_filter_bank_of_many_outputs():
    """Only a filter of one output channel makes a waveform again: a Conv reading one band of a
    bank is not traced back through the bank to the graph input (no filter bank, half)."""
    inits = [nh.from_array(_dft_basis()[:2], "bank_w"), nh.from_array(_dft_basis()[:4], "second_w")] + \
        _ints(ax1=1, zero=0, one=1)
    nodes = [h.make_node("Unsqueeze", ["x", "ax1"], ["s"], name="unsq"),
             h.make_node("Conv", ["s", "bank_w"], ["b"], name="bank"),
             h.make_node("Slice", ["b", "zero", "one", "ax1"], ["band"], name="band"),
             h.make_node("Conv", ["band", "second_w"], ["y"], name="second")]
    m = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, N])],
                                  [h.make_tensor_value_info("y", T.FLOAT, [1, 4, None])], inits),
                     opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(m, full_check=True)
    kept = _kept(convert_precision_proto(m, "float16")[1])
    assert kept["bank"] == SIGNAL_FILTER and "second" not in kept
