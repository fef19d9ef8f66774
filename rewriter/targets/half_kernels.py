"""Which ONNX Runtime CPU kernels take float16 / bfloat16, per release.

From ``data/onnxruntime_half.json``, measured by ``tools/ort_kernel_probe.py --dtypes
float16,bfloat16 --current`` (its docstring says how; ``tools/runtime_data/README.md`` when).
Per release ("MAJOR.MINOR")::

    {"onnxruntime": "1.15.1", "opsets": {"": 19, "ai.onnx.ml": 3},
     "float16": {"": {"Cast": [6, 9, 13], ...}, "ai.onnx.ml": {...}},
     "bfloat16": {...},
     "no_kernel": {"float16": {"": {"Add": [7, 13, 14], ...}, ...}, "bfloat16": {...}}}

``float16`` / ``bfloat16`` list the schema since_versions whose single-node model, with every
float type parameter in that type, runs in it on the CPU execution provider: a kernel of its
own, or a function body whose nodes all have one. ``no_kernel`` lists the ones measured
without: no kernel, or only ONNX Runtime's own fallback (Casts to float32 around the node).
Of the rest, a schema that does not take the type, or is newer than the release's opset, has
none; anything else is unknown. Linux x86_64 wheels: arm64 builds register more float16 kernels.
"""

from __future__ import annotations

from rewriter.graph.schemas import is_default_domain, schema_at
from rewriter.targets.release_tables import load_releases, release_key, release_names

__all__ = ["has_half_kernel", "half_releases", "HALF_TYPES"]

HALF_TYPES = ("float16", "bfloat16")
_TABLE = "onnxruntime_half.json"


def _data() -> dict:
    return load_releases(_TABLE)


def half_releases() -> list[str]:
    """The measured releases, oldest first."""
    return release_names(_TABLE)


def _measured(release: str) -> tuple[dict, bool] | None:
    """(the entry of the newest measured release not newer than ``release``, whether it is
    ``release`` itself); None when ``release`` is older than all or not MAJOR.MINOR."""
    wanted = release_key(release)
    if wanted is None:
        return None
    known = sorted(_data())
    older = [k for k in known if k <= wanted]
    if not older:
        return None
    return _data()[older[-1]], older[-1] == wanted


def has_half_kernel(release: str, domain: str, op: str, since_version: int, dtype: str) -> bool | None:
    """Whether ONNX Runtime ``release`` ("MAJOR.MINOR"; a patch number is ignored) runs ``op``
    of schema ``since_version`` (an opset version stands for the schema in force at it) in
    ``dtype`` ("float16" or "bfloat16") on the CPU execution provider, as measured. A release
    between two measured ones counts as the older, one newer than all as the newest. None
    when not known (a release older than all, a domain, op or version not measured).
    ValueError for another dtype."""
    if dtype not in HALF_TYPES:
        raise ValueError(f"dtype must be one of {', '.join(HALF_TYPES)}, got {dtype!r}")
    found = _measured(release)
    if found is None:
        return None
    entry, exact = found
    domain = "" if is_default_domain(domain) else domain
    if domain not in entry[dtype]:
        return None
    schema = schema_at(op, since_version, domain)
    version = schema.since_version if schema is not None else since_version
    if version in entry[dtype][domain].get(op, ()):
        return True
    if version in entry["no_kernel"][dtype].get(domain, {}).get(op, ()):
        return False
    if schema is not None and not any(f"({dtype})" in t for tc in schema.type_constraints
                                      for t in tc.allowed_type_strs):
        return False  # the schema does not take the type
    if exact and version > entry["opsets"].get(domain, version):
        return False  # the release does not know that schema version
    return None
