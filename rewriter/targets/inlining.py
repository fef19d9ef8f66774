"""Where an ONNX Runtime release inlines a function op's body wrongly, per half type.

ONNX Runtime replaces a node that has no kernel for its types by the op's ONNX function body.
Releases 1.15 and 1.16 write that body for the opset it was first defined at, whatever the
model's: a float16 LayerNormalization-17, Softmax-13, LogSoftmax-13 or SoftmaxCrossEntropyLoss-13
in a model of opset 18 or 19 becomes ReduceMean / ReduceMax nodes with an ``axes`` attribute, and
the session is refused ("Unrecognized attribute: axes for operator ReduceMean"). 1.17 gets it right.
The conversion for such a release expands those nodes itself, into the body built for the model's
opset (``rewriter.convert.for_target``).

From ``data/onnxruntime_inlining.json``, measured by ``tools/ort_inline_probe.py`` (its docstring
says how): per release, per half type, op -> {since_version: [opsets where loading fails so]}.
"""

from __future__ import annotations

from rewriter.targets.release_tables import load_releases, release_key, release_names

__all__ = ["inlines_wrongly", "inlining_releases"]

_TABLE = "onnxruntime_inlining.json"


def _data() -> dict:
    return load_releases(_TABLE)


def inlining_releases() -> list[str]:
    """The measured releases, oldest first."""
    return release_names(_TABLE)


def inlines_wrongly(release: str, op: str, since_version: int, opset: int, dtype: str) -> bool:
    """Whether ONNX Runtime ``release`` ("MAJOR.MINOR"; a patch number is ignored) refuses a model
    of default-domain ``opset`` holding ``op`` (of schema ``since_version``) in ``dtype``
    ("float16", "bfloat16") because it inlines the op's function body wrongly, as measured. A
    release between two measured ones counts as the older, one newer than all as the newest;
    one older than all, or not MAJOR.MINOR, as not known: False."""
    wanted = release_key(release)
    if wanted is None:
        return False
    older = [k for k in sorted(_data()) if k <= wanted]
    if not older:
        return False
    return opset in _data()[older[-1]].get(dtype, {}).get(op, {}).get(str(since_version), ())
