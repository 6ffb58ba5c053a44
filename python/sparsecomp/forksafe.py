"""Locks that a forked child finds free.

``os.fork`` copies a process with only the calling thread: a lock another
thread held at that moment stays held in the child, by a thread that does not
exist there, and the child's first use of it waits forever (a worker forked by
``multiprocessing`` or a ``DataLoader`` while another thread compiled a
kernel hung in its own first compile). :func:`lock` gives a lock that every
forked child starts with released; :func:`after_fork` registers what else a
module must forget in a child (a compile worker whose pipes are the parent's).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any


class Lock:
    """A ``threading.Lock`` made again, released, in each forked child."""

    __slots__ = ("__weakref__", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        _LOCKS.add(self)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()

    def _renew(self) -> None:
        self._lock = threading.Lock()


_LOCKS: weakref.WeakSet[Lock] = weakref.WeakSet()
_FORGET: list[Callable[[], None]] = []


def lock() -> Lock:
    """A lock a forked child starts with released."""
    return Lock()


def after_fork(forget: Callable[[], None]) -> None:
    """Call ``forget()`` in each forked child (after every lock is released)."""
    _FORGET.append(forget)


def _in_child() -> None:
    for held in list(_LOCKS):
        held._renew()
    for forget in _FORGET:
        forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)
