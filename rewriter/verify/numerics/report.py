"""The numerical check's findings: one :class:`OutputComparison` per output, gathered in a
:class:`NumericsReport` (ok, mismatch, or not verified: see :mod:`.degenerate`)."""

from __future__ import annotations

import dataclasses

from rewriter.verify.numerics.degenerate import REAL_INPUTS_HINT, defaulted_text

__all__ = ["OutputComparison", "NumericsReport"]


@dataclasses.dataclass
class OutputComparison:
    """One output of the two models side by side."""

    name: str
    dtype: str
    max_abs_diff: float | None  # None when the outputs cannot be compared (shape, type, failure)
    tolerance: str  # "exact" or "rtol=..., atol=..."
    ok: bool  # within tolerance, and the reference checks something
    reason: str = ""  # why not within tolerance
    degenerate: str = ""  # why the reference checks nothing (all zero, constant): ok is False, not a mismatch
    floor: float | None = None  # half precision: the source's own error on its inputs rounded (inf: not comparable)

    @property
    def mismatch(self) -> bool:
        """The outputs differ (beyond tolerance, or cannot be compared): a finding, not a doubt."""
        return not self.ok and not self.degenerate

    def to_dict(self) -> dict:
        return {"output": self.name, "dtype": self.dtype, "max_abs_diff": self.max_abs_diff,
                "tolerance": self.tolerance, "ok": self.ok, "reason": self.reason or None,
                "degenerate": self.degenerate or None,
                "floor": self.floor if self.floor is None or self.floor < float("inf") else "not comparable"}

    def line(self, within: str = "ok") -> str:
        """One line; ``within`` is the verdict of an output within tolerance."""
        diff = "n/a" if self.max_abs_diff is None else f"{self.max_abs_diff:.3g}"
        verdict = (f"NOT VERIFIED: {self.degenerate}, not a check ({REAL_INPUTS_HINT})" if self.degenerate
                   else within if self.ok else f"MISMATCH: {self.reason}")
        return f"{self.name} ({self.dtype}): max abs diff {diff} (tolerance {self.tolerance}) {verdict}"


@dataclasses.dataclass
class NumericsReport:
    """Per-output comparison of an original and a rewritten model on the same inputs."""

    outputs: list[OutputComparison]
    backend_original: str
    backend_rewritten: str
    seed: int
    error: str = ""  # set when the rewritten model failed to run
    fallback: str = ""  # why ONNX Runtime did not run them, when onnx.reference did instead
    inputs: str = ""  # what the inputs were when not random ("the first calibration sample")
    defaulted: str = ""  # the dynamic input dims random inputs gave the default size, when every one was
    # why no engine ran the rewritten model, when that is no evidence against it (one lacks a kernel
    # for it, the other cannot run the original either): nothing compared, not verified
    unrunnable: str = ""

    @property
    def failed(self) -> bool:
        """A finding: the rewritten model failed to run, or an output differs."""
        return bool(self.error) or any(o.mismatch for o in self.outputs)

    @property
    def not_verified(self) -> list[str]:
        """Why the check checked nothing, when it did not fail: every dynamic dim defaulted, and
        each output whose reference is degenerate ("name: reason")."""
        return (([f"no engine could run the rewritten model ({self.unrunnable})"] if self.unrunnable else [])
                + ([defaulted_text(self.defaulted)] if self.defaulted else [])
                + [f"{o.name}: {o.degenerate}" for o in self.outputs if o.degenerate])

    def not_verified_text(self) -> str:
        """:attr:`not_verified` as one sentence, with how to give real inputs when they are the
        reason ("" when verified)."""
        text = "; ".join(self.not_verified)
        inputs = self.defaulted or any(o.degenerate for o in self.outputs)
        return text + (f" ({REAL_INPUTS_HINT})" if inputs and REAL_INPUTS_HINT not in text else "")

    @property
    def status(self) -> str:
        """"mismatch", "not verified" (nothing differs, but the inputs or a reference check
        nothing: not a pass) or "ok"."""
        return "mismatch" if self.failed else "not verified" if self.not_verified else "ok"

    @property
    def ok(self) -> bool:
        """A pass: nothing differs and the check checked something."""
        return self.status == "ok"

    def to_dict(self) -> dict:
        """A JSON-ready summary: ok, status, seed, engines, error, why not verified, one entry per output."""
        return {"ok": self.ok, "status": self.status, "seed": None if self.inputs else self.seed,
                "inputs": self.inputs or "random", "backend_original": self.backend_original,
                "backend_rewritten": self.backend_rewritten, "error": self.error or None,
                "fallback": self.fallback or None, "defaulted_dims": self.defaulted or None,
                "unrunnable": self.unrunnable or None,
                "not_verified": self.not_verified or None,
                "outputs": [o.to_dict() for o in self.outputs]}

    def summary_lines(self) -> list[str]:
        backends = (self.backend_original if self.backend_original == self.backend_rewritten
                    else f"{self.backend_original} (original) / {self.backend_rewritten} (rewritten)")
        why = f"; onnx.reference because ONNX Runtime could not: {self.fallback}" if self.fallback else ""
        given = f"{self.inputs} (" if self.inputs else f"random inputs (seed {self.seed}, "
        lines = [f"numerical check on {given}{backends}{why}):"]
        if self.error:
            lines.append(f"rewritten model failed to run: {self.error}")
        if self.unrunnable:
            lines.append(f"NOT VERIFIED: no engine could run the rewritten model, and that is not its fault: "
                         f"{self.unrunnable}")
        if self.defaulted:
            lines.append(f"NOT VERIFIED: {defaulted_text(self.defaulted)}")
        within = "within tolerance on the default sizes" if self.defaulted else "ok"
        lines.extend(o.line(within) for o in self.outputs)
        return lines
