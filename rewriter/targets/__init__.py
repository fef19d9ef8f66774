"""Runtime targets: what a runtime release loads, from data shipped with the package.

A :class:`Target` names the newest opset per domain, the newest IR version and the ops a
runtime implements. ``onnxruntime==1.15`` and ``tensorrt==8.6`` come from
``rewriter/targets/data/`` (ONNX Runtime's release table and the CPU execution provider's
``docs/OperatorKernels.md``, with the kernels each release lacks as ``tools/ort_kernel_probe.py``
measured them; onnx-tensorrt's ``docs/operators.md`` on each release branch; each file names
its commits); a JSON profile file describes any other runtime::

    {"name": "my NPU toolchain 2.1", "opsets": {"": 13, "ai.onnx.ml": 2},
     "min_opsets": {"": 11}, "ir_version": 7, "unsupported": {"": ["LayerNormalization"]}}

:func:`blockers` says what stops a target from loading a model as it is. TensorRT releases also
carry onnx-tensorrt's per-op restrictions as rules (``rules``, :mod:`rewriter.targets.restrictions`;
``unchecked`` lists the clauses no static look decides), which :func:`blockers` checks and
``convert --target`` meets by exact rewrites (:mod:`rewriter.targets.restriction_rewrites`) or
refuses. A release between two the data knows takes the older one's data (``data_release``).
"""

from __future__ import annotations

import dataclasses
import json
import os

from rewriter.errors import RewriterError
from rewriter.targets.release_tables import load_releases, load_table, release_key, release_names, release_text

__all__ = ["Target", "parse_target", "load_release", "blockers", "restriction_violations", "releases", "RUNTIMES"]

RUNTIMES = {"onnxruntime": "onnxruntime", "ort": "onnxruntime", "tensorrt": "tensorrt", "trt": "tensorrt",
            "openvino": "openvino", "ov": "openvino", "tract": "tract", "tvm": "tvm", "litert": "litert"}
# runtimes a bare name selects (its newest release in the data): ``litert`` is onnx2tf into LiteRT
_BARE = {"litert"}

from rewriter.graph.schemas import DEFAULT_DOMAINS as _DEFAULT  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Target:
    """What one runtime release loads."""

    name: str  # e.g. "onnxruntime 1.15"
    opsets: dict  # domain ("" default, "ai.onnx.ml") -> newest opset it implements
    ir_version: int | None = None  # newest IR version it loads (None: not limited)
    min_opsets: dict = dataclasses.field(default_factory=dict)  # domain -> oldest opset it takes
    # domain -> op -> [[first, last|None], ...] schema versions it implements (None: every op)
    ops: dict | None = None
    unsupported: dict = dataclasses.field(default_factory=dict)  # domain -> ops it does not implement
    source: str = ""
    # domain -> op -> schema versions without a kernel, as the release's loading showed (None: not measured)
    missing: dict | None = None
    # default-domain op -> its restrictions as rules (rewriter.targets.restrictions), and the clauses
    # recorded but not checked ({op: [{"text", "note"}]}); the release whose data gives them
    rules: dict = dataclasses.field(default_factory=dict)
    unchecked: dict = dataclasses.field(default_factory=dict)
    data_release: str = ""
    # the runtime ("onnxruntime", "tensorrt") and the release asked, (major, minor); both None for
    # a profile, whatever its name says: a profile never takes a named runtime's tables
    runtime: str | None = None
    release: tuple[int, int] | None = None
    # measured releases (tools/runtime_probe.py): domain -> op -> schema versions it runs only with
    # the inputs after the first constant; element type -> what shows it refuses that type
    needs_constant: dict = dataclasses.field(default_factory=dict)
    types_refused: dict = dataclasses.field(default_factory=dict)
    # below an op version (rewriter.targets.measured_verdicts): domain -> op -> schema version ->
    # {element type: verdict} / {named form: verdict}; domain -> op -> versions no probe case measured
    type_verdicts: dict = dataclasses.field(default_factory=dict)
    form_verdicts: dict = dataclasses.field(default_factory=dict)
    unmeasured: dict = dataclasses.field(default_factory=dict)
    # form (rewriter.targets.static_dims) -> its refusal with symbolic dims, measured (it runs static)
    needs_static_dims: dict = dataclasses.field(default_factory=dict)
    # form -> its refusal with symbolic and with static dims alike, measured (no dims make it run)
    refused_forms: dict = dataclasses.field(default_factory=dict)
    # op -> {"form": what convert writes instead, "measured": ...} (rewriter.targets.measured_rewrites)
    rewrite_forms: dict = dataclasses.field(default_factory=dict)
    # how the release was run when measured (the data's "config": device, precision hint, ...)
    measured_with: dict = dataclasses.field(default_factory=dict)
    # real models refused for shapes computed from dims (rewriter.targets.computed_shapes)
    computed_shapes: dict = dataclasses.field(default_factory=dict)

    def release_of(self, runtime: str) -> str | None:
        """"MAJOR.MINOR" of this target when it is a release of ``runtime``, else None."""
        return release_text(self.release) if self.runtime == runtime and self.release is not None else None

    def run_notes(self) -> list[str]:
        """How to run a result as the release was measured, where a setting changes what it computes
        (OpenVINO's CPU plugin infers float32 models in bfloat16 on a CPU with AMX or avx512_bf16
        unless compiled with a float32 precision hint)."""
        hint = self.measured_with.get("INFERENCE_PRECISION_HINT")
        if not hint:
            return []
        return [f"{self.name} was measured with INFERENCE_PRECISION_HINT={hint}: pass "
                f"{{'INFERENCE_PRECISION_HINT': '{hint}'}} to compile_model, as on a CPU with AMX or avx512_bf16 "
                f"OpenVINO otherwise computes float32 models in bfloat16"]

    def lacks(self, domain: str, op: str, version: int | None) -> bool:
        """Whether the runtime lacks ``op`` at schema ``version`` of ``domain``.

        Where the release's own loading was measured (``missing``: every schema version from 7
        to its newest opset tried), that says it. Else the documented kernels: one listed as
        ``[a, None]`` ("a+" in ONNX Runtime's tables) implements schema version ``a`` and no
        newer schema of the op (ONNX Runtime 1.15 lists Cast "13+" and refuses Cast-19, as its
        loading shows); Constant needs no kernel (the runtime makes it an initializer).
        """
        domain = "" if domain in _DEFAULT else domain
        if op in self.unsupported.get(domain, ()):
            return True
        if self.missing is not None and domain in self.missing:
            return version in self.missing[domain].get(op, ())
        if self.ops is None or domain not in self.ops or (domain == "" and op == "Constant"):
            return False
        ranges = self.ops[domain].get(op)
        if ranges is None:
            return True
        if version is None:
            return False
        from rewriter.graph.schemas import schema_versions

        later = schema_versions(op, domain)
        return not any(a <= version and (version <= b if b is not None else
                                         not any(a < s <= version for s in later)) for a, b in ranges)

    def opset_for(self, domain: str, current: int) -> int:
        """The opset to convert a model of opset ``current`` to: kept when the runtime takes it,
        else the nearest it does."""
        domain = "" if domain in _DEFAULT else domain
        high = self.opsets.get(domain)
        low = self.min_opsets.get(domain)
        target = current if high is None else min(current, high)
        return target if low is None else max(target, low)


def _table(runtime: str) -> dict:
    return load_table(f"{runtime}.json")


def releases(runtime: str) -> list[str]:
    """The releases of ``runtime`` ("onnxruntime", "tensorrt") the data knows, oldest first."""
    return release_names(f"{runtime}.json")


def _ranges(ops: dict) -> dict:
    return {(d if d not in _DEFAULT else ""): {op: [tuple(r) for r in rs] for op, rs in table.items()}
            for d, table in ops.items()}


def parse_target(spec: str) -> Target:
    """``RUNTIME==VERSION`` (onnxruntime / ort, tensorrt / trt; VERSION as MAJOR.MINOR, a patch
    number is ignored; ``litert`` alone is its newest release in the data, ``litert==2.6`` being
    onnx2tf 2.6's) or the path of a JSON profile. RewriterError when unknown."""
    if spec.endswith(".json") or os.path.sep in spec:
        return _profile(spec)
    runtime, sep, version = spec.partition("==")
    runtime = RUNTIMES.get(runtime.strip().lower())
    if not sep and runtime in _BARE:
        sep, version = "==", releases(runtime)[-1]
    if not sep or runtime is None:
        raise RewriterError(f"--target must be RUNTIME==VERSION (onnxruntime, tensorrt, openvino, tract, tvm, litert) "
                            f"or a profile .json file, got {spec!r}")
    wanted = release_key(version)
    known = load_releases(f"{runtime}.json")
    if wanted is None or not any(k <= wanted for k in known) or wanted > max(known):
        shown = version.strip() if wanted is None else release_text(wanted)
        raise RewriterError(f"--target {spec}: {runtime} {shown} is not in the data shipped with rewriter "
                            f"(known: {', '.join(releases(runtime))}); describe it with a profile .json file")
    return load_release(runtime, wanted)


def load_release(runtime: str, wanted: tuple[int, int]) -> Target:
    """The Target of ``runtime`` release ``wanted`` (major, minor): its own data, or, for a
    release between two the data knows, the older one's limits, which it also meets."""
    known = load_releases(f"{runtime}.json")
    key = max(k for k in known if k <= wanted)
    entry, name = known[key], f"{runtime} {release_text(wanted)}"
    if key != wanted:
        name += f" (as {release_text(key)}, the newest older release known)"
    opsets = {d if d not in _DEFAULT else "": v for d, v in entry.get("opsets", {}).items()}
    low = {}
    for d, v in list(opsets.items()):
        if isinstance(v, list):  # [oldest, newest]
            low[d], opsets[d] = v
    ops = _ranges(entry["cpu_ops"]) if entry.get("cpu_ops") else None
    unsupported = {"": frozenset(entry["unsupported"])} if entry.get("unsupported") else {}
    if runtime == "tensorrt" and entry.get("supported"):
        ops = {"": {op: [(1, 1 << 30)] for op in entry["supported"]}}  # every version in its opset range
    return Target(name, opsets, entry.get("ir_version"), low, ops, unsupported,
                  _table(runtime).get("source", ""), _missing(entry), entry.get("rules", {}), entry.get("unchecked", {}),
                  f"{runtime} {release_text(key)}", runtime, wanted, _table_of(entry.get("needs_constant")),
                  dict(entry.get("types_refused", {})), _by_version(entry.get("type_verdicts")),
                  _by_version(entry.get("form_verdicts")), _table_of(entry.get("unmeasured")),
                  needs_static_dims=_static_forms(entry), refused_forms=_static_forms(entry, "refused"),
                  rewrite_forms=dict(entry.get("rewrite_forms") or {}), measured_with=dict(entry.get("config") or {}),
                  computed_shapes=dict(entry.get("computed_shapes") or {}))


def _static_forms(entry: dict, which: str = "needed") -> dict:
    """form -> the refusal with symbolic dims, of the forms ``needs_static_dims`` says run static
    ("needed"), or of those it refuses with static dims too ("refused")."""
    table = entry.get("needs_static_dims") or {}
    return {form: table["forms"][form]["symbolic"] for form in table.get(which, [])}


def _by_version(table: dict | None) -> dict:
    """domain -> op -> schema version (an int) -> {key: verdict}, from the data's string keys."""
    return {(d if d not in _DEFAULT else ""): {op: {int(v): dict(kv) for v, kv in vs.items()} for op, vs in ops.items()}
            for d, ops in (table or {}).items()}


def _table_of(table: dict | None) -> dict:
    """domain -> op -> frozenset of schema versions, from the data's lists."""
    return {(d if d not in _DEFAULT else ""): {op: frozenset(vs) for op, vs in ops.items()}
            for d, ops in (table or {}).items()}


def _missing(entry: dict) -> dict | None:
    """domain -> op -> the schema versions the release lacks, as measured: ONNX Runtime's
    ``missing_kernels``; for the releases tools/runtime_probe.py measured, what it refuses
    (``missing``) and what it computes wrongly (``wrong``), which counts as missing."""
    tables = [(k, entry[k]) for k in ("missing_kernels", "missing", "wrong") if k in entry]
    if not tables:
        return None
    constant = _table_of(entry.get("needs_constant"))  # refused only with inputs fed at run time
    merged: dict = {"": {}, "ai.onnx.ml": {}}
    for kind, table in tables:
        for d, ops in table.items():
            d = d if d not in _DEFAULT else ""
            into = merged.setdefault(d, {})
            for op, versions in ops.items():
                keep = frozenset(versions) - (constant.get(d, {}).get(op, frozenset()) if kind == "missing" else
                                              frozenset())
                into[op] = into.get(op, frozenset()) | keep
    return merged


def _profile(path: str) -> Target:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise RewriterError(f"--target {path}: cannot read the profile: {e.strerror or e}") from None
    except ValueError as e:
        raise RewriterError(f"--target {path}: not a JSON profile: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("opsets"), dict):
        raise RewriterError(f"--target {path}: a profile needs \"opsets\": {{domain: opset}} "
                            "(\"\" for the default domain)")
    known = {"name", "opsets", "min_opsets", "ir_version", "unsupported", "ops", "source", "missing"}
    extra = sorted(set(data) - known)
    if extra:
        raise RewriterError(f"--target {path}: unknown key(s) {', '.join(extra)} (a profile has "
                            f"{', '.join(sorted(known))})")
    norm = lambda table: {(d if d not in _DEFAULT else ""): v for d, v in (table or {}).items()}  # noqa: E731
    for d, v in {**norm(data["opsets"]), **norm(data.get("min_opsets"))}.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise RewriterError(f"--target {path}: the opset of domain {d or 'ai.onnx'!r} must be a positive "
                                f"integer, got {v!r}")
    ir = data.get("ir_version")
    if ir is not None and (not isinstance(ir, int) or isinstance(ir, bool)):
        raise RewriterError(f"--target {path}: ir_version must be an integer, got {ir!r}")
    missing = data.get("missing")  # {domain: {op: [schema versions]}}, as tools/profile_probe.py measures it
    if missing is not None and not (isinstance(missing, dict) and all(
            isinstance(t, dict) and all(isinstance(vs, list) and all(type(v) is int for v in vs) for vs in t.values())
            for t in missing.values())):
        raise RewriterError(f"--target {path}: \"missing\" must be {{domain: {{op: [schema versions]}}}}")
    return Target(data.get("name") or os.path.basename(path), norm(data["opsets"]), ir,
                  norm(data.get("min_opsets")), _ranges(data["ops"]) if data.get("ops") else None,
                  {d: frozenset(v) for d, v in norm(data.get("unsupported")).items()}, path,
                  None if missing is None else {d: {op: frozenset(vs) for op, vs in t.items()}
                                                for d, t in norm(missing).items()})


def _inferred(model):
    from rewriter.graph.inferred import LazyInference

    return LazyInference(model)()


def restriction_violations(model, target: Target, *, base_dir: str | None = None, inferred=None) -> list:
    """The nodes of ``model`` that break one of ``target``'s per-op restrictions
    (:class:`rewriter.targets.restrictions.Violation`, one per node and restriction)."""
    if not target.rules:
        return []
    from rewriter.io import tensor_reader
    from rewriter.targets.restrictions import violations

    return violations(model, target.rules, read_tensor=tensor_reader(base_dir), inferred=inferred)


def _lacks_ml(target: Target) -> bool:
    """Whether ``target`` implements no ``ai.onnx.ml`` op: its data gives no ML opset (the measured
    releases load none: their ML node tests and a Binarizer at every ML opset were refused) and its
    documented ops, if any, have none (TensorRT); ONNX Runtime's data gives its ML opset."""
    if target.opsets.get("ai.onnx.ml") is not None:
        return False
    return target.ops is None or "ai.onnx.ml" not in target.ops


def blockers(model, target: Target, *, base_dir: str | None = None) -> list[str]:
    """What stops ``target`` from loading ``model`` (a ModelProto) as it is: the IR version, an
    opset it does not implement, each op it lacks (with the node), the half-precision nodes an old
    ONNX Runtime refuses (``rewriter.targets.ort_quirks``), each node that breaks one of its per-op
    restrictions (with the restriction); empty when nothing does. ``base_dir``: where
    the model's external data lives (restrictions on constant values read it)."""
    from rewriter.graph import traversal
    from rewriter.graph.names import first_few
    from rewriter.graph.schemas import schema_version_at_domain

    found = []
    if target.ir_version is not None and model.ir_version > target.ir_version:
        found.append(f"IR version {model.ir_version} (it loads up to {target.ir_version})")
    imports = {("" if o.domain in _DEFAULT else o.domain): o.version for o in model.opset_import}
    absent = {"ai.onnx.ml"} if _lacks_ml(target) else set()
    for domain, version in sorted(imports.items()):
        high, low = target.opsets.get(domain), target.min_opsets.get(domain)
        name = domain or "ai.onnx"
        if high is not None and version > high:
            found.append(f"opset {version} of {name} (it implements up to {high})")
        if low is not None and version < low:
            found.append(f"opset {version} of {name} (it takes {low} and newer)")
    lacking: dict[tuple[str, str, int | None], list[str]] = {}
    for scope in traversal.iter_scopes(model):
        fn_imports = {("" if o.domain in _DEFAULT else o.domain): o.version for o in scope.body.opset_import} \
            if scope.is_function else imports
        for node in scope.body.node:
            domain = "" if node.domain in _DEFAULT else node.domain
            if domain not in ("", "ai.onnx.ml") or domain not in fn_imports:
                continue
            version = schema_version_at_domain(node.op_type, fn_imports[domain], domain)
            if domain in absent or target.lacks(domain, node.op_type, version):
                lacking.setdefault((domain, node.op_type, version), []).append(traversal.node_label(node, scope))
    # (a domain imported and not used is no blocker: the releases load such models, tf2onnx's and jax2tf's)
    unknown = target.ops is None  # (measured: the data says what failed, not every op it has)
    found += [f"the {d} domain ({'no ML opset in its data' if unknown else 'it does not implement it'})"
              for d in sorted(absent & {k[0] for k in lacking})]
    for (domain, op, version), labels in sorted(lacking.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        at = f"-{version}" if version is not None else ""
        shown = first_few(labels)
        verb = "is not known to implement" if domain in absent and unknown else "does not implement"
        found.append(f"{op}{at}{' (' + domain + ')' if domain else ''}, which it {verb}: {shown}")
    from rewriter.targets.ort_quirks import half_precision_blockers

    found += half_precision_blockers(model, target)
    if target.needs_static_dims or target.refused_forms:
        from rewriter.targets.static_dims import static_dims_blockers

        here = static_dims_blockers(model, target.needs_static_dims, target.name, _inferred(model),
                                    target.refused_forms)
        left = {b[0] for b in here}
        if here and target.rewrite_forms:  # the nodes the release's rewrites leave in such a form
            from rewriter.targets.measured_rewrites import rewritten_copy

            copy = rewritten_copy(model, target.rewrite_forms, target.name)
            left = {b[0] for b in static_dims_blockers(copy, target.needs_static_dims, target.name, _inferred(copy),
                                                       target.refused_forms)}
        found += [f"{b[0]}: {b[3]}" + (" [convert may rewrite it]" if b[0] not in left else "") for b in here]
    from rewriter.targets.restriction_rewrites import REWRITABLE

    for v in restriction_violations(model, target, base_dir=base_dir):
        found.append(v.line() + (" [convert may rewrite it]" if v.kind in REWRITABLE else ""))
    return found
