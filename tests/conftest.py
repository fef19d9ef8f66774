"""Shared pytest hooks."""


def pytest_terminal_summary(terminalreporter):
    """Print how many fuzz cases ran, in every run's summary (not only with -s)."""
    import sys

    fuzz = sys.modules.get("tests.cli.test_fuzz")
    runs = getattr(fuzz, "RUNS", None)
    if runs and runs.get("command runs"):
        terminalreporter.write_line("fuzz: " + ", ".join(f"{k}: {v}" for k, v in runs.items()))
