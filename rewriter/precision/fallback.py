"""``--max-error``: keep float32 the runs of nodes whose half precision is measured to matter,
until every float output on the calibration inputs is within a relative L2 error of the
float32 model's.

The error is measured, not predicted: each candidate is converted and run in ONNX Runtime on
every calibration input, twice (graph optimizations off: the model as written; on: as ONNX
Runtime runs it, which drops Cast round trips), and the larger error counts. ONNX Runtime's CPU
provider computes many float16 ops in float32 (it casts around the nodes it has no float16
kernel for, and drops the Cast pairs between two such nodes), so the rounding it measures is
that of the constants, of the inputs and of the values between nodes it does run in half; a
runtime computing everything in half may see more. Where ONNX Runtime cannot run a candidate
(bfloat16), onnx.reference measures, in half arithmetic.

The nodes that run in half, in graph order (the main graph's, a topological order, then each
subgraph's), are cut into :data:`SEGMENTS` runs of consecutive nodes. Each round tries every
run left kept float32 along with what is kept already; when one brings the error within the
limit, it is halved while a half still does (the smallest such run found); otherwise the run
that lowered the error most is kept and the next round starts. At worst every run is kept
(the float32 model, error 0): about SEGMENTS * (SEGMENTS + 1) / 2 conversions, plus two per
halving.

A node kept so computes in float32 from its weights stored in half (a Cast each, which ONNX
Runtime folds when it loads the model: the file stays half the size) when keeping every node
so meets the limit: then the values between nodes lose the accuracy, not the weights. Else
(one conversion tells) the nodes kept hold their weights in float32 too.

The judge uses the floor rule of ``--verify`` (:mod:`rewriter.precision.floor`): a candidate's
error on an output counts against ``max(limit, 2 x floor)``, the floor being the float32
source's own error on the calibration inputs rounded as that candidate rounds them (largest over
the samples); the figures compared with the limit are each output's error scaled by
``limit / its tolerance`` (the error itself where the floor is below half the limit). A
candidate that rounds no input (its inputs' first consumers in float32) has floor 0.

The search cannot judge (:class:`CannotJudge`) when a float output of the float32 model is all
zero, constant or all NaN/infinite over every calibration input (any error is then 0 or
meaningless), or when the inputs are random ones whose every dynamic dim took the default size.
"""

from __future__ import annotations

import dataclasses
import tempfile

import numpy as np

from rewriter.errors import RewriterError

__all__ = ["Fit", "convert_fitted", "fit_max_error", "half_error", "SEGMENTS", "CannotJudge"]

SEGMENTS = 8
_LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_ALL")  # the model as written, and as ONNX Runtime runs it


class CannotJudge(RewriterError):
    """``max_error``'s calibration inputs check nothing: a reference output all zero or constant,
    or random inputs with every dynamic dim at its default size (the CLI's exit 1)."""


@dataclasses.dataclass
class Fit:
    """What ``--max-error`` measured."""

    limit: float
    samples: int
    all_half: float  # the error with every node the rules allow in half
    error: float  # the error of the result
    kept: int  # nodes kept float32 to get there
    trials: int  # conversions measured
    weights_half: bool = False  # the nodes kept compute in float32 from weights stored in half
    floor: float = 0.0  # the largest finite floor with every node in half (the inputs rounded alone)

    def line(self) -> str:
        floor = (f", floor {self.floor:.2g}" + (f" (an output's error counts against max({self.limit:g}, 2 x its "
                 "floor), scaled to the limit)" if 2 * self.floor > self.limit else ""))
        if not self.kept:
            return (f"--max-error {self.limit:g}: error {self.all_half:.2g} on {self.samples} calibration "
                    f"input(s) with every node in half{floor} ({self.trials} conversion measured)")
        return (f"--max-error {self.limit:g}: error {self.all_half:.2g} on {self.samples} calibration input(s) "
                f"with every node in half{floor}, {self.error:.2g} with {self.kept} node(s) computing in float32"
                + (" (their weights stored in half)" if self.weights_half else "")
                + f" ({self.trials} conversions measured)")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def half_error(want: list, got: list, floors: list | None = None, limit: float = 1.0) -> float:
    """The largest relative L2 error over the float outputs (an output whose values all lie near
    0 counts by its RMS difference, as --verify does: within HALF_RMS_FLOOR is 0); infinity when
    shapes differ, NaN or infinities are elsewhere, or a non-float output differs. With
    ``floors`` (one per output), each error is scaled by ``limit / max(limit, 2 x floor)``."""
    from rewriter.precision.floor import tolerance
    from rewriter.verify.numerics.rel_l2 import HALF_RMS_FLOOR, rel_l2_measure

    worst = 0.0
    for i, (a, b) in enumerate(zip(want, got)):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind != "f":
            if a.shape != b.shape or not np.array_equal(a, b):
                return float("inf")
            continue
        error, rms, _, reason = rel_l2_measure(a, b)
        if reason:
            return float("inf")
        if rms > HALF_RMS_FLOOR:
            worst = max(worst, error * (limit / tolerance(limit, floors[i]) if floors else 1.0))
    return worst


class _Judge:
    """The float32 source's outputs on the samples, and the error of a candidate against them:
    in ONNX Runtime, or in onnx.reference once ONNX Runtime cannot run a candidate (bfloat16,
    which its CPU provider computes almost nowhere)."""

    def __init__(self, source, base_dir, samples, limit: float = 1.0):
        self.source, self.base_dir, self.samples, self.limit = source, base_dir, samples, limit
        self.floors: dict = {}  # (backend, inputs rounded) -> the largest floor per output, or None
        self.floor = None  # the largest finite floor of the first candidate judged (every node in half)
        self.trials = 0
        self.backend = "onnxruntime"
        self.want = {"onnxruntime": self._outputs(source, "onnxruntime")}

    def _outputs(self, model, backend: str, samples: list | None = None) -> list:
        """The outputs on every sample: in ONNX Runtime with its graph optimizations off (the
        model as written) and on (as it is run), or in onnx.reference."""
        from rewriter.verify.numerics.compare import runnable_model
        from rewriter.verify.numerics.rel_l2 import cast_feeds

        with tempfile.TemporaryDirectory(prefix="rewriter-max-error-") as d, \
                runnable_model(model, self.base_dir, d, "model.onnx") as runnable:
            feeds = [cast_feeds(model, f) for f in (self.samples if samples is None else samples)]
            if backend == "reference":
                from onnx.reference import ReferenceEvaluator

                evaluator = ReferenceEvaluator(runnable)
                with np.errstate(all="ignore"):
                    return [evaluator.run(None, f) for f in feeds]
            import onnxruntime as ort

            source = runnable if isinstance(runnable, str) else runnable.SerializeToString()
            outputs = []
            for level in _LEVELS:
                options = ort.SessionOptions()
                options.log_severity_level = 4
                options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
                session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
                names = {i.name for i in session.get_inputs()}
                outputs += [session.run(None, {k: v for k, v in f.items() if k in names}) for f in feeds]
            return outputs

    def error(self, model) -> float:
        self.trials += 1
        if self.backend == "onnxruntime":
            try:
                got = self._outputs(model, "onnxruntime")
            except Exception:  # noqa: BLE001 - ORT lacks a kernel: onnx.reference from here on
                self.backend = "reference"
            else:
                floors = self._floors(model, "onnxruntime")
                return max(half_error(w, g, floors, self.limit) for w, g in zip(self.want["onnxruntime"], got))
        if "reference" not in self.want:
            self.want["reference"] = self._outputs(self.source, "reference")
        floors = self._floors(model, "reference")
        return max(half_error(w, g, floors, self.limit)
                   for w, g in zip(self.want["reference"], self._outputs(model, "reference")))

    def _floors(self, model, backend: str) -> list | None:
        """Per output, the source's largest error over the samples rounded as ``model`` rounds its
        inputs (None when it rounds none: floor 0)."""
        from rewriter.precision.floor import output_floors, round_feeds, rounded_inputs

        key = (backend, tuple(sorted(rounded_inputs(model).items())))
        if key not in self.floors:
            floors = None
            if key[1]:
                n = len(self.samples)
                try:
                    got = self._outputs(self.source, backend, [round_feeds(f, dict(key[1])) for f in self.samples])
                except Exception:  # noqa: BLE001 - the source refuses the rounded inputs: no floor known
                    got = None
                if got is not None:
                    per = [output_floors(w, g) for w, g in zip(self.want[backend][:n], got[:n])]
                    floors = [max(column) for column in zip(*per)]
            self.floors[key] = floors
        if self.floor is None:
            self.floor = max([f for f in self.floors[key] or [0.0] if f < float("inf")], default=0.0)
        return self.floors[key]


def convert_fitted(proto, dtype: str, *, max_error: float | None = None, calibration_data=None,
                   keep_io_types: bool = True, base_dir: str | None = None, **options):
    """(result, report) of :func:`rewriter.precision.convert_precision_proto` with ``options``;
    with ``max_error``, fitted to it on ``calibration_data`` (a list of {input name: array};
    default one set of random inputs, seed 0)."""
    from rewriter.precision import convert_precision_proto

    memo: dict = {}  # one inference of the model serves every trial

    def convert(keep_at=None, weights_half=False):
        return convert_precision_proto(proto, dtype, keep_io_types=keep_io_types, base_dir=base_dir,
                                       keep_at=keep_at, weights_half=weights_half, index_memo=memo, **options)

    if max_error is None:
        if calibration_data is not None:
            raise RewriterError("calibration_data is for max_error, which is not given")
        return convert()
    if not max_error > 0:
        raise RewriterError(f"max_error must be a number > 0, got {max_error!r}")
    if calibration_data is None:
        from rewriter.verify.numerics.degenerate import defaulted_dims, defaulted_text
        from rewriter.verify.numerics.random_inputs import random_feeds

        defaulted = defaulted_dims(proto)
        if defaulted:
            raise CannotJudge(f"--max-error {max_error:g} cannot judge on random inputs: {defaulted_text(defaulted)}")
        calibration_data = [random_feeds(proto)]
    return fit_max_error(convert, proto, base_dir, list(calibration_data), max_error, keep_io_types)


def fit_max_error(convert, source, base_dir, samples, limit: float, keep_io_types: bool = True):
    """(result, report) of ``convert(keep_at, weights_half)`` (a callable converting with the
    node positions ``keep_at`` kept float32, their weights stored in half with ``weights_half``)
    with the fewest runs kept that meets ``limit``, the report's ``fitted`` set. The weights of
    the nodes kept stay in half when keeping every node float32 so meets the limit (the values
    between nodes were to blame, not the weights); else they stay float32 too. RewriterError when
    even the float32 model does not meet it (the inputs rounded with --no-keep-io-types)."""
    try:
        judge = _Judge(source, base_dir, samples, limit)
    except Exception as e:  # noqa: BLE001 - ORT's refusal, as the reason
        raise RewriterError(f"--max-error: ONNX Runtime cannot run the float32 model: "
                            f"{str(e).strip().splitlines()[0][:300]}") from None
    flat = _degenerate_outputs(source, judge.want["onnxruntime"][:len(samples)])
    if flat:
        raise CannotJudge(f"--max-error {limit:g} cannot judge on the calibration inputs: {flat}")
    tried: dict = {}
    weights_half = False

    def trial(kept: tuple):
        key = (kept, weights_half and bool(kept))
        if key not in tried:
            reason = (f"--max-error {limit:g}: half precision here is measured to take the error beyond it"
                      + (" (computed in float32, its weights stored in half)" if key[1] else ""))
            result, report = convert({i: reason for i in kept}, key[1])
            tried[key] = (judge.error(result), result, report)
        return tried[key]

    all_half, result, report = trial(())
    kept: tuple = ()
    error = all_half
    if all_half > limit:
        weights_half = True  # one trial: every node float32, from its weights in half
        weights_half = trial(tuple(report.half_at))[0] <= limit
        kept, error = _search(trial, report.half_at, limit)
        if error > limit:
            raise RewriterError(f"--max-error {limit:g} cannot be met: with every node float32 (weights too) the "
                                f"error on the calibration inputs is {error:.2g}"
                                + ("" if keep_io_types else " (the inputs and outputs are half: drop --no-keep-io-types)")
                                + "; nothing was written")
        _, result, report = trial(kept)
    report.fitted = Fit(limit, len(samples), all_half, error, len(kept), judge.trials, weights_half and bool(kept),
                        judge.floor or 0.0)
    return result, report


def _degenerate_outputs(source, outputs: list) -> str:
    """The float outputs all zero, constant or all NaN/infinite over every sample ("name: why")."""
    from rewriter.verify.numerics.degenerate import REAL_INPUTS_HINT, degenerate_reference

    names = [o.name for o in source.graph.output]
    found = []
    for i, name in enumerate(names):
        values = [np.asarray(sample[i]) for sample in outputs if i < len(sample)]
        if values:  # (only a float output can be degenerate)
            why = degenerate_reference(np.concatenate([v.reshape(-1) for v in values]))
            if why:
                found.append(f"{name}: {why}")
    return "; ".join(found) + (f" ({REAL_INPUTS_HINT})" if found else "")


def _search(trial, candidates, limit: float) -> tuple[tuple, float]:
    """(positions kept, error): rounds over the runs of ``candidates`` (see the module's doc)."""
    if not candidates:
        return (), float("inf")
    runs = [tuple(int(i) for i in r) for r in np.array_split(np.array(candidates, dtype=np.int64),
                                                              min(SEGMENTS, len(candidates))) if len(r)]
    kept, error = (), float("inf")
    while runs and error > limit:
        scored = sorted((trial(tuple(sorted(kept + r)))[0], n, r) for n, r in enumerate(runs))
        best, _, run = scored[0]
        if best <= limit:
            run, best = _smallest_half(trial, kept, run, best, limit)
        kept, error = tuple(sorted(kept + run)), best
        if run in runs:
            runs.remove(run)
    return kept, error


def _smallest_half(trial, kept: tuple, run: tuple, error: float, limit: float):
    """Halve ``run`` while one of its halves, kept with ``kept``, still meets ``limit``."""
    while len(run) > 1:
        first, second = run[:len(run) // 2], run[len(run) // 2:]
        for half in (first, second):
            e = trial(tuple(sorted(kept + half)))[0]
            if e <= limit:
                run, error = half, e
                break
        else:
            break
    return run, error
