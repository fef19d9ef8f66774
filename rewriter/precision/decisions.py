"""A node's precision decision as data: what it computes in, and a reason code with its detail.

The planner (:mod:`.plan`) gives every float32 node a :class:`Decision` and, for one left in
float32, a reason :data:`CODES` names and a sentence of detail (the operands, the op, the
runtime). The summary groups by them, ``--json`` writes them (``kept[].code``, ``kept[].reason``),
``--max-error`` reads the decisions and the tests read the codes.
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = ["Decision", "CODES", "KeptNode"]


class Decision(enum.Enum):
    """What a float32 node computes in after the rewrite."""

    HALF = "half"
    FLOAT32 = "float32"
    FLOAT32_FROM_HALF_WEIGHTS = "float32 from half weights"  # its constants stored in half, a Cast each


# reason code -> what it means (the detail says which operand, op or runtime)
CODES = {
    "keep-nodes": "--keep-nodes names it",
    "keep-op-types": "--keep-op-types names its op",
    "max-error": "--max-error keeps it to meet the limit",
    "keep-io-precision": "--keep-io-precision: it reads a graph input",
    "other-domain": "an op of a domain other than ONNX's",
    "control-flow": "control flow: its subgraphs' inputs and outputs stay float32",
    "always-float32": "an op that loses integers in half precision (Range)",
    "no-schema": "no schema for the op at the model's opset",
    "non-tensor": "sequences, maps and optionals stay float32",
    "types": "its types cannot be bound to half (unknown, or set by an attribute)",
    "no-half-type": "its schema at this opset has no half type there",
    "inference-refuses": "ONNX's type inference refuses it in half",
    "no-kernel": "the runtime targeted has no half kernel for it",
    "calibration": "calibration saw a value beyond the half type's range",
    "out-of-range": "a constant it reads is outside float16's range",
    "function": "a local function's body cannot run in half",
    "shape-arithmetic": "float values of sizes or indices that go back to integers",
    "quantized": "part of a quantized region the runtime fuses",
    "signal-path": "a signal path (STFT/DFT, filter, spectrum) rounding would spoil",
    "island": "nothing in half around it",
}


@dataclasses.dataclass(frozen=True)
class KeptNode:
    """A node left in float32: its stable key (:data:`rewriter.precision.graphs.NodeKey`), label,
    op, decision, reason code and detail."""

    key: tuple
    label: str
    op: str
    decision: Decision
    code: str
    reason: str

    def to_dict(self) -> dict:
        return {"node": self.label, "op": self.op, "reason": self.reason, "code": self.code,
                "decision": self.decision.value}
