"""Run an ONNX model in rknn-toolkit2's simulator for ``tools/profile_probe.py``.

rknn-toolkit2 (PyPI ``rknn-toolkit2``, Rockchip's NPU toolchain) converts an ONNX model for an
NPU (``target_platform``, here RK3588) and, with no board attached, runs the converted model in
its simulator on the PC. ``build(do_quantization=False)`` keeps the weights in floating point,
which the NPU computes in float16: judge with ``--rtol``/``--atol`` suited to float16 or most
ops count as wrong. Each model is loaded with its inputs' shapes fixed (``input_size_list``),
fed in NCHW order (``data_format="nchw"``), and a failing step (it returns a non-zero code) is a
refusal. The venv: ``python -m venv ~/.cache/rewriter/runtime-venvs/rknn &&
~/.cache/rewriter/runtime-venvs/rknn/bin/pip install rknn-toolkit2==2.5.0`` (it brings torch,
onnx 1.18 and onnxruntime 1.26 with it).
"""

import contextlib
import io

import numpy as np
import onnx
from rknn.api import RKNN

NAME = "rknn-toolkit2 2.5.0 simulator (rk3588)"
PLATFORM = "rk3588"


def run(model_path, inputs):
    model = onnx.load(model_path)
    init = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in init]
    rknn = RKNN(verbose=False)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            steps = [("config", lambda: rknn.config(target_platform=PLATFORM)),
                     ("load_onnx", lambda: rknn.load_onnx(model=model_path, inputs=names,
                                                          input_size_list=[list(np.shape(inputs[n])) for n in names])),
                     ("build", lambda: rknn.build(do_quantization=False)),
                     ("init_runtime", lambda: rknn.init_runtime())]
            for step, call in steps:
                if call() != 0:
                    raise RuntimeError(f"rknn-toolkit2 {step} failed")
            outputs = rknn.inference(inputs=[np.asarray(inputs[n]) for n in names], data_format=["nchw"] * len(names))
        if outputs is None:
            raise RuntimeError("rknn-toolkit2 inference returned nothing")
        return [np.asarray(o) for o in outputs]
    finally:
        rknn.release()
