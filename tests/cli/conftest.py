"""Fixtures of the command-line tests."""

from __future__ import annotations

import signal

import pytest

from rewriter.cli import interrupts


@pytest.fixture
def sigint_handler():
    """The test may take over SIGINT (rewriter.cli.interrupts); it is given back afterwards."""
    saved = signal.getsignal(signal.SIGINT)
    state = dict(interrupts._state)
    yield
    signal.signal(signal.SIGINT, saved)
    interrupts._state.update(state)
