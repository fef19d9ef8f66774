"""Run one ONNX model (or a batch) in the OpenVINO of the interpreter running this.

Usage and file formats: tools/runtime_run_common.py.  The model is read with
``Core.read_model`` (OpenVINO's ONNX frontend) and compiled for "CPU" with
``INFERENCE_PRECISION_HINT=f32``: on a CPU with AMX (or avx512_bf16) OpenVINO otherwise infers
in bfloat16 and its results differ from float32 ones (issue 41 counted 337 backend node tests
that way), so float32 is asked for and the hint is recorded in the batch's "config" line.
``REWRITER_OPENVINO_PRECISION=default`` leaves the hint out (what a user gets who sets nothing:
``bench/bench_runtime_targets.py`` measures that too); the config line then records the precision
the compiled model reports.
``INFERENCE_NUM_THREADS`` is 1 unless REWRITER_RUNTIME_THREADS says otherwise (the probe runs
beside other work).  Inputs are fed by ONNX input name; outputs are named by the ONNX output
name the compiled model keeps (the first of its tensor names otherwise).  bfloat16, float8 and
4-bit inputs come as raw bits and go in as ``ov.Tensor(bits, shape, type)`` (4-bit codes packed
two a byte, as OpenVINO keeps them); such outputs go back as their raw bits (uint16 / uint8; a
4-bit output unpacked to one code a byte), which the probe compares bit for bit.
"""

from __future__ import annotations

import os
import sys

from runtime_run_common import Backend, FeedError, main

# ml_dtypes name -> OpenVINO element type, for inputs given as raw bits (runtime_run_common.py)
EXOTIC = {"bfloat16": "bf16", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2", "float8_e8m0fnu": "f8e8m0",
          "int4": "i4", "uint4": "u4", "float4_e2m1fn": "f4e2m1"}
NIBBLES = ("i4", "u4", "f4e2m1")  # OpenVINO packs two a byte, the first element in the low nibble


class OpenVINO(Backend):
    name = "openvino"

    def __init__(self):
        self._core = None

    def _ov(self):
        import openvino as ov

        if self._core is None:
            self._core = ov.Core()
        return ov

    def version(self) -> str:
        ov = self._ov()
        return ov.__version__ if hasattr(ov, "__version__") else ov.get_version()

    def _hint(self) -> dict:
        if os.environ.get("REWRITER_OPENVINO_PRECISION", "f32") == "default":
            return {}
        return {"INFERENCE_PRECISION_HINT": "f32"}

    def config(self) -> dict:
        ov = self._ov()
        hint = self._hint().get("INFERENCE_PRECISION_HINT")
        if hint is None:  # what the plugin picks on this CPU when nothing is asked
            hint = "default: " + str(self._core.get_property("CPU", "INFERENCE_PRECISION_HINT"))
        return {"device": "CPU", "INFERENCE_PRECISION_HINT": hint,
                "INFERENCE_NUM_THREADS": int(os.environ.get("REWRITER_RUNTIME_THREADS") or 1),
                "full_version": ov.get_version()}

    def load(self, path: str):
        self._ov()
        model = self._core.read_model(path)
        threads = int(os.environ.get("REWRITER_RUNTIME_THREADS") or 1)
        return self._core.compile_model(model, "CPU", {**self._hint(), "INFERENCE_NUM_THREADS": threads})

    def exotic(self, bits, type_name: str):
        ov = self._ov()
        if type_name not in EXOTIC:
            raise FeedError(f"no OpenVINO element type for {type_name} taken here")
        kind = EXOTIC[type_name]
        if kind in NIBBLES:
            import numpy as np

            codes = bits.reshape(-1).astype(np.uint8) & 15
            if codes.size % 2:
                codes = np.append(codes, np.uint8(0))
            packed = (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8)
            return ov.Tensor(packed, list(bits.shape), getattr(ov.Type, kind))
        return ov.Tensor(bits, list(bits.shape), getattr(ov.Type, kind))

    def run(self, compiled, feeds: dict) -> list:
        import numpy as np

        request = compiled.create_infer_request()
        inputs = {}
        named = {n for port in compiled.inputs for n in port.get_names()}
        # a Parameter that also feeds a Result straight (Max of one input, Dropout in inference)
        # may carry the output's name only: it takes the first ONNX input (in graph order, as the
        # probe writes them) no port names, the ports keeping that order less unused inputs
        unnamed = [n for n in feeds if n not in named]
        for port in compiled.inputs:
            names = port.get_names()
            name = next((n for n in feeds if n in names), None)
            if name is None and unnamed:
                name = unnamed.pop(0)
            if name is None:
                raise KeyError(f"no input given for {sorted(names)}")
            arr = feeds[name]
            if hasattr(arr, "dtype") and arr.dtype.kind in "US":
                arr = arr.astype(str)
            inputs[port] = arr
        results = request.infer(inputs)
        out = []
        for port in compiled.outputs:
            value = np.array(results[port], copy=True)
            kind = str(port.get_element_type().get_type_name())
            if kind in NIBBLES:  # packed: one 4-bit code a byte, in the output's shape
                shape = list(request.get_tensor(port).shape)
                flat = value.reshape(-1).view(np.uint8)
                codes = np.stack([flat & 15, flat >> 4], axis=1).reshape(-1)[: int(np.prod(shape))]
                value = codes.reshape(shape)
            elif kind in EXOTIC.values():  # bits, not float16
                value = value.view(np.uint16 if value.dtype.itemsize == 2 else np.uint8)
            out.append((list(port.get_names()), value))
        return out


if __name__ == "__main__":
    sys.exit(main(OpenVINO(), sys.argv[1:]))
