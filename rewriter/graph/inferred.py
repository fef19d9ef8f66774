"""A model's lenient ONNX shape inference, run when first asked for and at most once.

The input checks (ReduceProd ranks) and the converter (element types for type-only steps,
ranks for some adapters) share one inference of the input; many conversions need none at all
(going up, most steps keep every node whatever its types), so nobody pays for it up front.
"""

from __future__ import annotations

import logging

import onnx

__all__ = ["LazyInference", "resolve"]

logger = logging.getLogger(__name__)


class LazyInference:
    """``onnx.shape_inference.infer_shapes(model)`` (lenient), computed on the first call;
    the call returns None when inference fails."""

    def __init__(self, model: onnx.ModelProto):
        self._model = model
        self._done = False
        self._value: onnx.ModelProto | None = None

    @property
    def done(self) -> bool:
        return self._done

    def __call__(self) -> onnx.ModelProto | None:
        if not self._done:
            try:
                self._value = onnx.shape_inference.infer_shapes(self._model)
            except Exception as e:  # inference trouble costs information, it is reported elsewhere
                logger.info("shape inference failed: %s", e)
                self._value = None
            self._done = True
        return self._value


def resolve(inferred, model: onnx.ModelProto) -> onnx.ModelProto | None:
    """The inferred model from ``inferred``: a ModelProto, a :class:`LazyInference` (or any
    zero-argument callable), or None (then ``model`` is inferred here); None when that fails."""
    if inferred is None:
        inferred = LazyInference(model)
    return inferred() if callable(inferred) else inferred
