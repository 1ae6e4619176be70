"""One way to wait for something: poll a predicate until it gives a truthy value.

    height = wait_until(lambda: rpc.latest_height() >= 5 and rpc.latest_height(), 30,
                        what="height 5", ignore=(httpx.HTTPError,))

The predicate's first truthy value is returned. An exception in ``ignore`` counts as "not
yet" (the last one is named in the timeout message); any other exception propagates at
once, which is how a predicate reports that waiting longer cannot help (e.g. the process it
waits for has exited). On timeout the error is a ``WaitTimeout`` (a ``TimeoutError``) saying
what was awaited, for how long, and the last error if the last try failed; pass ``error`` to raise a
caller's own exception type with that message instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["WaitTimeout", "wait_until"]


class WaitTimeout(TimeoutError):
    """``wait_until`` ran out of time."""


def wait_until(predicate: Callable[[], T | None], timeout: float, interval: float = 0.1, *,
               what: str, ignore: tuple[type[BaseException], ...] = (),
               error: Callable[[str], BaseException] = WaitTimeout) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a truthy value, and
    return that value; raise ``error(message)`` after ``timeout`` seconds.

    The predicate is always called at least once, and once more at the deadline.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = predicate()
        except ignore as exc:
            last_error = exc
        else:
            if value:
                return value
            last_error = None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            message = f"timed out after {timeout:g}s waiting for {what}"
            if last_error is not None:
                message += f" (last error: {last_error!r})"
            raise error(message) from last_error
        time.sleep(min(interval, remaining))
