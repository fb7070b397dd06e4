"""Admission: whether a new run may start (the server's limits, each client's share, the
run logs' budget) and who may touch a run once it has (run keys, principals).

Theory of operation
-------------------
:meth:`Admission.admit` is asked before a run starts and refuses with
:class:`ServerBusyError` (503 / 4503 + ``Retry-After``: shutting down, the concurrent-run
limit, the client's cap ``max_runs_per_client``, the buffered-bytes budget) or
:class:`RunExistsError` (409 / 4409). A client is the principal its bearer token names, else
its address (:func:`client_key`); a run counts against its client while it runs and while a
subscriber still reads it (:meth:`Admission.hold` / :meth:`Admission.release`).

Each run gets a run key (:func:`new_run_key`: RUN_KEY_BYTES random bytes), handed to the
client that started it; the registry keeps only its hash (:func:`run_key_hash`).
:func:`may_touch` is the one rule of spec/transports.md §2.6 for a :class:`Caller`: it
presents the run's key, or it is the named principal that started the run.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from agui_engine.protocol.errors import WS_CLOSE_BUSY, CapacityError, RemoteInputError

from .input_decoding import check_run_id
from .registry_options import RegistryOptions
from .run_lifecycle import WS_CLOSE_RUN_EXISTS, GatewayLifecycle

if TYPE_CHECKING:
    from .run_record import Run

__all__ = [
    "Admission",
    "Caller",
    "RETRY_AFTER_BUSY_SECONDS",
    "RETRY_AFTER_SHUTDOWN_SECONDS",
    "RUN_KEY_BYTES",
    "RunExistsError",
    "ServerBusyError",
    "client_key",
    "may_touch",
    "new_run_key",
    "run_key_hash",
]

#: ``Retry-After`` (seconds) when the concurrent-run limit is reached. Runs end
#: all the time on a busy gateway, so a slot is likely free within a second;
#: longer makes clients idle while capacity is there.
RETRY_AFTER_BUSY_SECONDS = 1

#: ``Retry-After`` (seconds) while the server shuts down: a restart or a
#: load-balancer switch to another instance takes seconds, and shutdown itself
#: waits up to CANCEL_WAIT_SECONDS (5 s) for runs to end.
RETRY_AFTER_SHUTDOWN_SECONDS = 5

#: Random bytes of a run key, the capability that lets a client stream, resume
#: and cancel its run when tokens do not tell clients apart (spec/transports.md
#: §2.6). 16 bytes = 128 bits, more than a UUIDv4's 122: guessing one online at a
#: million requests a second would take ~10^25 years. 22 URL-safe characters.
RUN_KEY_BYTES = 16


def client_key(principal: str | None, address: str | None) -> str | None:
    """Who a run counts against for max_runs_per_client: the principal a per-client
    token names, else the client's address (None: neither -- stdio's one client)."""
    if principal:
        return "principal:" + principal
    if address:
        return "address:" + address
    return None


def run_key_hash(key: str) -> str:
    """What a registry (and a shared event log) keeps of a run key: its SHA-256,
    hex. Holding only the hash, neither a heap dump nor a reader of the shared
    store can present the key."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def may_touch(owner: str | None, key_hash: str, caller: Caller | None) -> bool:
    """Whether ``caller`` may stream, resume or cancel a run started by ``owner`` whose key
    hashes to ``key_hash`` (or read a kept run of a thread): the one rule of
    spec/transports.md §2.6. ``caller`` None: the transport itself, always allowed."""
    if caller is None:
        return True
    if caller.key is not None and key_hash and hmac.compare_digest(run_key_hash(caller.key), key_hash):
        return True
    if owner and caller.principal == owner:
        return True
    return not key_hash and not owner


class Caller(NamedTuple):
    """Who asks, over the network, to stream, resume or cancel a run: the principal
    their bearer token names (``check_bearer``: None auth off, ``""`` the shared
    token, else a name) and the run key they presented (None: none)."""

    principal: str | None
    key: str | None = None


class ServerBusyError(CapacityError):
    """The concurrent-run limit is reached; try again after ``retry_after`` seconds."""

    http_status = 503
    ws_close_code = WS_CLOSE_BUSY
    default_code = "server_busy"

    def __init__(self, message: str, *, retry_after: int = RETRY_AFTER_BUSY_SECONDS) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RunExistsError(RemoteInputError):
    """A run with this ``runId`` is already known here (start it with a new id, or resume it)."""

    http_status = 409
    ws_close_code = WS_CLOSE_RUN_EXISTS
    default_code = "run_exists"


def new_run_key() -> tuple[str, str]:
    """A new run key (RUN_KEY_BYTES random bytes as URL-safe text) and its hash."""
    key = secrets.token_urlsafe(RUN_KEY_BYTES)
    return key, run_key_hash(key)


class Admission:
    """Whether a new run may start, and each client's runs (see the module docstring).

    ``gateway``: the registry's admission state (open / draining / closed);
    ``held_bytes``: what the run logs hold now (the budget's measure; None: not counted)."""

    def __init__(
        self, options: RegistryOptions, gateway: GatewayLifecycle, held_bytes: Callable[[], int] | None = None
    ) -> None:
        self.options = options
        self.gateway = gateway
        self._held_bytes = held_bytes
        # Per client (see client_key): its runs not yet discarded.
        self._clients: dict[str, set[Run]] = {}

    def admit(self, run_id: str, *, exists: bool, active: int, owner: str | None, address: str | None) -> str | None:
        """The client a new run ``run_id`` counts against (None: nobody), or a refusal:
        ServerBusyError (shutting down, a limit reached), RunExistsError (``exists``: the id
        is known here), InvalidInputError (not a run id)."""
        if not self.gateway.admits:
            raise ServerBusyError("the server is shutting down", retry_after=RETRY_AFTER_SHUTDOWN_SECONDS)
        check_run_id(run_id)
        if exists:
            raise RunExistsError(
                f"run {run_id!r} already exists here; start a run with a new runId, "
                "or resume this one with Last-Event-ID"
            )
        max_runs = self.options.max_runs
        if active >= max_runs:
            raise ServerBusyError(f"the server is running its maximum of {max_runs} concurrent runs")
        client = client_key(owner, address)
        cap = self.options.max_runs_per_client
        if cap and client is not None and self.client_runs(client) >= cap:
            raise ServerBusyError(
                f"this client already holds {cap} runs (running or still being read); "
                "let one finish, or read the ones it started"
            )
        budget = self.options.max_buffered_bytes
        if budget and self._held_bytes is not None and self._held_bytes() >= budget:
            raise ServerBusyError(f"the runs' logs hold their budget of {budget} bytes of undelivered events")
        return client

    def hold(self, run: Run) -> None:
        """``run`` started: it counts against its client until :meth:`release`."""
        if run.client is not None:
            self._clients.setdefault(run.client, set()).add(run)

    def release(self, run: Run) -> None:
        """``run`` was discarded: its client holds it no longer."""
        if run.client is not None:
            runs = self._clients.get(run.client)
            if runs is not None:
                runs.discard(run)
                if not runs:
                    del self._clients[run.client]

    def client_runs(self, client: str) -> int:
        """How many runs ``client`` holds: running, or finished and still being read."""
        return sum(1 for run in self._clients.get(client, ()) if run.lifecycle.live or run.subscribers)
