"""Errors raised by rewriter: every failure a user can cause is a RewriterError."""

from __future__ import annotations

__all__ = ["RewriterError", "ConversionError", "ModelLoadError", "KernelError"]


class RewriterError(ValueError):
    """A model cannot be rewritten as asked; the message names the node and the reason."""


class ConversionError(RewriterError):
    """An opset conversion is impossible for some node."""


class ModelLoadError(RewriterError):
    """A model file cannot be read or is not a valid ONNX model."""


class KernelError(RewriterError):
    """The ReduceProd kernel was called with invalid arguments or overflowed with int_overflow='raise'."""
