"""SIGINT handler: when it raises and when it only remembers.

(Written so that the one-line mutants of tools/mutants.py that the older tests missed fail.)

Oracle: real SIGINTs sent to this process (os.kill), and whether KeyboardInterrupt comes.
The handler and its state are put back after each test.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from rewriter.cli import interrupts


def _sigint() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):  # the handler runs between bytecodes of the main thread
        time.sleep(0)
    time.sleep(0.01)


def _held_sigint() -> None:
    """A SIGINT that must only be remembered (a KeyboardInterrupt here is a test failure, not
    the end of the test session)."""
    try:
        _sigint()
    except KeyboardInterrupt:
        pytest.fail("the interrupt raised though the handler was not armed")


def test_an_unarmed_handler_only_remembers(sigint_handler):
    interrupts.install(armed=False)
    interrupts._state["pending"] = False
    _held_sigint()
    _held_sigint()
    assert interrupts.pending()


def test_a_second_interrupt_after_the_first_raised_is_only_remembered(sigint_handler):
    """The first interrupt raises and disarms: a second one cannot land in its clean-up."""
    interrupts.install(armed=True)
    interrupts._state["pending"] = False
    with pytest.raises(KeyboardInterrupt):
        _sigint()
    assert not interrupts._state["armed"]
    _held_sigint()
    assert interrupts.pending()


def test_leaving_a_disarmed_block_entered_unarmed_does_not_raise(sigint_handler):
    """Outside any armed block an interrupt is only remembered: a disarmed block inside that
    leaves it so (the interrupt raises at the next armed block instead)."""
    interrupts.install(armed=False)
    interrupts._state["pending"] = False
    try:
        with interrupts.disarmed():
            _held_sigint()
    except KeyboardInterrupt:
        pytest.fail("leaving the disarmed block raised, though it was entered unarmed")
    assert interrupts.pending() and not interrupts._state["armed"]
    with pytest.raises(KeyboardInterrupt):
        with interrupts.armed():
            pytest.fail("the block ran though an interrupt was pending")


def test_leaving_a_disarmed_block_entered_armed_raises(sigint_handler):
    """Control: entered armed, the held interrupt raises on leaving."""
    interrupts.install(armed=True)
    interrupts._state["pending"] = False
    with pytest.raises(KeyboardInterrupt):
        with interrupts.disarmed():
            _sigint()
    assert interrupts._state["armed"]
