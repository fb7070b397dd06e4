"""The one id policy: where every id the engine mints for an event comes from.

Theory of operation
-------------------
An AG-UI producer names what it opens: a text message, a reasoning span, a tool
call, a tool result message. When the source (a model, a framework) gave no id,
the producer mints one, and it mints it here, never by hand:

* :func:`new_id` -- the default: a fresh random id (uuid4 hex, 32 characters).
  Every ``id_factory`` parameter of the engine defaults to it; a test passes a
  counter to pin the ids.
* :func:`random_id` -- a random id with a prefix and a length, for ids that must
  look like a provider's own (``call_...`` tool call ids a model API expects back).
* :class:`Ids` -- one producer's policy for the ids of one run: ``ids.mint(kind)``
  gives the next id for an entity of ``kind`` (``"msg"``, ``"reasoning"``,
  ``"call"``, ``"result"``). ``Ids(factory)`` ignores the kind and calls the factory
  (the decision loop, the LangGraph translator: their ``id_factory``);
  ``Ids.sequential(prefix)`` gives ``f"{prefix}-{kind}-{n}"`` with one counter for
  all kinds (the CrewAI translator: ``{runId}-msg-1``, ``{runId}-call-2``: readable
  and unique within the run). The :class:`~agui_engine.protocol.writer.EventWriter`
  takes one.

No IO: the randomness is :mod:`uuid`'s (the operating system's generator), no clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Final

__all__ = ["IdFactory", "Ids", "UUID_HEX_DIGITS", "new_id", "random_id"]

#: A function that returns a fresh id on each call.
IdFactory = Callable[[], str]

#: The length of :func:`new_id`'s ids (a uuid4 in hex).
UUID_HEX_DIGITS: Final = 32


def new_id() -> str:
    """A fresh random id (uuid4 hex). Ids come from the caller; this is the default."""
    return uuid.uuid4().hex


def random_id(prefix: str = "", length: int = UUID_HEX_DIGITS) -> str:
    """``prefix`` + ``length`` random hex digits (at most :data:`UUID_HEX_DIGITS`)."""
    return prefix + uuid.uuid4().hex[:length]


class Ids:
    """One producer's id policy for one run: ``mint(kind)`` -> a fresh id.

    ``Ids()`` mints :func:`new_id`; ``Ids(factory)`` calls ``factory`` (the kind is
    not part of the id); :meth:`sequential` numbers them.
    """

    __slots__ = ("_count", "_factory", "_prefix")

    def __init__(self, factory: IdFactory = new_id) -> None:
        self._factory: IdFactory | None = factory
        self._prefix = ""
        self._count = 0

    @classmethod
    def sequential(cls, prefix: str) -> Ids:
        """Ids ``f"{prefix}-{kind}-{n}"``, ``n`` counting every id minted (1, 2, ...)."""
        ids = cls()
        ids._factory = None
        ids._prefix = prefix
        return ids

    def mint(self, kind: str) -> str:
        """A fresh id for an entity of ``kind`` (``"msg"``, ``"reasoning"``, ``"call"``, ``"result"``)."""
        if self._factory is not None:
            return self._factory()
        self._count += 1
        return f"{self._prefix}-{kind}-{self._count}"
