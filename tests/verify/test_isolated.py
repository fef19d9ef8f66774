"""A function run in a forked child: its result comes back, what it raises becomes an error
with its message, a crash (a signal) becomes ChildCrashed, and the parent is untouched."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from rewriter.verify.numerics.isolated import ChildCrashed, run_isolated

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

_STATE = {"touched": False}


def _arrays(n):
    _STATE["touched"] = True  # in the child only
    return [np.arange(n, dtype=np.float32), np.ones((2, 2), np.int64)]


def _raises():
    raise ValueError("no such input")


def _crashes(sig):
    os.kill(os.getpid(), sig)


def test_the_result_comes_back_and_the_parent_is_untouched():
    out = run_isolated(_arrays, 5)
    np.testing.assert_array_equal(out[0], np.arange(5, dtype=np.float32))
    assert out[1].dtype == np.int64 and out[1].shape == (2, 2)
    assert _STATE["touched"] is False


def test_an_exception_becomes_an_error_with_its_message():
    with pytest.raises(RuntimeError, match="no such input") as e:
        run_isolated(_raises)
    assert not isinstance(e.value, ChildCrashed)


@pytest.mark.parametrize("sig", [signal.SIGFPE, signal.SIGSEGV])
def test_a_crash_is_named_and_the_parent_lives_on(sig):
    with pytest.raises(ChildCrashed, match=signal.Signals(sig).name):
        run_isolated(_crashes, sig)
    assert run_isolated(_arrays, 1)[0].tolist() == [0.0]


def test_a_crash_of_onnx_runtime_in_the_check_falls_back_and_is_said(monkeypatch):
    """verify_numerics: ONNX Runtime dying of SIGFPE is the fallback reason, onnx.reference
    runs both models instead."""
    import onnx
    from onnx import helper as h

    from rewriter.verify.numerics import compare as numerics

    def crash(model, feeds):
        os.kill(os.getpid(), signal.SIGFPE)

    monkeypatch.setattr(numerics, "_run_ort", crash)
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
                         [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [8])],  # (3 were all
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [8])])  # negative: Relu all 0)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    report = numerics.verify_numerics(model, model)
    assert report.ok and report.backend_original == "reference"
    assert "crashed (SIGFPE)" in report.fallback
