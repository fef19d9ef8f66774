"""Hooks for tests/convert: the backend-conversion counts and the known-gap table size in
every run's terminal summary (not only with -s)."""


def pytest_terminal_summary(terminalreporter):
    import sys

    backend = sys.modules.get("tests.convert.test_backend")
    results = getattr(backend, "RESULTS", None)
    if results:
        write = terminalreporter.write_line
        write("backend node tests converted (tried / succeeded / refused-and-inexpressible / "
              "refused-but-expressible [known gaps] / defects [known]):")
        for target, c in sorted(results.items()):
            refused_expr = sum(v for k, v in c.items() if k.startswith("refused-expressible"))
            gaps = c.get("refused-expressible (known gap)", 0)
            defects = sum(v for k, v in c.items() if k.startswith("defect"))
            succeeded = sum(v for k, v in c.items() if k.startswith("succeeded"))
            unverified = c.get("succeeded (no runtime runs it: valid, outputs unchecked)", 0)
            write(f"  opset {target:>2}: {c['tried']} / {succeeded} / {c.get('refused-inexpressible', 0)} / "
                  f"{refused_expr} [{gaps}] / {defects} [{c.get('known defect', 0)}]"
                  + (f"; {c['succeeded (oracle said inexpressible)']} succeeded where the oracle expected "
                     f"a refusal" if c.get("succeeded (oracle said inexpressible)") else "")
                  + (f"; {unverified} run by no runtime (outputs unchecked)" if unverified else ""))
        seen = set().union(*getattr(backend, "GAPS_SEEN", {}).values()) if getattr(backend, "GAPS_SEEN", None) else set()
        stale = len(backend.KNOWN_GAPS) - len(seen & set(backend.KNOWN_GAPS))
        write(f"  known-gap table: {len(backend.KNOWN_GAPS)} (op, step) entries"
              + (f", {stale} not needed in this run" if len(results) == len(backend.TARGETS) and stale else "")
              + f"; known defects: {len(backend.KNOWN_DEFECTS)} (case, target) entries")
    coverage = sys.modules.get("tests.convert.test_coverage")
    if coverage is not None and hasattr(coverage, "PENDING_BLOCKED"):
        stale = getattr(coverage, "STALE", [])
        terminalreporter.write_line(
            f"coverage: {len(coverage.PENDING_BLOCKED)} blocked steps pending an adapter"
            + (f", {len(stale)} now covered (remove from PENDING_BLOCKED): {stale[:10]}" if stale else ""))
    ops = sys.modules.get("tests.convert.test_backend_ops")
    trips = getattr(ops, "ROUND_TRIP", None)
    if trips:
        terminalreporter.write_line(f"backend round trips via opset 13: {trips['down to 13']} went down, "
                                    f"{trips['back up']} came back up and reproduced the case")
    expanded = getattr(ops, "EXPANDED", None)
    if expanded:
        for target, c in sorted(expanded.items()):
            terminalreporter.write_line(
                f"expanded backend cases to opset {target}: tried {c['tried']}, succeeded {c['succeeded']}, "
                f"refused-inexpressible {c['refused-inexpressible']}, "
                f"refused-expressible (known gaps) {c['refused-expressible (known gap)']}")
    intermediate = getattr(ops, "INTERMEDIATE", None)
    if intermediate:
        for target, c in sorted(intermediate.items()):
            refused_expr = sum(v for k, v in c.items() if k.startswith("refused-expressible"))
            terminalreporter.write_line(
                f"backend node tests to opset {target}: tried {c['tried']}, succeeded "
                f"{sum(v for k, v in c.items() if k.startswith('succeeded'))}, refused-inexpressible "
                f"{c['refused-inexpressible']}, refused-expressible {refused_expr} "
                f"[known gaps {c['refused-expressible (known gap)']}], known defects {c['known defect']}")
