"""Run one ONNX model (or a batch) in the tract of the interpreter running this (PyPI ``tract``).

Usage and file formats: tools/runtime_run_common.py.  The model goes the way tract's own
Python docs show: ``tract.onnx().load(path)`` (an InferenceModel), ``.into_model()`` (typed and
decluttered), ``.into_runnable()`` (optimized for the default CPU runtime), ``run([...])`` with
the inputs in the model's input order, picked by name.  No input fact is set: the node tests'
inputs have static shapes in the model, and a deployed model gets what it declares.  Numpy
string arrays have no tract type: such a case fails at "run".  An output tract holds as TDim
(Shape, Size) is returned as int64.
"""

from __future__ import annotations

import sys

from runtime_run_common import Backend, main


class Tract(Backend):
    name = "tract"

    def version(self) -> str:
        import tract

        return tract.version()

    def config(self) -> dict:
        return {"path": "onnx().load -> into_model -> into_runnable (default CPU runtime)"}

    def load(self, path: str):
        import tract

        inference = tract.onnx().load(path)
        inputs = [inference.input_name(i) for i in range(inference.input_count())]
        outputs = [inference.output_name(i) for i in range(inference.output_count())]
        model = inference.into_model()
        return inputs, outputs, model.into_runnable()

    def run(self, prepared, feeds: dict) -> list:
        import numpy as np

        inputs, outputs, runnable = prepared
        missing = [n for n in inputs if n not in feeds]
        if missing:
            raise KeyError(f"no input given for {missing}")
        values = runnable.run([np.array(feeds[n], order="C", copy=True) for n in inputs])
        return [(name, _numpy(value)) for name, value in zip(outputs, values)]


def _numpy(value):
    """The tensor as numpy; a TDim tensor (what Shape and Size make, dims being symbolic in tract)
    as int64, as tract's own test suite takes it (onnx-ignore-output-type)."""
    import tract

    try:
        return value.to_numpy()
    except tract.TractError as e:
        if "TDim" not in str(e):
            raise
        return value.convert_to(tract.DatumType.I64).to_numpy()


if __name__ == "__main__":
    sys.exit(main(Tract(), sys.argv[1:]))
