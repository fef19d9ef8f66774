"""Property tests of the DFT/STFT decompositions over shapes, axes, lengths and flags: whenever
the oracle's route (tests/convert/support/routes_spectral.py, through expressible.py) says a node is
expressible at the target the conversion succeeds and matches numpy.fft; whenever the
conversion refuses, the oracle says inexpressible."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import numpy_helper

import rewriter
from rewriter.convert import convert_model
from tests.convert.support.expressible import why_inexpressible
from tests.convert.support.spectral_util import F, close, dft_numpy, graph_model, ort, stft_numpy
from tests.oracle import assert_valid

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _oracle(m, target):
    g = m.graph
    types = {vi.name: vi.type for vi in [*g.input, *g.output]}
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    source = next(o.version for o in m.opset_import if o.domain == "")
    return why_inexpressible(g.node[0], source, target, types.get, consts.get)


def _convert_or_refuse(m, target):
    why = _oracle(m, target)
    try:
        result, _ = convert_model(m, target)
    except rewriter.RewriterError as e:
        assert why is not None, f"refused though the oracle says expressible: {e}"
        return None
    assert why is None, f"converted though the oracle says: {why}"
    assert_valid(result)
    return result


@st.composite
def dft_cases(draw):
    rank = draw(st.integers(2, 4))
    channels = draw(st.sampled_from([1, 2]))
    dims = [draw(st.integers(1, 7)) for _ in range(rank - 1)] + [channels]
    axis = draw(st.integers(-rank, rank - 2).filter(lambda a: a != -1))
    inverse = draw(st.booleans())
    onesided = draw(st.booleans()) and (channels == 2) == inverse  # the combinations the docs define
    length = draw(st.one_of(st.none(), st.integers(1, 12)))
    if inverse and onesided and length is None and dims[axis] < 2:
        length = 2
    dynamic = draw(st.booleans())
    opset = draw(st.sampled_from([17, 20]))
    return dims, axis, inverse, onesided, length, dynamic, opset, draw(st.sampled_from([7, 11, 13, 15]))


@SETTINGS
@given(dft_cases())
def test_dft_matches_numpy_or_is_refused_with_the_oracle(case):
    dims, axis, inverse, onesided, length, dynamic, opset, target = case
    declared = list(dims)
    if dynamic:
        declared[axis] = None
    inputs, inits, attrs = ["x"], [], {"inverse": int(inverse), "onesided": int(onesided)}
    if length is not None:
        inputs.append("L")
        inits.append(("L", np.array(length, dtype=np.int64)))
    if opset == 20:
        inputs += [""] * (2 - len(inputs)) + ["a"]
        inits.append(("a", np.array(axis, dtype=np.int64)))
    else:
        attrs["axis"] = axis
    m = graph_model("DFT", inputs, attrs, [("x", F, declared)], inits, opset=opset, out_rank=len(dims))
    result = _convert_or_refuse(m, target)
    if result is None:
        assert dynamic and length is None
        return
    x = np.random.default_rng(len(dims)).normal(size=dims).astype(np.float32)
    close(ort(result, {"x": x})[0], dft_numpy(x, axis=axis, inverse=inverse, onesided=onesided, length=length),
          np.float32)


@st.composite
def stft_cases(draw):
    total = draw(st.integers(1, 40))
    channels = draw(st.sampled_from([0, 1, 2]))  # 0: a rank-2 signal
    step = draw(st.integers(1, 9))
    n = draw(st.integers(1, 44))
    how = draw(st.sampled_from(["window", "computed window", "frame_length", "both", "neither"]))
    return (total, channels, step, n, how, draw(st.booleans()), draw(st.booleans()),
            draw(st.sampled_from([7, 11, 13, 15])))


@SETTINGS
@given(stft_cases())
def test_stft_matches_numpy_or_is_refused_with_the_oracle(case):
    total, channels, step, n, how, onesided, dynamic, target = case
    rng = np.random.default_rng(total)
    shape = [2, total] + ([channels] if channels else [])
    x = rng.normal(size=shape).astype(np.float32)
    window = rng.uniform(size=n).astype(np.float32)
    declared = [None, None if dynamic else total] + shape[2:]
    inputs, inits, specs = ["x", "s"], [("s", np.array(step, dtype=np.int64))], [("x", F, declared)]
    feeds = {"x": x}
    if how in ("window", "both"):
        inputs.append("w")
        inits.append(("w", window))
    elif how == "computed window":
        inputs.append("w")
        specs.append(("w", F, [n]))
        feeds["w"] = window
    if how in ("frame_length", "both"):
        inputs += [""] * (3 - len(inputs)) + ["l"]
        inits.append(("l", np.array(n, dtype=np.int64)))
    m = graph_model("STFT", inputs, {"onesided": int(onesided)}, specs, inits, out_rank=4)
    result = _convert_or_refuse(m, target)
    frame = total if how == "neither" else n
    if result is None:
        assert frame > total and not dynamic or how == "neither" and dynamic
        return
    if frame > total:  # a dynamic length shorter than the frame: no frame at run time
        return
    expected = stft_numpy(x, step, window if "window" in how or how == "both" else None, frame, onesided)
    close(ort(result, feeds)[0], expected, np.float32)


def _refusal_models():
    h = np.hanning(12).astype(np.float32)
    s4 = ("s", np.array(4))
    yield "dft dynamic length", graph_model("DFT", ["x"], {"axis": 1}, [("x", F, [2, None, 1])], out_rank=3)
    yield "dft computed length", graph_model("DFT", ["x", "L"], {}, [("x", F, [2, 6, 1]), ("L", 7, [])], out_rank=3)
    yield "dft computed axis", graph_model("DFT", ["x", "", "a"], {}, [("x", F, [2, 6, 1]), ("a", 7, [])],
                                           opset=20, out_rank=3)
    yield "dft unknown rank", graph_model("DFT", ["x"], {}, [("x", F, None)])
    yield "dft dynamic parts", graph_model("DFT", ["x"], {}, [("x", F, [2, 6, None])], out_rank=3)
    yield "dft rfft of complex", graph_model("DFT", ["x"], {"onesided": 1}, [("x", F, [2, 6, 2])], out_rank=3)
    yield "dft irfft of real", graph_model("DFT", ["x"], {"onesided": 1, "inverse": 1}, [("x", F, [2, 6, 1])],
                                           out_rank=3)
    yield "dft axis out of range", graph_model("DFT", ["x"], {"axis": 2}, [("x", F, [2, 6, 1])], out_rank=3)
    yield "dft huge", graph_model("DFT", ["x"], {}, [("x", F, [1, 8192, 2])], out_rank=3)
    yield "stft computed step", graph_model("STFT", ["x", "s", "w"], {}, [("x", F, [2, 40, 1]), ("s", 7, [])],
                                            [("w", h)], out_rank=4)
    yield "stft computed frame_length", graph_model("STFT", ["x", "s", "", "l"], {}, [("x", F, [2, 40, 1]),
                                                    ("l", 7, [])], [s4], out_rank=4)
    yield "stft dynamic window", graph_model("STFT", ["x", "s", "w"], {}, [("x", F, [2, 40, 1]), ("w", F, [None])],
                                             [s4], out_rank=4)
    yield "stft no frame length", graph_model("STFT", ["x", "s"], {}, [("x", F, [2, None, 1])], [s4], out_rank=4)
    yield "stft frame too long", graph_model("STFT", ["x", "s", "w"], {}, [("x", F, [2, 8, 1])], [s4, ("w", h)],
                                             out_rank=4)
    yield "stft rank 4", graph_model("STFT", ["x", "s"], {}, [("x", F, [2, 3, 40, 1])], [s4], out_rank=4)
    yield "stft window length", graph_model("STFT", ["x", "s", "w", "l"], {}, [("x", F, [2, 40, 1])],
                                            [s4, ("w", h), ("l", np.array(10))], out_rank=4)


def test_every_refusal_agrees_with_the_oracle():
    for what, m in _refusal_models():
        for target in (7, 11, 13, 16):
            assert _oracle(m, target) is not None, (what, target)
            try:
                convert_model(m, target)
            except rewriter.RewriterError as e:
                assert "decompose" in str(e) or "DFT" in str(e), (what, str(e))
            else:
                raise AssertionError(f"{what} converted to {target}")
