"""The command line's arguments: one parser per command, argument types, usage errors."""

from __future__ import annotations

import argparse

from rewriter.cli import arg_types, commands, freeze_option
from rewriter.cli.runner import UsageError

__all__ = ["build_parser", "check_usage"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


def _add_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="input .onnx file, or a directory: every .onnx file below it")


def _add_output(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("-o", "--output", required=required, metavar="OUT",
                   help="where to write the result (written atomically; may be the input path); "
                   "with a directory MODEL, the directory that mirrors it")


def _add_file_options(sub) -> None:
    """Options every command shares (called from build_parser): -v/-q after the command too,
    --allow-invalid-input, -j; and for the commands that write models --external-data, --json."""
    for name, p in sub.choices.items():
        group = p.add_mutually_exclusive_group()
        group.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                           help="log each step taken (INFO messages of rewriter.*) on stderr")
        group.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                           help="print only the result line and errors")
        freeze_option.add_option(p)
        p.add_argument("--allow-invalid-input", action="store_true",
                       help="process an input that onnx.checker refuses (with a warning) instead of "
                       "refusing it; the result is then not held to the checker either")
        p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                       help="with a directory MODEL: worker processes (default 1)")
        if name == "check":
            continue
        p.add_argument("--external-data", type=arg_types.layout_arg, default=None, metavar="always|never|BYTES",
                       help="where the output keeps tensor data: 'always' in OUT.data beside it, 'never' "
                       "inline, or in OUT.data for tensors of at least BYTES bytes (default: as the input: "
                       "external tensors stay external, and new ones of 1 KiB or more join them)")
        p.add_argument("--json", action="store_true",
                       help="print one JSON object (schema rewriter.result/1) on stdout: what changed, "
                       "the verification, timings, before/after statistics")


def _add_static_shapes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fix-dim", type=arg_types.fix_dim_arg, action="append", default=None, metavar="SYMBOL=SIZE",
                   help="make a symbolic dim static wherever it appears (graph inputs, outputs, value_info), "
                   "e.g. batch=1, for toolchains that need static shapes; repeat for several symbols")


def _add_verify_flags(p: argparse.ArgumentParser, static: bool = False) -> None:
    p.add_argument("--no-verify", action="store_true",
                   help="skip the shape verification of the result (default: a ReduceProd shape "
                   "problem the rewrite introduced fails the command, one the input had is a warning)")
    p.add_argument("--verify", action="store_true",
                   help="also run the original and the result on the same random inputs (ONNX Runtime, "
                   "else onnx.reference) and compare every output")
    p.add_argument("--seed", type=int, default=None,
                   help="seed for the random inputs of --verify (and of --calibrate / --max-error; default 0)")
    p.add_argument("--rtol", type=float, default=None,
                   help="--verify: relative tolerance for float outputs (default per type: float 1e-4)")
    p.add_argument("--atol", type=float, default=None,
                   help="--verify: absolute tolerance for float outputs (default per type: float 1e-6)")
    p.add_argument("--input-shape", type=arg_types.input_shape_arg, action="append", default=None,
                   metavar="NAME:DIMS", help=("fix graph input NAME's shape in the result, e.g. "
                   "x:1,3,224,224 (its symbols take these sizes wherever they appear; a declared -1 is a "
                   "dynamic dim), as onnxsim's --overwrite-input-shape; --verify uses it too" if static else
                   "--verify: the shape of graph input NAME, e.g. x:1,3,224,224; its symbolic dims take these "
                   "sizes everywhere (default: every unpinned dynamic dim is 2)") + "; repeat for several inputs")
    p.add_argument("--input-value", type=arg_types.input_value_arg, action="append", default=None, metavar="NAME:VALUES",
                   help="--verify: feed graph input NAME these values instead of random ones (e.g. a sample "
                   "rate sr:16000; as many values as the input has elements, or one for a scalar); repeat "
                   "for several inputs")


def _add_int_overflow(p: argparse.ArgumentParser) -> None:
    p.add_argument("--int-overflow", choices=["skip", "wrap", "saturate"], default="skip",
                   help="integer products that overflow: leave the node with a warning (skip, default: "
                   "runtimes disagree), fold the wrapped value (wrap, as NumPy and the ONNX reference) "
                   "or the clamped value (saturate, as ONNX Runtime's CPU kernel)")


class _Version(argparse.Action):
    """--version, with the version looked up only when asked for."""

    def __call__(self, parser, namespace, values, option_string=None):
        import rewriter

        print(f"rewriter {rewriter.__version__}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rewriter",
        description="Rewrite ONNX models: migrate opsets up or down, optimize and fold constants exactly, verify shapes and numerics.",
        epilog="Exit status: 0 success, 1 verification found a problem, 2 bad input, bad usage or an "
        "impossible rewrite, 130 interrupted.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-v", "--verbose", action="store_true",
                       help="log each step taken (INFO messages of rewriter.*) on stderr")
    group.add_argument("-q", "--quiet", action="store_true", help="print only the result line and errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    _add_convert(sub)
    _add_fold(sub)
    _add_optimize(sub)
    _add_check(sub)
    _add_file_options(sub)
    return parser


def _add_convert(sub) -> None:
    p = sub.add_parser("convert", help="migrate a model to other opsets, an IR version or a runtime release",
                       description="Migrate MODEL to opset N (1..latest, up or down), the ai.onnx.ml opset M, "
                       "IR version K, or what a runtime release loads (--target). Every node, in the "
                       "main graph, in If/Loop/Scan bodies and in model-local functions, goes through "
                       "each schema step of its op: steps that only changed the allowed types keep the "
                       "node when its types are allowed at N; attributes that became inputs (and back) "
                       "move; new optional features are dropped when unused and rewritten with older ops "
                       "when that is exact; ops newer than N, or that the runtime lacks, are expanded into "
                       "their ONNX function bodies. Going down, the IR version becomes the lowest the "
                       "result needs. The whole model is planned first: when something cannot be "
                       "converted, nothing is written and the error names every blocking node, why, and "
                       "the opsets where it would work. --plan shows the plan without writing anything.",
                       epilog="Examples: rewriter convert model.onnx --opset 13 -o model13.onnx; "
                       "rewriter convert model.onnx --target onnxruntime==1.15 -o for_ort115.onnx; "
                       "rewriter convert model.onnx --opset 11 --plan")
    _add_model(p)
    p.add_argument("--opset", type=arg_types.opset_arg, default=None, metavar="N",
                   help="target default-domain opset, 1..the latest your onnx knows, or 'latest'")
    p.add_argument("--ml-opset", type=arg_types.positive_arg("--ml-opset"), default=None, metavar="M",
                   help="target ai.onnx.ml opset (1..5 with onnx 1.23; default: kept); alone, only that "
                   "domain is converted")
    p.add_argument("--ir-version", type=arg_types.positive_arg("--ir-version"), default=None, metavar="K",
                   help="the result's IR version (default: going down, the lowest the result needs; else "
                   "the input's, raised only as needed); what IR K cannot hold is rewritten where exact "
                   "(functions inlined, initializers made inputs, sparse made dense, metadata moved), "
                   "else the command fails naming it and the lowest K that works")
    p.add_argument("--target", default=None, metavar="RUNTIME==VERSION|PROFILE.json",
                   help="convert for a runtime release: onnxruntime==1.15 (1.0 ..), tensorrt==8.6 (8.5, "
                   "8.6, 10.x), openvino==2026.4 / 2024.6, tract==0.23, tvm==0.27, litert (onnx2tf 2.6 into "
                   "LiteRT; each measured in that release: the result runs there, or the nodes that block "
                   "are named; some forms need --input-shape), or a JSON profile {\"opsets\": {\"\": 13, \"ai.onnx.ml\": 2}, \"ir_version\": 7, "
                   "\"unsupported\": {\"\": [\"LayerNormalization\"]}}: its opsets and IR version are "
                   "chosen (opsets it takes are kept) and an op it lacks is expanded into its ONNX "
                   "function body, or blocks; instead of --opset/--ml-opset/--ir-version. The "
                   "ai.onnx.ml / com.microsoft ops it lacks are lowered to standard ONNX first (docs/lowering.md)")
    p.add_argument("--lower-ops", default=None, metavar="OPS",
                   help="lower ops without a function body to standard ONNX computing what ONNX Runtime's "
                   "kernel computes: 'all', a domain (ai.onnx.ml), DOMAIN::Op or an op name, comma-separated "
                   "(alone, or before --opset/--target/--dtype); a node that cannot be lowered exactly "
                   "fails the command, named")
    p.add_argument("--plan", action="store_true",
                   help="write nothing: print, per op type, how many nodes and how each schema step would "
                   "be taken (kept, moved, rewritten, expanded, blocked) and every blocking node; exit 0 "
                   "when the conversion is possible, 2 when it is not (-o not needed)")
    _add_precision_flags(p)
    _add_output(p, required=False)  # required unless --plan: checked by cmd_convert
    _add_verify_flags(p, static=True)
    _add_static_shapes(p)
    p.set_defaults(handler=commands.cmd_convert)


def _add_precision_flags(p: argparse.ArgumentParser) -> None:
    """convert's --dtype and the flags that go with it."""
    p.add_argument("--dtype", choices=["float16", "bfloat16"], default=None,
                   help="rewrite float32 computation to this type (with or without --opset/--target: both "
                   "at once migrate, then convert); what must stay float32 does (inputs a schema fixes "
                   "to float, ops without a half type or, with --target, without a half kernel, constants "
                   "beyond float16's range unless clamping is exact, shape arithmetic), and the summary "
                   "says which nodes and why; --verify compares with the float32 model by relative L2 "
                   "error (1e-2 unless --rtol)")
    io = p.add_mutually_exclusive_group()
    io.add_argument("--keep-io-types", dest="keep_io_types", action="store_true", default=True,
                    help="with --dtype: graph inputs and outputs stay float32, with Casts at the edge (default)")
    io.add_argument("--no-keep-io-types", dest="keep_io_types", action="store_false",
                    help="with --dtype: float32 graph inputs and outputs become the half type too")
    p.add_argument("--keep-io-precision", action="store_true",
                   help="with --dtype: the nodes reading each float input first compute in float32 (their weights "
                   "stored in half), so the inputs are not rounded to half: removes a large --verify floor")
    p.add_argument("--keep-op-types", type=arg_types.names_arg, default=None, metavar="OP,...",
                   help="with --dtype: op types that stay float32, e.g. LayerNormalization,Softmax (of the domains "
                   "the model imports, its functions or its nodes: another name is an error naming the nearest)")
    p.add_argument("--keep-nodes", type=arg_types.names_arg, default=None, metavar="NAME,...",
                   help="with --dtype: node names that stay float32")
    p.add_argument("--calibrate", action="store_true",
                   help="with --dtype float16: run the float32 model in ONNX Runtime on random inputs "
                   "(--input-value / --input-shape to give real ones) and keep in float32 the nodes that "
                   "make or read values beyond float16's range")
    p.add_argument("--optimize", action="store_true",
                   help="with --dtype: run rewriter optimize on the model first (BatchNormalization folded into "
                   "Conv and the like): fewer nodes are fewer roundings in half precision, and a smaller file")
    p.add_argument("--calibration-data", action="append", default=None, metavar="NPZ",
                   help="with --dtype float16: calibrate (as --calibrate) on real inputs: a .npz of one array "
                   "per graph input, under the input's name (numpy.savez); repeat for several samples, the "
                   "largest magnitude over all of them counts")
    p.add_argument("--max-error", type=float, default=None, metavar="R",
                   help="with --dtype: keep float32, where measured to matter, the runs of nodes whose half "
                   "precision takes a float output's relative L2 error beyond R (1e-2, say) on the calibration "
                   "inputs (--calibration-data, else random ones from --seed/--input-shape/--input-value); "
                   "each candidate is converted and run in ONNX Runtime: tens of conversions at worst")


def _add_fold(sub) -> None:
    p = sub.add_parser("fold", help="fold ReduceProd nodes whose inputs are constant",
                       description="Replace every ReduceProd whose data (and axes) are constant with its "
                       "value, computed by rewriter's exact kernel; remove constants left unused.")
    _add_model(p)
    _add_output(p)
    _add_int_overflow(p)
    _add_verify_flags(p)
    p.set_defaults(handler=commands.cmd_fold)


def _add_optimize(sub) -> None:
    p = sub.add_parser("optimize", help="shrink a model: fold constants exactly, fuse, merge repeats, drop unused",
                       description="Optimize MODEL in every graph, subgraph and model-local function: fold "
                       "constant ReduceProd with rewriter's exact kernel and every other constant node "
                       "(shape arithmetic, Constant/Cast/Identity chains, If on a constant condition; "
                       "integers exactly, floats with ONNX Runtime's kernels), fuse (BatchNormalization "
                       "into Conv/Gemm, MatMul+Add into Gemm, Min/Max into Clip, no-op and chain rules), "
                       "merge repeated nodes, remove what nothing uses, turn Constant nodes into "
                       "initializers. Names, doc strings and metadata are kept.",
                       epilog="Example: rewriter optimize model.onnx -o small.onnx --verify")
    _add_model(p)
    _add_output(p)
    _add_int_overflow(p)
    p.add_argument("--fold-limit", type=arg_types.bytes_arg, default=512 * 512 * 4, metavar="BYTES",
                   help="skip a fold that reads a tensor of more than BYTES, or writes one of more than "
                   "BYTES that the inputs it frees do not offset (default 1048576: onnxscript's 512x512 "
                   "float32); skipped folds are reported. ReduceProd folds whatever its size")
    p.add_argument("--strip-metadata", action="store_true",
                   help="drop every doc string and metadata entry (kept by default)")
    p.add_argument("--allow-removing-custom-ops", action="store_true",
                   help="also remove custom-domain nodes whose outputs nothing uses (kept by default: "
                   "they may have effects the tool cannot see)")
    _add_verify_flags(p, static=True)
    _add_static_shapes(p)
    p.set_defaults(handler=commands.cmd_optimize)


def _add_check(sub) -> None:
    p = sub.add_parser("check", help="verify shapes (every ReduceProd output), and with --target whether a runtime loads the model",
                       description="Run ONNX strict shape inference and check every ReduceProd output "
                       "(main graph, If/Loop/Scan bodies, model-local functions) against rewriter's own "
                       "shape rule and the declared shapes. Prints one row per ReduceProd and a verdict.",
                       epilog="Exit status: 0 no problem, 1 a shape problem, 2 bad input (an input onnx.checker "
                       "refuses is bad input). Example: rewriter check model.onnx --json")
    _add_model(p)
    p.add_argument("--json", action="store_true",
                   help="print one JSON document (schema rewriter.check/1) instead of a table")
    p.add_argument("--target", default=None, metavar="RUNTIME==VERSION|PROFILE.json",
                   help="also say whether that runtime release (onnxruntime==1.15, tensorrt==8.6, "
                   "openvino==2026.4, tract==0.23, tvm==0.27, litert, a JSON profile) loads the model as it is, and what stops it (IR version, opsets, ops it "
                   "lacks); exit 1 when something does")
    p.add_argument("--input-shape", type=arg_types.input_shape_arg, action="append", default=None,
                   metavar="NAME:DIMS", help="check the model with graph input NAME's shape fixed, e.g. "
                   "x:1,3,224,224, as convert --input-shape writes it (with --target: what that release makes "
                   "of it, and what convert --target X --input-shape would do); repeat for several inputs")
    _add_static_shapes(p)
    p.set_defaults(handler=commands.cmd_check)


def check_usage(args: argparse.Namespace, directory: bool) -> None:
    """Refuse flags that make no sense together (UsageError, exit 2); fill in their defaults."""
    if getattr(args, "verify", False) and getattr(args, "no_verify", False):
        raise UsageError("--verify and --no-verify contradict each other")
    if not getattr(args, "verify", False):
        calibrating = getattr(args, "calibrate", False) or getattr(args, "max_error", None) is not None
        given = [flag for flag, value in (("--seed", None if calibrating else getattr(args, "seed", None)),
                                          ("--rtol", getattr(args, "rtol", None)),
                                          ("--atol", getattr(args, "atol", None)),
                                          ("--input-value", None if calibrating else getattr(args, "input_value", None)),
                                          ("--input-shape", getattr(args, "input_shape", None)
                                           if args.command == "fold" else None))
                 if value is not None]
        if given:
            raise UsageError(f"{', '.join(given)}: only for --verify, which is not given")
    if getattr(args, "verbose", False) and getattr(args, "quiet", False):
        raise UsageError("-v/--verbose and -q/--quiet contradict each other")
    for flag in ("rtol", "atol"):
        value = getattr(args, flag, None)
        if value is not None and not value >= 0:
            raise UsageError(f"--{flag} must be a number >= 0, got {value}")
    if hasattr(args, "seed") and args.seed is None:
        args.seed = 0
    jobs = getattr(args, "jobs", None)
    if jobs is not None:
        if not directory:
            raise UsageError(f"-j applies to a directory MODEL; {args.model} is not a directory")
        if jobs < 1:
            raise UsageError(f"-j must be at least 1, got {jobs}")
    if hasattr(args, "jobs") and jobs is None:
        args.jobs = 1
    if getattr(args, "output", None) == "-":
        raise UsageError("-o -: writing a model to stdout is not supported; give a file name")
    if args.command == "convert":
        chosen = [flag for flag, value in (("--opset", args.opset), ("--ml-opset", args.ml_opset),
                                           ("--ir-version", args.ir_version)) if value is not None]
        if args.target is not None and chosen:
            raise UsageError(f"--target chooses the opsets and the IR version itself: drop {', '.join(chosen)} "
                             "(or drop --target)")
        if args.target is None and args.opset is None and args.ml_opset is None and args.dtype is None \
                and args.lower_ops is None:
            raise UsageError("convert needs --opset N (or 'latest'), --ml-opset M, --target RUNTIME==VERSION, "
                             "--dtype float16|bfloat16 or --lower-ops OPS")
        if args.dtype is None:
            given = [flag for flag, value in (("--keep-op-types", args.keep_op_types), ("--keep-nodes", args.keep_nodes),
                                              ("--calibrate", args.calibrate or None),
                                              ("--calibration-data", args.calibration_data),
                                              ("--max-error", args.max_error),
                                              ("--optimize", args.optimize or None),
                                              ("--no-keep-io-types", None if args.keep_io_types else True),
                                              ("--keep-io-precision", args.keep_io_precision or None))
                     if value is not None]
            if given:
                raise UsageError(f"{', '.join(given)}: only for --dtype, which is not given")
        elif args.keep_io_precision and not args.keep_io_types:
            raise UsageError("--keep-io-precision keeps the float32 inputs unrounded: drop --no-keep-io-types")
        elif args.max_error is not None and not args.max_error > 0:
            raise UsageError(f"--max-error must be a number > 0, got {args.max_error}")
        elif (args.calibrate or (args.calibration_data and args.max_error is None and not args.verify)) \
                and args.dtype != "float16":
            flag = "--calibrate" if args.calibrate else "--calibration-data"
            raise UsageError(f"{flag}: bfloat16 has float32's range, there is nothing to calibrate "
                             "(the data serves --max-error and --verify)")
        elif getattr(args, "plan", False):
            raise UsageError("--plan shows an opset conversion's plan; with --dtype, the summary says what stays float32")
