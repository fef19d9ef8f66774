"""One-node RNN / GRU / LSTM models for the tests of their unrolled form, and their oracles: ONNX
Runtime's own kernels (which take layout 0 only: a layout-1 node is run as its layout-0 twin on
transposed data) and onnx.reference."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

__all__ = ["GATES", "Recurrent", "build", "ort_outputs", "reference_outputs", "relative_error"]

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


@dataclasses.dataclass
class Recurrent:
    """What one model holds: the op, its sizes and attributes, which optional inputs it has."""

    op: str
    steps: int
    batch: int
    inputs: int
    hidden: int
    direction: str = "forward"
    layout: int = 0
    attrs: dict = dataclasses.field(default_factory=dict)
    bias: bool = True
    lens: list | None = None  # sequence_lens' values
    lens_fed: bool = True  # a graph input (else an initializer)
    initial: bool = True  # initial_h (and initial_c) as graph inputs
    peepholes: bool = False
    fed_weights: bool = False  # W and R as graph inputs
    seed: int = 0

    @property
    def dirs(self) -> int:
        return 2 if self.direction == "bidirectional" else 1


def _node_inputs(r: Recurrent) -> list[str]:
    names = ["X", "W", "R", "B" if r.bias else "", "seq" if r.lens is not None else "", "h0" if r.initial else ""]
    if r.op == "LSTM":
        names += ["c0" if r.initial else "", "P" if r.peepholes else ""]
    while names and not names[-1]:
        names.pop()
    return names


def _values(r: Recurrent) -> dict:
    rng = np.random.default_rng(r.seed)
    g, d, h = GATES[r.op], r.dirs, r.hidden
    x = (r.steps, r.batch, r.inputs) if r.layout == 0 else (r.batch, r.steps, r.inputs)
    state = (d, r.batch, h) if r.layout == 0 else (r.batch, d, h)
    values = {"X": rng.standard_normal(x), "W": rng.standard_normal((d, g * h, r.inputs)) * 0.7,
              "R": rng.standard_normal((d, g * h, h)) * 0.7}
    if r.bias:
        values["B"] = rng.standard_normal((d, 2 * g * h)) * 0.5
    if r.initial:
        values["h0"] = rng.standard_normal(state)
        if r.op == "LSTM":
            values["c0"] = rng.standard_normal(state)
    if r.peepholes:
        values["P"] = rng.standard_normal((d, 3 * h)) * 0.5
    values = {k: v.astype(np.float32) for k, v in values.items()}
    if r.lens is not None:
        values["seq"] = np.array(r.lens, dtype=np.int32)
    return values


def build(r: Recurrent, opset: int = 14) -> tuple[onnx.ModelProto, dict]:
    """(the model, its feeds)."""
    values = _values(r)
    names = _node_inputs(r)
    fed = {"X", "h0", "c0"} | ({"seq"} if r.lens_fed else set()) | ({"W", "R"} if r.fed_weights else set())
    inits = [numpy_helper.from_array(values[n], n) for n in names if n and n not in fed]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "seq" else TensorProto.FLOAT,
                                            list(values[n].shape)) for n in names if n in fed]
    outs = ["Y", "Y_h"] + (["Y_c"] if r.op == "LSTM" else [])
    y = [r.steps, r.dirs, r.batch, r.hidden] if r.layout == 0 else [r.batch, r.steps, r.dirs, r.hidden]
    s = [r.dirs, r.batch, r.hidden] if r.layout == 0 else [r.batch, r.dirs, r.hidden]
    outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, y if o == "Y" else s) for o in outs]
    attrs = dict(r.attrs, hidden_size=r.hidden, direction=r.direction)
    if r.layout:
        attrs["layout"] = 1
    node = helper.make_node(r.op, names, outs, name=f"the_{r.op.lower()}", **attrs)
    model = helper.make_model(helper.make_graph([node], "g", inputs, outputs, inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, {n: values[n] for n in names if n in fed}


def _session(model: onnx.ModelProto):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def ort_outputs(r: Recurrent) -> list[np.ndarray]:
    """ONNX Runtime's GRU / LSTM / RNN kernel on ``r``'s model (layout 1 through its layout-0 twin)."""
    model, feeds = build(r)
    if not r.layout:
        return _session(model).run(None, feeds)
    twin, _ = build(dataclasses.replace(r, layout=0))
    moved = {k: (v.transpose(1, 0, 2) if k in ("X", "h0", "c0") else v) for k, v in feeds.items()}
    got = _session(twin).run(None, moved)
    return [got[0].transpose(2, 0, 1, 3)] + [v.transpose(1, 0, 2) for v in got[1:]]


def reference_outputs(r: Recurrent) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    model, feeds = build(r)
    return ReferenceEvaluator(model).run(None, feeds)


def relative_error(want: np.ndarray, got: np.ndarray) -> float:
    want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
    assert want.shape == got.shape, (want.shape, got.shape)
    scale = max(np.linalg.norm(want), 1e-30)
    return float(np.linalg.norm(want - got) / scale)
