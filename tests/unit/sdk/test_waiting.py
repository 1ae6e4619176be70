"""memledger.sdk.waiting.wait_until: the one polling helper."""

from __future__ import annotations

import itertools
import time

import pytest

from memledger.sdk.waiting import WaitTimeout, wait_until


def test_returns_the_first_truthy_value() -> None:
    calls = itertools.count(1)
    assert wait_until(lambda: (n := next(calls)) >= 3 and n * 10, 5, 0.001, what="3") == 30


def test_times_out_saying_what_it_waited_for_and_the_last_error() -> None:
    def flaky() -> bool:
        raise ConnectionError("refused")

    started = time.monotonic()
    with pytest.raises(WaitTimeout, match=r"after 0.2s waiting for the port \(last error: "
                                          r"ConnectionError\('refused'\)\)") as info:
        wait_until(flaky, 0.2, 0.05, what="the port", ignore=(ConnectionError,))
    assert 0.2 <= time.monotonic() - started < 2
    assert isinstance(info.value, TimeoutError)
    assert isinstance(info.value.__cause__, ConnectionError)


def test_other_errors_propagate_at_once() -> None:
    def dead() -> bool:
        raise RuntimeError("process exited")

    with pytest.raises(RuntimeError, match="process exited"):
        wait_until(dead, 30, 0.05, what="a dead process", ignore=(OSError,))


def test_own_error_type_and_a_last_try_at_the_deadline() -> None:
    class NodeDown(Exception):
        pass

    calls: list[float] = []
    with pytest.raises(NodeDown, match="after 0.3s waiting for height 9$"):
        wait_until(lambda: calls.append(time.monotonic()), 0.3, 10, what="height 9",
                   error=NodeDown)
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.25
