"""Futures: what ``rpc_async`` and ``RRef.to_here_async`` return.

``ferry.Future`` is a ``concurrent.futures.Future`` (so
``concurrent.futures.wait``/``as_completed`` take it) that is also awaitable
from asyncio (``await fut``) and has torch's ``wait()``, ``value()``,
``done()`` and ``then(callback)``.

A future settles on one of ferry's threads, with the GIL taken; callbacks
added with ``then()`` or ``add_done_callback()`` run there (or at once if
the future is already done). Keep them short: that thread carries other
calls' replies too.

Coroutines returned by registered functions run on one asyncio event loop
per process, in a daemon thread named ``ferry-asyncio`` started on first
use (``event_loop()``); a coroutine awaiting ferry futures holds no ferry
thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Callable, Generator

from . import _errors

__all__ = ["Future", "event_loop"]


class Future(concurrent.futures.Future):
    """The result of an asynchronous call."""

    def wait(self, timeout: float | None = None) -> Any:
        """The value, once there (at most ``timeout`` seconds; None: until
        the call's own deadline settles it). Raises the call's error, or
        ``DeadlineExceededError`` if ``timeout`` passes first."""
        try:
            return self.result(timeout)
        except concurrent.futures.TimeoutError:
            if self.done():
                raise
            raise _errors.DeadlineExceededError(
                f"no result within {timeout} s") from None

    def value(self) -> Any:
        """The value of a done future (torch's ``Future.value()``)."""
        if not self.done():
            raise _errors.FailedPreconditionError("the future is not done")
        return self.result()

    def then(self, callback: Callable[[Future], Any]) -> Future:
        """A future of ``callback(self)``, run once this one is done (on the
        thread that settles it). An exception in ``callback`` settles the
        new future with it."""
        out = Future()
        out.set_running_or_notify_cancel()

        def run(done: Any) -> None:  # done: this future.
            try:
                out.set_result(callback(done))
            except BaseException as e:  # noqa: B902 -- handed to the future
                out.set_exception(e)

        self.add_done_callback(run)
        return out

    def cancel(self) -> bool:
        """ferry calls cannot be cancelled from here (their deadline ends
        them); always False."""
        return False

    def __await__(self) -> Generator[Any, None, Any]:
        return asyncio.wrap_future(self).__await__()

    def _settle(self, ok: bool, value: Any) -> None:
        if ok:
            self.set_result(value)
        else:
            self.set_exception(value)


def _new() -> Future:
    f = Future()
    f.set_running_or_notify_cancel()
    return f


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def event_loop() -> asyncio.AbstractEventLoop:
    """The asyncio event loop that runs registered coroutines (started on
    first use, in the daemon thread ``ferry-asyncio``)."""
    global _loop
    with _loop_lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="ferry-asyncio",
                             daemon=True).start()
            _loop = loop
        return _loop
