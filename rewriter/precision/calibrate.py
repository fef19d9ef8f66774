"""Calibration: which float32 values of a model leave float16's range on real or random inputs.

The float32 model runs once in ONNX Runtime with every float32 value of its main graph made
an output; a value whose largest finite magnitude exceeds half of float16's largest (room for
the rounding and accumulation of the half computation) is reported. Its producer and readers
then stay float32 (the auto-mixed-precision idea, measured once instead of searched).
"""

from __future__ import annotations

import numpy as np
import onnx

from rewriter.errors import RewriterError
from rewriter.precision.plan import F16_MAX

__all__ = ["measure", "load_samples", "MARGIN"]

MARGIN = 0.5  # a value beyond MARGIN * float16's largest counts as out of range
CALIBRATION_HINT = ("--calibration-data NPZ (one array per graph input), or --input-shape NAME:DIMS / "
                    "--input-value NAME:VALUES")


def load_samples(model: onnx.ModelProto, paths) -> list[dict]:
    """The graph inputs' values from each .npz of ``paths`` (one array per input, under its
    name), as the inputs' element types; RewriterError naming the file and the problem."""
    inputs = {v.name: v for v in model.graph.input}
    for t in model.graph.initializer:
        inputs.pop(t.name, None)
    samples = []
    for path in paths:
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except (OSError, ValueError) as e:
            raise RewriterError(f"--calibration-data {path}: not a readable .npz ({e})") from None
        unknown = sorted(set(arrays) - set(inputs))
        missing = sorted(set(inputs) - set(arrays))
        if unknown or missing:
            said = ([f"no graph input named {', '.join(map(repr, unknown))}"] if unknown else []) + \
                   ([f"no array for {', '.join(map(repr, missing))}"] if missing else [])
            raise RewriterError(f"--calibration-data {path}: {'; '.join(said)} (graph inputs: "
                                f"{', '.join(inputs)})")
        feeds = {}
        for name, value in arrays.items():
            elem = inputs[name].type.tensor_type.elem_type
            want = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)) if elem else value.dtype
            if value.dtype.kind != want.kind and not (value.dtype.kind in "iu" and want.kind in "iu"):
                raise RewriterError(f"--calibration-data {path}: {name!r} is {value.dtype}, the input is {want}")
            feeds[name] = value.astype(want, copy=False)
        samples.append(feeds)
    return samples


def measure(model: onnx.ModelProto, base_dir: str | None, *, input_shapes=None, input_values=None,
            seed: int = 0, feeds: dict | None = None, samples: list | None = None,
            random: bool = False) -> dict[str, float]:
    """{value name: largest magnitude} for the float32 values beyond ``MARGIN`` x float16's range,
    over ``samples`` (input dicts) when given, else ``feeds``, else random inputs (``random``:
    the samples given are random ones, so a failure suggests real inputs)."""
    import onnxruntime as ort

    from rewriter.precision.graphs import FLOAT, Graphs
    from rewriter.verify.numerics.random_inputs import random_feeds

    graphs = Graphs(model)
    names = [o for n in model.graph.node for o in n.output if o and graphs.elem(o) == FLOAT]
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    for name in names:
        if name not in known:
            probe.graph.output.append(onnx.helper.make_tensor_value_info(name, FLOAT, None))
    random = random or (samples is None and feeds is None)
    if samples is None and feeds is None:
        feeds = random_feeds(model, input_shapes=input_shapes, input_values=input_values, seed=seed)
    import tempfile

    from rewriter.io.save import save_model

    with tempfile.TemporaryDirectory(prefix="rewriter-calibrate-") as d:
        path = f"{d}/probe.onnx"
        save_model(probe, path)
        seen: dict[str, float] = {}
        try:
            ort.set_default_logger_severity(4)  # fatal only: a failure is our one error line, not ORT's log line
            options, run_options = ort.SessionOptions(), ort.RunOptions()
            options.log_severity_level = run_options.log_severity_level = 4
            session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            for sample in (samples if samples is not None else [feeds]):
                outputs = session.run(None, sample, run_options)
                for meta, value in zip(session.get_outputs(), outputs):
                    v = np.asarray(value)
                    if v.dtype != np.float32 or not v.size:
                        continue
                    finite = np.abs(v[np.isfinite(v)])
                    top = float(finite.max()) if finite.size else 0.0
                    if top > MARGIN * F16_MAX:
                        seen[meta.name] = max(top, seen.get(meta.name, 0.0))
        except Exception as e:  # noqa: BLE001
            hint = (f"; the random inputs may not be ones the model takes: give real ones with {CALIBRATION_HINT}"
                    if random else "")
            raise RewriterError(f"--calibrate: ONNX Runtime cannot run the float32 model: "
                                f"{str(e).strip().splitlines()[0][:300]}{hint}") from None
    return seen
