"""AG-UI over stdio (NDJSON), the server: :func:`serve_stdio`, behind ``agui-engine serve
--transport stdio``. The client, which runs such a server as a subprocess, is
:class:`~transports.stdio_client.StdioAgent`; both speak :mod:`~transports.envelope`.

Theory of operation
-------------------
In: one JSON object per line on stdin. A ``RunAgentInput`` starts a run;
``{"type": "cancel", "runId": "..."}`` cancels one; ``{"type": "capabilities"}`` asks for the
served agent's capabilities, answered by one ``{"capabilities": {...}}`` line
(``transports/capabilities.py``: the agent's own, with the stdio transport); a ``threads``
message (:class:`~transports.envelope.ThreadsMessage`: list, get, rename, delete) is answered
as on a WebSocket, by one ``{"queryId", "result"}`` (or error) line (``transports/thread_api.py``;
the one client may touch every thread). Out: one JSON object per
line on stdout, of three recognisable shapes:

* a bare AG-UI event (it has ``"type"``) -- it belongs to the only run in flight;
* ``{"id": "<runId>:<seq>", "event": {...}}`` -- an event of a run that is (or
  was) in flight together with another one: as soon as a second run starts,
  every run in flight is *tagged* and stays tagged until it ends, so a reader
  can always tell runs apart;
* ``{"error": {"code", "message"}, "line": n}`` (plus ``"runId"`` when the
  error belongs to a run) -- a line that could not be served (malformed JSON,
  not a RunAgentInput, duplicate run id, over the size limit). The server keeps
  serving.

Logs go to stderr only (stdout carries nothing but protocol lines). At the end
of stdin the runs in flight finish (they are not cancelled), then the server
exits with status 0.

Runs go through the same :class:`~transports.runs.RunRegistry` as the network
transports (verification, event log, cancellation). Backpressure: stdout is a
pipe; each batch of ready events is one blocking write, so a slow reader stalls
the server (the pipe is the buffer) and nothing is queued without bound.

Stdin is read by a daemon thread (``readline`` on a regular file or a pipe,
both of which the event loop's selector cannot always watch); the thread
hands complete lines to the loop and never blocks interpreter exit. At most
STDIN_MAX_PENDING_LINES lines wait for the loop: beyond that the thread stops
reading, so a writer flooding stdin is held back by the pipe, not by our memory.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from typing import IO, Any

from agui_engine.protocol.agent import Agent, AgentFunction, as_agent
from agui_engine.protocol.errors import AguiEngineError, LimitExceededError, UsageError

from .capabilities import STDIO_TRANSPORT, served_capabilities
from .envelope import (
    READ_CHUNK_BYTES,
    CancelMessage,
    EventLines,
    ThreadsMessage,
    capabilities_line,
    decode_client_message,
    error_line,
    message_run_id,
    query_result_line,
)
from .eventlog import CursorExpiredError, EventLog, UnknownRunError
from .input_decoding import decode_json_input, decode_run_input
from .input_errors import InvalidInputError
from .registry_options import RegistryOptions
from .runs import RunRegistry
from .server_options import ConnectionOptions
from .subscription import Subscription
from .thread_api import answer_threads_message

__all__ = ["STDIN_MAX_PENDING_LINES", "serve_stdio"]

_log = logging.getLogger("agui_engine.transports")

#: Lines read from stdin that may wait for the event loop at once; when that many
#: are pending the reader thread blocks, so a writer flooding stdin is held back
#: by the pipe (backpressure) instead of growing our memory. Read-ahead only has
#: to hide one readline's latency; 4 does that while the worst case stays
#: 4 x max_input_bytes (32 MiB at DEFAULT_MAX_BODY_BYTES).
STDIN_MAX_PENDING_LINES = 4

_EOF = object()


def _reader_thread(
    stream: IO[bytes],
    loop: asyncio.AbstractEventLoop,
    queue: asyncio.Queue[Any],
    limit: int,
    slots: threading.Semaphore,
    stop: threading.Event,
) -> None:
    # ``slots`` counts free places among the STDIN_MAX_PENDING_LINES; the loop
    # gives one back per line it takes. ``stop``: serve_stdio has returned.
    try:
        while True:
            line: bytes | None = stream.readline(limit + 1)
            if not line:
                break
            if len(line) > limit and not line.endswith(b"\n"):
                # Over the limit: skip the rest of this line, report it as one error.
                while True:
                    rest = stream.readline(READ_CHUNK_BYTES)
                    if not rest or rest.endswith(b"\n"):
                        break
                line = None
            slots.acquire()  # blocks while the loop is behind: backpressure onto stdin's writer
            if stop.is_set():
                return
            loop.call_soon_threadsafe(queue.put_nowait, line)
    except (OSError, ValueError) as exc:  # stdin closed under us
        _log.debug("stdin reader stopped: %s", exc)
    except RuntimeError:  # the event loop is closed: nobody is listening any more
        return
    try:
        loop.call_soon_threadsafe(queue.put_nowait, _EOF)
    except RuntimeError:
        pass


class _StdioServer:
    def __init__(self, registry: RunRegistry, out: IO[bytes], queue: asyncio.Queue[Any]) -> None:
        self.registry = registry
        self.out = out
        self.queue = queue
        self.in_flight: dict[str, bool] = {}  # run id -> tagged
        self.pumps: set[asyncio.Task[None]] = set()
        #: stdout was closed by its reader (``serve --transport stdio | head``): nobody listens any more
        self.closed = False

    def write(self, data: bytes) -> None:
        """Write to stdout. When its reader went away, cancel every run (nobody will
        read them; the model must stop spending) and end serving as at the end of stdin."""
        if self.closed:
            return
        try:
            self.out.write(data)
            self.out.flush()
        except (BrokenPipeError, ConnectionResetError, ValueError):  # ValueError: the file was closed
            self.closed = True
            _log.info("stdout was closed: cancelling %d run(s) and stopping", len(self.in_flight))
            for run_id in list(self.in_flight):
                try:
                    self.registry.cancel_nowait(run_id, code="disconnected", message="stdout was closed")
                except AguiEngineError:  # it finished meanwhile
                    pass
            self.queue.put_nowait(_EOF)

    def error(self, exc: AguiEngineError, line_no: int, run_id: str | None = None) -> None:
        self.write(error_line(exc, run_id, status=False, line=line_no) + b"\n")

    async def handle(self, line: bytes | None, line_no: int, max_bytes: int) -> None:
        if line is None:
            self.error(LimitExceededError(f"line {line_no} is longer than {max_bytes} bytes"), line_no)
            return
        if not line.strip():
            return
        try:
            doc = decode_json_input(line, where=f"line {line_no}")
            if not isinstance(doc, dict):
                # JSON, but not an object: invalid input (decode_run_input would
                # take a JSON string for JSON text and call it malformed).
                raise InvalidInputError(f"line {line_no} is JSON but not an object (a RunAgentInput or a cancel) - at `$`")
        except AguiEngineError as exc:
            self.error(exc, line_no)
            return
        if doc.get("type") == "capabilities":
            try:
                decode_client_message(line)  # the WebSocket protocol's CapabilitiesMessage: no other member
            except AguiEngineError as exc:
                self.error(exc, line_no)
                return
            # in a task of its own (a remote agent's are asked upstream); the end of stdin waits for it
            task = asyncio.get_running_loop().create_task(self.answer_capabilities(line_no))
            self.pumps.add(task)
            task.add_done_callback(self.pumps.discard)
            return
        if doc.get("type") == "threads":
            try:
                message = decode_client_message(line)  # the WebSocket protocol's ThreadsMessage
                assert isinstance(message, ThreadsMessage)  # "type" is "threads"
            except AguiEngineError as exc:
                self.error(exc, line_no)
                return
            task = asyncio.get_running_loop().create_task(self.answer_threads(message, line_no))
            self.pumps.add(task)
            task.add_done_callback(self.pumps.discard)
            return
        if doc.get("type") == "cancel":
            try:
                message = decode_client_message(line)  # the WebSocket protocol's CancelMessage
                assert isinstance(message, CancelMessage)  # "type" is "cancel"
                self.registry.cancel_nowait(message.run_id)  # the pump sends the RUN_ERROR; do not block this loop
            except AguiEngineError as exc:
                self.error(exc, line_no, message_run_id(line))
            return
        try:
            input = decode_run_input(doc, max_bytes=max_bytes)
            run = await self.registry.start(input)
        except AguiEngineError as exc:
            rid = doc.get("runId") if isinstance(doc.get("runId"), str) else None
            self.error(exc, line_no, rid)
            return
        if self.in_flight:
            for rid in self.in_flight:
                self.in_flight[rid] = True
        self.in_flight[run.run_id] = bool(self.in_flight)
        task = asyncio.get_running_loop().create_task(self.pump(self.registry.subscribe(run)))
        self.pumps.add(task)
        task.add_done_callback(self.pumps.discard)

    async def answer_capabilities(self, line_no: int) -> None:
        try:
            document = await served_capabilities(self.registry.agent, STDIO_TRANSPORT)
        except AguiEngineError as exc:
            self.error(exc, line_no)
            return
        self.write(capabilities_line(document) + b"\n")

    async def answer_threads(self, message: ThreadsMessage, line_no: int) -> None:
        # stdio's one client is no network caller: it may touch every thread (thread_api)
        try:
            answer = await answer_threads_message(self.registry, message, None)
        except AguiEngineError as exc:
            self.write(error_line(exc, status=False, line=line_no, query_id=message.query_id) + b"\n")
            return
        self.write(query_result_line(message.query_id, answer) + b"\n")

    async def pump(self, sub: Subscription) -> None:
        rid = sub.run.run_id
        lines = EventLines(rid)
        async with sub:
            while not sub.done and not self.closed:
                try:
                    sl = await sub.next()
                except (CursorExpiredError, UnknownRunError) as exc:
                    # Lapped by the producer (a slow stdout reader), or the log is
                    # gone: the run ends on this pipe with its error line.
                    self.error(exc, 0, rid)
                    break
                if sl is None or not sl.payloads:
                    continue
                if self.in_flight.get(rid):
                    data = b"\n".join(lines(sl.first_seq, sl.payloads)) + b"\n"
                else:
                    data = b"\n".join(sl.payloads) + b"\n"
                self.write(data)
        self.in_flight.pop(rid, None)


async def serve_stdio(
    agent: Agent | AgentFunction | None = None,
    *,
    registry: RunRegistry | None = None,
    options: RegistryOptions | None = None,
    log: EventLog | None = None,
    connection: ConnectionOptions | None = None,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
) -> int:
    """Serve runs over stdin/stdout until the end of stdin; return the exit status (0).

    ``registry``, or ``options`` and ``log`` to build one, as for the network servers.
    ``connection``: the :class:`~transports.server_options.ConnectionOptions` the network
    servers take; stdio reads its ``max_input_bytes`` (the longest line). Raises UsageError
    when neither ``agent`` nor ``registry`` is given.
    """
    max_input_bytes = (connection or ConnectionOptions()).max_input_bytes
    if registry is None:
        if agent is None:
            raise UsageError("serve_stdio needs an agent or a registry")
        # No subscriber ever leaves a stdio run early, so the grace period never applies.
        registry = RunRegistry(as_agent(agent, where="serve_stdio(agent)"), options=options, log=log)
    loop = asyncio.get_running_loop()
    # Bounded by the reader thread's ``slots``, not by the queue itself (the thread
    # cannot await), so the queue never holds more than STDIN_MAX_PENDING_LINES + EOF.
    queue: asyncio.Queue[Any] = asyncio.Queue()
    slots = threading.Semaphore(STDIN_MAX_PENDING_LINES)
    stop = threading.Event()
    # Our own reader over fd 0, not sys.stdin.buffer: when stdout's reader goes away the
    # server ends while the reader thread may still block in readline(), and interpreter
    # shutdown must not wait for (or abort on) the lock of a standard stream it finalizes.
    source = stdin if stdin is not None else open(sys.stdin.fileno(), "rb", closefd=False)  # noqa: SIM115
    server = _StdioServer(registry, stdout if stdout is not None else sys.stdout.buffer, queue)
    threading.Thread(
        target=_reader_thread,
        args=(source, loop, queue, max_input_bytes, slots, stop),
        name="agui-stdin",
        daemon=True,
    ).start()
    line_no = 0
    try:
        while True:
            line = await queue.get()
            if line is _EOF:
                break
            slots.release()
            line_no += 1
            await server.handle(line, line_no, max_input_bytes)
            await asyncio.sleep(0)  # let the runs just started stream before the next line is read
    finally:
        stop.set()
        slots.release()  # wake a reader blocked on a full queue so it sees ``stop``
    # End of input: let the runs in flight finish, then exit cleanly.
    if server.pumps:
        await asyncio.gather(*list(server.pumps), return_exceptions=True)
    return 0
