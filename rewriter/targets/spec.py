"""What a conversion is asked to reach, as one frozen object from the command line (or the API)
to the engine: the default-domain opset, the ``ai.onnx.ml`` opset, a pinned IR version, and the
runtime release (a :class:`rewriter.targets.Target`) whose limits apply.

:meth:`TargetSpec.parse` is the one parser of ``--opset`` / ``--ml-opset`` / ``--ir-version`` /
``--target``; the conversion for a runtime fills in the opsets chosen for the model
(``rewriter.convert.for_target.for_model``) with :func:`dataclasses.replace`, and nothing below
parses a target again.
"""

from __future__ import annotations

import dataclasses

from rewriter.targets import Target, parse_target

__all__ = ["TargetSpec"]


@dataclasses.dataclass(frozen=True)
class TargetSpec:
    """The opsets, IR version and runtime a conversion goes to (None: kept, or chosen for the runtime)."""

    opset: int | None = None  # the default-domain opset to reach
    ml_opset: int | None = None  # the ai.onnx.ml opset to reach
    ir_version: int | None = None  # the IR version pinned (--ir-version)
    runtime: Target | None = None  # the runtime release whose limits apply

    @classmethod
    def parse(cls, opset: int | str | None = None, *, ml_opset: int | None = None, ir_version: int | None = None,
              target: str | Target | None = None) -> TargetSpec:
        """The spec of ``--opset`` (an int, or "latest"), ``--ml-opset``, ``--ir-version`` and
        ``--target`` (``RUNTIME==VERSION``, a profile .json path, or a Target). RewriterError for
        an unknown runtime or a bad profile."""
        if isinstance(opset, str) and opset.strip().lower() == "latest":
            import onnx.defs

            opset = onnx.defs.onnx_opset_version()
        runtime = target if target is None or isinstance(target, Target) else parse_target(target)
        return cls(opset, ml_opset, ir_version, runtime)

    @property
    def empty(self) -> bool:
        """Nothing asked: no opset, no ML opset, no runtime."""
        return self.opset is None and self.ml_opset is None and self.runtime is None

    @property
    def max_ir_version(self) -> int | None:
        """The newest IR version the runtime loads (None: no runtime, or not limited)."""
        return None if self.runtime is None else self.runtime.ir_version

    def lacks(self, domain: str, op: str, version: int | None) -> bool:
        """Whether the runtime lacks ``op`` at schema ``version`` of ``domain`` (False without one)."""
        return self.runtime is not None and self.runtime.lacks(domain, op, version)
