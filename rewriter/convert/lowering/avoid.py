"""Forms a lowering writes otherwise because the runtime the conversion targets lacks them.

:func:`rewriter.convert.for_target.lower_for` lowers a model's nodes for one runtime release; it
runs the lowering inside :func:`avoiding` with the forms that release lacks,
and a lowering that has another exact form asks :func:`avoids`. Outside ``avoiding`` (``lower_ops``
alone, ``--lower-ops``) nothing is avoided: the lowerings write their default forms.

- :data:`LOOP`: the release implements no ``Loop`` at any schema version it could take (tract 0.23,
  TVM 0.27, LiteRT 2.6, measured); SVMClassifier's pairwise coupling is then written unrolled
  (:mod:`rewriter.convert.lowering.ml_svm_prob`), the same rounds with the same results.
- :data:`DOUBLE`: the release computes no double inside a graph (LiteRT 2.6: its CumSum refuses a
  double the graph computes, measured, and onnx2tf makes double inputs float); SVMClassifier's pair
  sums are then float-float pairs (:mod:`rewriter.convert.lowering.ml_svm_sums`), within the
  tolerance stated there.
"""

from __future__ import annotations

import contextlib
import contextvars

__all__ = ["DOUBLE", "LOOP", "avoiding", "avoids"]

LOOP = "Loop"
DOUBLE = "double"

_AVOIDED: contextvars.ContextVar[frozenset] = contextvars.ContextVar("rewriter_lowering_avoided", default=frozenset())


@contextlib.contextmanager
def avoiding(forms):
    """Lowerings run inside avoid ``forms`` (names above); the previous set comes back after."""
    token = _AVOIDED.set(frozenset(forms))
    try:
        yield
    finally:
        _AVOIDED.reset(token)


def avoids(form: str) -> bool:
    """Whether the lowering running now must not write ``form``."""
    return form in _AVOIDED.get()

