"""The ``rewriter`` command line. The only module that prints or sets up logging.

Exit status: 0 success; 1 verification found a problem; 2 bad input, bad usage or an
impossible rewrite (one ``error: ...`` line on stderr, no output file written).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from rewriter.errors import RewriterError

EXIT_OK, EXIT_PROBLEM, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """Bad command-line usage (reported as one ``error:`` line, exit 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


class VerificationFailed(Exception):
    """A rewrite's result failed verification (exit 1, nothing written)."""


def _latest_opset() -> int:
    import onnx.defs

    return onnx.defs.onnx_opset_version()


def _opset_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--opset must be an integer, got {text!r}") from None
    latest = _latest_opset()
    if not 1 <= value <= latest:
        raise argparse.ArgumentTypeError(f"--opset must be in 1..{latest}, got {value}")
    return value


def _add_output(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="where to write the result (written atomically; may be the input path); "
                   "with a directory MODEL, the directory that mirrors it")


def _layout_arg(text: str):
    if text in ("always", "never") or text.isdigit():
        return text
    raise argparse.ArgumentTypeError(f"--external-data must be always, never or a size in bytes, got {text!r}")


def _add_file_options(sub) -> None:
    """-j and --external-data for the commands that write models (called from build_parser)."""
    for name in ("convert", "fold", "optimize"):
        p = sub.choices[name]
        p.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                       help="with a directory MODEL: worker processes (default 1)")
        p.add_argument("--external-data", type=_layout_arg, default=None, metavar="always|never|BYTES",
                       help="where the output keeps tensor data: 'always' in OUT.data beside it, 'never' "
                       "inline, or in OUT.data for tensors of at least BYTES bytes (default: as the input)")


def load_input(path: str):
    """Load and validate an input model (RewriterError naming the file and node when bad)."""
    from rewriter import model_io, validate

    model = model_io.load_model(path)
    validate.validate_model(model, path)
    return model


def _preflight(args) -> None:
    """Refuse bad usage and bad input before any handler runs, so nothing is written."""
    import os

    output = getattr(args, "output", None)
    if output is not None:
        if os.path.isdir(output):
            raise UsageError(f"-o {output}: is a directory")
        parent = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(parent):
            raise UsageError(f"-o {output}: directory {parent} does not exist")
    if getattr(args, "jobs", 1) < 1:
        raise UsageError(f"-j must be at least 1, got {args.jobs}")
    # loaded before any handler runs, so bad input is refused before anything is written
    args.input_model = load_input(args.model)


def _run(args) -> int:
    """Run one command on one model file; errors become one ``error:`` line."""
    from rewriter import model_io

    model_io.set_default_layout(getattr(args, "external_data", None))
    args.started = time.perf_counter()
    try:
        _preflight(args)
        return args.handler(args)
    except UsageError as e:
        print(f"error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except VerificationFailed as e:
        print(f"error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_PROBLEM
    except RewriterError as e:
        print(f"error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_ERROR


def _add_verify_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-verify", action="store_true",
                   help="skip the shape verification of the result (default: a ReduceProd shape "
                   "problem the rewrite introduced fails the command, one the input had is a warning)")
    p.add_argument("--verify", action="store_true",
                   help="also run the original and the result on random inputs and compare outputs")
    p.add_argument("--seed", type=int, default=0, help="seed for --verify's random inputs (default 0)")


def _add_int_overflow(p: argparse.ArgumentParser) -> None:
    p.add_argument("--int-overflow", choices=["skip", "wrap", "saturate"], default="skip",
                   help="integer products that overflow: leave the node with a warning (skip, default: "
                   "runtimes disagree), fold the wrapped value (wrap, as NumPy and the ONNX reference) "
                   "or the clamped value (saturate, as ONNX Runtime's CPU kernel)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rewriter",
        description="Rewrite ONNX models: migrate opsets, fold ReduceProd constants, verify shapes.",
        epilog="Exit status: 0 success, 1 verification found a problem, 2 bad input or impossible rewrite.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log what each pass does")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("convert", help="migrate a model to another default-domain opset",
                       description="Migrate MODEL to opset N (1..latest, up or down). ReduceProd nodes "
                       "are converted by rewriter's adapters; other ops whose schema only changed its "
                       "types are kept as they are, the rest go to onnx.version_converter. Fails as a "
                       "whole, naming the node, when a conversion is impossible.",
                       epilog="Example: rewriter convert model.onnx --opset 13 -o model13.onnx")
    p.add_argument("model", metavar="MODEL", help="input .onnx file, or a directory: every .onnx file below it")
    p.add_argument("--opset", type=_opset_arg, required=True, metavar="N",
                   help="target default-domain opset, 1..the latest your onnx knows")
    _add_output(p)
    _add_verify_flags(p)
    p.set_defaults(handler=_cmd_convert)

    p = sub.add_parser("fold", help="fold ReduceProd nodes whose inputs are constant",
                       description="Replace every ReduceProd whose data (and axes) are constant with its "
                       "value, computed by rewriter's exact kernel; remove constants left unused.")
    p.add_argument("model", metavar="MODEL", help="input .onnx file, or a directory: every .onnx file below it")
    _add_output(p)
    _add_int_overflow(p)
    _add_verify_flags(p)
    p.set_defaults(handler=_cmd_fold)

    p = sub.add_parser("optimize", help="fold, remove what became unused, verify",
                       description="Fold constant ReduceProd nodes, remove every node and initializer "
                       "nothing uses, and check the result with strict shape inference.")
    p.add_argument("model", metavar="MODEL", help="input .onnx file, or a directory: every .onnx file below it")
    _add_output(p)
    _add_int_overflow(p)
    _add_verify_flags(p)
    p.set_defaults(handler=_cmd_optimize)

    p = sub.add_parser("check", help="verify every ReduceProd output's shape")
    p.add_argument("model", metavar="MODEL", help="input .onnx file")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document (schema rewriter.check/1) instead of a table")
    p.set_defaults(handler=_cmd_check)
    _add_file_options(sub)
    return parser


# ---------------------------------------------------------------- convert

def _cmd_convert(args) -> int:
    import os

    from rewriter import convert, model_io

    start = getattr(args, "started", None) or time.perf_counter()  # _run sets it before loading
    model = args.input_model
    base_dir = os.path.dirname(os.path.abspath(args.model))
    # with shape verification on, _verify_rewrite runs the strict inference on the result
    result, report = convert.convert_model(model, args.opset, base_dir=base_dir,
                                           strict_check=args.no_verify)
    _verify_rewrite(model, result, args)
    model_io.save_model(result, args.output)
    elapsed = time.perf_counter() - start
    print(f"{args.model}: opset {report.source_opset} -> {report.target_opset}, "
          f"written to {args.output} in {elapsed:.2f}s")
    for line in report.summary_lines():
        print(f"  {line}")
    return EXIT_OK


# ---------------------------------------------------------------- fold / optimize

def _cmd_fold(args) -> int:
    """Fold constant ReduceProd nodes; with ``optimize`` also remove what is unused and verify."""
    import os

    from rewriter import fold, model_io

    optimize = args.command == "optimize"
    start = getattr(args, "started", None) or time.perf_counter()  # _run sets it before loading
    size_before = os.path.getsize(args.model) if os.path.isfile(args.model) else 0
    model = args.input_model
    base_dir = os.path.dirname(os.path.abspath(args.model))
    result, report = fold.fold_model(model, int_overflow=getattr(args, "int_overflow", "skip"),
                                     base_dir=base_dir)
    if optimize:
        from rewriter import unused

        report.removed += unused.remove_unused(result)
        report.bytes_after = unused.constant_bytes(result)
        if not args.no_verify:
            import onnx

            def strict(m):
                onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)

            try:
                strict(result)
            except Exception as e:  # InferenceError, ValidationError, ...
                try:
                    strict(model)
                except Exception:  # the input already fails: _verify_rewrite warns about it
                    pass
                else:
                    raise VerificationFailed(
                        f"the result fails strict shape inference: {_one_line(str(e))}") from None
    _verify_rewrite(model, result, args)
    model_io.save_model(result, args.output)
    elapsed = time.perf_counter() - start
    size_after = os.path.getsize(args.output)
    print(f"{args.model}: folded {len(report.folded)} ReduceProd node(s), skipped {len(report.skipped)}"
          + (f", removed {len(report.removed)} unused item(s)" if report.removed else "")
          + f"; written to {args.output} in {elapsed:.2f}s")
    for line in report.summary_lines():
        print(f"  {line}")
    print(f"  size: {size_before} -> {size_after} bytes (saved {size_before - size_after}); "
          f"constant data: {report.bytes_before} -> {report.bytes_after} bytes")
    return EXIT_OK


def _cmd_optimize(args) -> int:
    """Fold, remove unused nodes and initializers, verify with strict shape inference, save."""
    return _cmd_fold(args)


# ---------------------------------------------------------------- check / verification

def _cmd_check(args) -> int:
    """One row per ReduceProd (or one JSON document, schema rewriter.check/1) and a verdict."""
    import json

    from rewriter import shape_report, shapes

    report = shapes.check_report(args.input_model)
    if args.json:
        print(json.dumps(report.to_dict(model=args.model), indent=2))
    else:
        print(f"{args.model}:")
        for line in shape_report.table_lines(report):
            print(line)
    return EXIT_OK if report.ok else EXIT_PROBLEM


def _verify_rewrite(original, rewritten, args) -> None:
    """Shape-verify (and with --verify, numerically verify) a rewrite before it is written.

    Shape problems the input already had (and the result kept) are printed as warnings; one the rewrite
    introduced, or a numerical mismatch, raises VerificationFailed (exit 1, nothing written).
    The input is only verified when the result has a problem (to tell old from new): a
    clean result costs one shape inference, not two.
    """
    if not getattr(args, "no_verify", False):
        from rewriter import shapes

        after = shapes.verify_shapes(rewritten)
        known = {p.key() for p in shapes.verify_shapes(original)} if after else set()
        for p in after:
            if p.key() in known:
                print(f"warning: shape problem already in the input: {_one_line(str(p))}", file=sys.stderr)
        new = [p for p in after if p.key() not in known]
        if new:
            shown = "; ".join(_one_line(str(p)) for p in new[:3])
            more = f" (and {len(new) - 3} more)" if len(new) > 3 else ""
            raise VerificationFailed(f"the rewrite introduced {len(new)} shape problem(s): {shown}{more}")
    if getattr(args, "verify", False):
        from rewriter import numerics

        report = numerics.verify_numerics(original, rewritten, seed=getattr(args, "seed", 0))
        for line in report.summary_lines():
            print(line)
        if not report.ok:
            bad = [o.line() for o in report.outputs if not o.ok] or [report.error]
            raise VerificationFailed(f"numerical verification failed: {'; '.join(bad)}")


# ---------------------------------------------------------------- entry point

def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as e:
        print(f"error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    handler = logging.StreamHandler()
    handler.setFormatter(_LowercaseLevel("%(levelname)s: %(message)s"))  # "warning: ..." like ours
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, handlers=[handler])
    try:
        import os

        if args.command in ("convert", "fold", "optimize") and os.path.isdir(args.model):
            from rewriter import batch

            return batch.run_directory(args)
        return _run(args)
    except UsageError as e:
        print(f"error: {_one_line(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `rewriter check model.onnx | head`: the reader left
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK


class _LowercaseLevel(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace(record.levelname, record.levelname.lower(), 1)


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
