"""Running one command on one model file: the path shared by single-file and directory mode.

Exit status: 0 success; 1 verification found a problem; 2 bad input, bad usage or an
impossible rewrite (one ``error: ...`` line on stderr, no output file written).
"""

from __future__ import annotations

import sys
import time

from rewriter.errors import RewriterError

__all__ = ["EXIT_OK", "EXIT_PROBLEM", "EXIT_ERROR", "EXIT_INTERRUPTED", "UsageError", "VerificationFailed",
           "load_input", "preflight", "run_one", "one_line", "warn", "save_output", "final_gate",
           "input_layout", "finish_rank_checks"]

EXIT_OK, EXIT_PROBLEM, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130
ORT_GATE_LIMIT = 256 << 20  # bytes of tensor data up to which the final gate loads the result in ORT
ORT_GATE_NODES = 10_000  # nodes up to which it does (ORT's session set-up takes seconds beyond)


class UsageError(Exception):
    """Bad command-line usage (reported as one ``error:`` line, exit 2)."""


class VerificationFailed(Exception):
    """A rewrite's result failed verification (exit 1, nothing written)."""


def warn(args, message: str) -> None:
    """A ``warning: ...`` line on stderr, also kept for ``--json``'s ``warnings``."""
    message = one_line(message)
    if args is not None:
        if args.run.warnings is None:
            args.run.warnings = []
        args.run.warnings.append(message)
    print(f"warning: {message}", file=sys.stderr)


def load_input(path: str, args=None):
    """Load and validate an input model (RewriterError naming the file and node when bad).

    An input the ONNX checker refuses is bad input (exit 2, the checker's complaint in the
    message) unless ``args.allow_invalid_input``: then it is processed with a warning, and
    ``args.run.input_invalid`` is set so the final gate does not hold the result to a standard the
    input did not meet.
    """
    from rewriter.io import load_model
    from rewriter.verify.inputs.validate import check_input, input_fault

    model = load_model(path)
    inferred = None
    if getattr(args, "command", None) == "convert":  # at most one shape inference, shared by
        from rewriter.graph.inferred import LazyInference  # validation and conversion, when needed

        inferred = args.run.input_inferred = LazyInference(model)
    rank_checks = args.run.rank_checks = [] if inferred is not None else None  # finished before writing
    complaint = check_input(model, path, allow_invalid=getattr(args, "allow_invalid_input", False),
                            override="--allow-invalid-input", inferred=inferred, rank_checks=rank_checks)
    if complaint:  # what onnx.checker refuses, processed because of --allow-invalid-input
        warn(args, input_fault(path, complaint, "processing it because of --allow-invalid-input"))
        args.run.input_invalid = True
        args.run.input_complaint = complaint.split(" in a node:")[0].split("==>")[0].strip().rstrip(".")
    return model


def preflight(args) -> None:
    """Refuse bad usage and bad input before any handler runs, so nothing is written."""
    import os

    from rewriter.io import check_output

    output = getattr(args, "output", None)
    if output is not None:
        if output == "-":
            raise UsageError("-o -: writing a model to stdout is not supported; give a file name")
        if os.path.isdir(output):
            raise UsageError(f"-o {output}: is a directory")
        parent = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(parent):
            raise UsageError(f"-o {output}: directory {parent} does not exist")
        check_output(output)  # read-only, not a regular file: refused before any work
    args.spec = target_spec(args)
    # loaded before any handler runs, so bad input is refused before anything is written
    args.run.input_model = load_input(args.model, args)
    if getattr(args, "freeze_input_defaults", None) is not None:  # before any work, on the model loaded
        from rewriter.cli.freeze_option import freeze

        freeze(args)


def target_spec(args):
    """The one :class:`rewriter.targets.spec.TargetSpec` of ``--opset`` / ``--ml-opset`` /
    ``--ir-version`` / ``--target``, carried unchanged to the conversion (and ``check --target``);
    None when none is given."""
    given = {name: getattr(args, name, None) for name in ("opset", "ml_opset", "ir_version", "target")}
    if all(value is None for value in given.values()):
        return None
    from rewriter.targets.spec import TargetSpec

    return TargetSpec.parse(given["opset"], ml_opset=given["ml_opset"], ir_version=given["ir_version"],
                            target=given["target"])


def run_one(args) -> int:
    """Run one command on one model file; errors become one ``error:`` line (and with
    ``--json`` one JSON error document on stdout)."""
    now = time.perf_counter()
    args.run.started = args.run.process_started or now
    args.run.startup_s = now - args.run.started  # the interpreter and imports, before this command began
    try:
        preflight(args)
        return args.handler(args)
    except UsageError as e:
        return _fail(args, str(e), EXIT_ERROR)
    except VerificationFailed as e:
        return _fail(args, str(e), EXIT_PROBLEM)
    except RewriterError as e:
        return _fail(args, str(e), EXIT_ERROR)
    except BrokenPipeError:  # the reader of stdout left (`| head`): main's to handle
        raise
    except OSError as e:
        return _fail(args, f"{e.filename or args.model}: {e.strerror or e}", EXIT_ERROR)
    except Exception as e:  # a bug: one line for the user, the traceback with -v
        import logging

        logging.getLogger("rewriter").info("internal error", exc_info=True)
        return _fail(args, f"{args.model}: internal error: {type(e).__name__}: {e} (rerun with -v for the "
                           "traceback, and please report it)", EXIT_ERROR)


def _fail(args, message: str, status: int) -> int:
    from rewriter.cli import interrupts

    if interrupts.pending():  # the failure may be the interrupt itself, turned into an error by a library
        raise KeyboardInterrupt
    message = one_line(message)
    print(f"error: {message}", file=sys.stderr)
    if getattr(args, "json", False):
        from rewriter.cli.summary import error_document, print_json

        print_json(error_document(args.command, args.model, message, status))
    return status


def _complaint(fn) -> str | None:
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - checker, inference and ORT errors of any type
        return one_line(str(e)) or type(e).__name__
    return None


def _ort_load(model, optimized: bool = False, values: bool = False) -> str | None:
    """None when ONNX Runtime loads ``model`` (its external data resolved in place), else why not:
    with graph optimizations off (the model as written), or ``optimized`` with ORT's default
    session options (as users run it: constant folding, fusions, layout changes). A tensor still
    stored as its source (deferred, :mod:`rewriter.io.deferred`: a half weight not yet rounded) is
    loaded as zeros of its size (loading as written reads types and sizes, not values), or with
    ``values`` as its values (an optimized load can compute with them: a folded integer Div by
    zero is refused at load)."""
    import onnx

    from rewriter.io import external_data_dir, read_external_tensor
    from rewriter.io.deferred import deferred
    from rewriter.io.tensors import EXTERNAL, PRIVATE_PREFIX, all_tensors, expected_bytes, set_entries

    def load():
        import onnxruntime as ort

        ort.set_default_logger_severity(4)
        copy = type(model)()
        copy.CopyFrom(model)
        for t, _ in all_tensors(copy):
            if t.data_location == EXTERNAL and deferred(t) is not None:  # its bytes are its source's until written
                # zeros of its size unless asked, instead of making it here and again on writing
                raw = read_external_tensor(t, None).tobytes() if values else bytes(expected_bytes(t))
                del t.external_data[:]
                t.data_location = onnx.TensorProto.DEFAULT
                t.raw_data = raw
            elif t.data_location == EXTERNAL:
                set_entries(t, {e.key: e.value for e in t.external_data if not e.key.startswith(PRIVATE_PREFIX)})
        options = ort.SessionOptions()
        options.log_severity_level = 4
        if not optimized:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        with external_data_dir(model):
            ort.InferenceSession(copy.SerializeToString(), options, providers=["CPUExecutionProvider"])

    return _complaint(load)


def _data_bytes(model) -> int:
    from rewriter.io.tensors import all_tensors, expected_bytes

    return sum(expected_bytes(t) or 0 for t, _ in all_tensors(model))


def final_gate(args, original, result) -> None:
    """A result is never less valid than its input: when the input passed the ONNX checker (and
    its full check, and loaded in ONNX Runtime), so must the result, or VerificationFailed.

    The full check is skipped when the shape verification already ran ONNX's strict inference
    on the result without complaint. ONNX Runtime is asked (opset >= 7) for models with at most
    ``ORT_GATE_NODES`` nodes and ``ORT_GATE_LIMIT`` bytes of tensor data (bigger ones only under
    ``--verify``) to load the result twice: as written (graph optimizations off: what ``--verify``
    runs, so not asked again after it, and what a runtime without ORT's optimizer sees) and
    as users run it (ORT's default session options), which ORT's optimizer can refuse where
    the model as written loads. Refused either way while the input loads that way: the result
    is not written; refused as the input is refused: a warning (not the rewrite's doing).
    """
    from rewriter.graph import traversal
    from rewriter.io import check_model

    if args.run.input_invalid:
        problem = _complaint(lambda: check_model(result))
        if problem:
            warn(args, f"the result fails the ONNX checker as the input did: {problem}")
        return
    # convert_model holds its result to the checker already: not asked twice
    problem = None if args.run.result_checked else _complaint(lambda: check_model(result))
    if problem:
        raise VerificationFailed(f"the result fails the ONNX checker (the input passes it): {problem}")
    if not args.run.result_strict_ok:
        problem = _complaint(lambda: check_model(result, full_check=True))
        if problem and _complaint(lambda: check_model(original, full_check=True)) is None:
            raise VerificationFailed(f"the result fails the ONNX full check (the input passes it): {problem}")
    if (traversal.opset_version(result.opset_import) or 0) < 7:
        return
    if not args.run.result_ort_ok and not (
            len(result.graph.node) <= ORT_GATE_NODES
            and sum(len(s.body.node) for s in traversal.iter_scopes(result)) <= ORT_GATE_NODES
            and _data_bytes(result) <= ORT_GATE_LIMIT):
        return
    for optimized in (False, True):
        if args.run.result_ort_ok and not optimized:
            continue
        problem = _ort_load(result, optimized)
        if problem and optimized:  # zeros stood in for half weights not yet written: asked again with them
            problem = _ort_load(result, optimized, values=True)
        if not problem:
            continue
        if args.run.half_result and _lacks_half_kernel(problem, args.run.half_result):
            # a valid half model for a runtime that has the kernel (a GPU's): said, not refused
            warn(args, f"ONNX Runtime's CPU provider cannot run this {args.run.half_result} result ({problem}); "
                 "--target onnxruntime==X keeps the ops it has no kernel for float32")
            break
        if args.run.double_convs and "NOT_IMPLEMENTED" in problem:  # quant_double.py's exact form
            warn(args, f"ONNX Runtime cannot load this result ({problem}): {args.run.double_convs}")
            break
        given = args.run.input_model  # the input as loaded, before --input-shape / --fix-dim
        cause = "it loads the input" if _ort_load(original, optimized) is None else (
            "it loads the input, but not with the static shapes --input-shape / --fix-dim give it: those are what "
            "it refuses" if given is not None and given is not original and _ort_load(given, optimized) is None
            else None)
        if cause and not optimized:
            raise VerificationFailed(f"ONNX Runtime cannot load the result ({cause}): {problem}")
        if cause:
            raise VerificationFailed(f"ONNX Runtime refuses the result with its default session options, as users "
                                     f"run it (with graph optimizations off it loads; {cause}): {problem}"
                                     f"{_rewritten_node(problem, result)}")
        if optimized:
            warn(args, f"ONNX Runtime refuses the result with its default session options (graph optimizations on) "
                       f"as it refuses the input, so the rewrite is not the cause: {problem}")
        break


def _rewritten_node(problem: str, result) -> str:
    """The result's node ONNX Runtime's graph optimizer made the node its error names from (it
    names its nodes after the one they replace: a QDQ Conv's bias becomes 'CONV_bias_div_round',
    a Round, at opset 10 where Round does not exist yet), as a sentence ending the error; ''
    when the error names no node or names one of the result's own."""
    import re

    from rewriter.graph import traversal
    from rewriter.graph.names import named_after

    found = re.search(r'In Node, \("([^"]+)", (\w+)', problem)
    if not found:
        return ""
    nodes = {n.name: n for s in traversal.iter_scopes(result) for n in s.body.node if n.name}
    name = found.group(1)
    owner = named_after(name, nodes)
    if name in nodes or owner is None:
        return ""
    node = nodes[owner]
    return f" (ONNX Runtime's graph optimizer wrote that {found.group(2)} for node '{owner}' ({node.op_type}) of the result)"


def _lacks_half_kernel(problem: str, dtype: str) -> bool:
    """Whether ONNX Runtime refuses a half result for want of a kernel: NOT_IMPLEMENTED, or the
    type error it raises when, lacking a kernel, it expands an op's function body whose nodes take
    no such type at the model's opset (Clip-13 in bfloat16: its body's Where-9)."""
    return "NOT_IMPLEMENTED" in problem or ("Type Error" in problem and f"tensor({dtype})" in problem)


def finish_rank_checks(args, rank_of=None) -> None:
    """Run the input's ReduceProd checks that waited for ranks (see :func:`load_input`): with
    ``rank_of`` (name -> rank) from the result's inference where it knows, else with the input's
    own inference (RewriterError naming the node, exit 2, on a bad one)."""
    pending, args.run.rank_checks = args.run.rank_checks or [], []
    for checks in pending:
        checks.finish(rank_of)


def input_layout(args, model):
    """The input's :class:`rewriter.cli.summary.InputLayout`, walked once per run."""
    from rewriter.cli.summary import input_layout as walk

    found = args.run.input_layout
    if found is None:
        found = args.run.input_layout = walk(model, args.model)
    return found


def save_output(args, original, result) -> list[str]:
    """The final gate, then the atomic write of ``result`` to ``args.output``; returns the files
    written (the model, then its data file if any).

    With no ``--external-data``, the output keeps each tensor where the input had it, and when
    the input used external data, new tensors of at least 1 KiB (folded values) go to the data
    file too. Writing over the input (``-o`` the input path) removes the data files the input
    used and the output no longer does.
    """
    import os

    from rewriter.io import save_model

    finish_rank_checks(args)  # done by the verification already, unless it did not run
    if args.run.frozen_inputs:  # an IR 3 result makes every initializer a graph input again
        from rewriter.graph.input_defaults import check_kept

        check_kept(result, args.run.frozen_inputs)
    final_gate(args, original, result)
    layout = getattr(args, "external_data", None)
    found = input_layout(args, original)
    keep_inline = found.inline if layout is None and found.external else None
    old_files = found.files
    in_place = os.path.realpath(args.output) == os.path.realpath(args.model)
    from rewriter.cli.run_state import file_identity

    args.run.output_before = file_identity(args.output) or ()  # (an interrupt's message tells the new file by it)
    written = save_model(result, args.output, external_data=layout,
                         base_dir=os.path.dirname(os.path.abspath(args.model)), keep_inline=keep_inline)
    if in_place:
        kept = {os.path.realpath(f) for f in written}
        for stale in old_files[1:]:
            if os.path.realpath(stale) not in kept:
                try:
                    os.unlink(stale)
                except OSError as e:
                    warn(args, f"{stale}: the input's data file, no longer used, could not be removed: "
                               f"{e.strerror or e}")
    return written


def one_line(text: str) -> str:
    return " ".join(text.split())
