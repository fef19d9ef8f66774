"""``--freeze-input-defaults [NAME,...]`` (convert, fold, optimize, check): graph inputs with an
initializer become constants before any work (:mod:`rewriter.graph.input_defaults`), and what
the option would unlock in a blocked conversion (``convert --plan``, ``check --target``).

The names follow the flag after ``=`` (``--freeze-input-defaults=b,c``) or as the next word;
the flag alone (before another flag, or last) freezes every input that has an initializer.
"""

from __future__ import annotations

import argparse

__all__ = ["add_option", "freeze", "summary_line", "unlock", "unlock_line"]


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"expected NAME[,NAME...], got {text!r}")
    if len(names) == 1 and names[0].lower().endswith(".onnx"):  # the MODEL, taken as the option's value
        raise argparse.ArgumentTypeError(f"{text!r} taken as input names: put the flag after MODEL, "
                                         "or give names as --freeze-input-defaults=NAME,...")
    return names


def add_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--freeze-input-defaults", nargs="?", const=True, default=None, type=_names,
                   metavar="NAME,...",
                   help="make graph inputs that have an initializer (a default a caller may override, as every "
                   "weight of an IR-3 model or of a keep_initializers_as_inputs export) constants: they leave the "
                   "graph's inputs and keep their values, so conversions and folds may read them; alone, every such "
                   "input; =b,c only those (the IR version becomes at least 4)")


def freeze(args) -> None:
    """Freeze the loaded input's defaults in place, as ``args.freeze_input_defaults`` asks
    (RewriterError, exit 2, naming a name that is not a graph input with an initializer)."""
    from rewriter.graph.input_defaults import freeze_in_place

    model = args.run.input_model
    ir_before = model.ir_version
    args.run.frozen_inputs = freeze_in_place(model, args.freeze_input_defaults)
    args.run.frozen_ir_before = ir_before
    if args.run.frozen_inputs and args.run.input_inferred is not None:  # of the model as it now is
        from rewriter.graph.inferred import LazyInference

        args.run.input_inferred = LazyInference(model)


def summary_line(args) -> str | None:
    """The summary's line on what was frozen (None without the option)."""
    frozen = args.run.frozen_inputs
    if frozen is None:
        return None
    if not frozen:
        return "input defaults: no graph input has an initializer, nothing frozen"
    ir = args.run.frozen_ir_before
    raised = f" (IR {ir} -> 4: IR 3 has no initializers outside the graph inputs)" if ir is not None and ir < 4 else ""
    return f"input defaults frozen into constants: {', '.join(frozen)}{raised}"


def unlock(model, spec, report, base_dir=None) -> dict | None:
    """What freezing would unlock in the blocked conversion ``report`` of ``model`` to ``spec``:
    None when no blocker names a graph input's default; else the names its blockers name, the
    node counts blocked before and after freezing them, and whether the conversion is then
    possible (planned again on a frozen copy)."""
    from rewriter.convert import convert_for
    from rewriter.errors import RewriterError
    from rewriter.graph.input_defaults import check_kept, default_note, freeze_input_defaults, input_defaults

    names = [n for n in input_defaults(model) if any(default_note(n) in b.reason for b in report.blockers)]
    if not names:
        return None
    frozen, _ = freeze_input_defaults(model, names)
    result, after = convert_for(frozen, spec, base_dir=base_dir, plan_only=True)
    found = {"names": names, "blocked": len(report.blockers), "blocked_after": len(after.blockers),
             "possible": after.ok, "why_not": None}
    try:
        check_kept(result, names)
    except RewriterError as e:  # the IR version chosen cannot hold them as constants
        found["possible"], found["why_not"] = False, str(e)
    return found


def unlock_line(found: dict) -> str:
    """:func:`unlock`'s answer in words."""
    flag = f"--freeze-input-defaults={','.join(found['names'])}"
    if found["possible"]:
        return f"{flag} would unlock it: the conversion is then possible"
    if found["why_not"]:
        return f"{flag} would not unlock it: {found['why_not']}"
    freed, left = found["blocked"] - found["blocked_after"], found["blocked_after"]
    if not freed:
        return f"{flag} would not unlock it: the same {left} node(s) would still block it"
    still = f"{left} node(s) would still block it" if left else "the IR version would still block it"
    return f"{flag} would unblock {freed} of {found['blocked']} node(s); {still}"
