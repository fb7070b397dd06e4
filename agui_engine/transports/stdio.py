"""AG-UI over stdio (NDJSON): the server behind ``agui-engine serve --transport
stdio`` and :class:`StdioAgent`, which runs such a server as a subprocess.

Theory of operation
-------------------
In: one JSON object per line on stdin. A ``RunAgentInput`` starts a run;
``{"type": "cancel", "runId": "..."}`` cancels one; ``{"type": "capabilities"}`` asks for the
served agent's capabilities, answered by one ``{"capabilities": {...}}`` line
(``transports/capabilities.py``: the agent's own, with the stdio transport). Out: one JSON object per
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
import os
import shlex
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from typing import IO, Any

import msgspec

from agui_engine.loops.tool_runner import ToolRunner
from agui_engine.protocol.agent import Agent, AgentFunction, as_agent
from agui_engine.protocol.capabilities import AgentCapabilities
from agui_engine.protocol.codec import LegacyThinkingMapper
from agui_engine.protocol.errors import (
    AguiEngineError,
    LimitExceededError,
    UsageError,
)
from agui_engine.protocol.events import Event, RunAgentInput

from .capabilities import (
    CAPABILITIES_TIMEOUT_SECONDS,
    MAX_CAPABILITIES_BYTES,
    STDIO_TRANSPORT,
    capabilities_answer,
    served_capabilities,
)
from .envelope import (
    CancelMessage,
    CapabilitiesMessage,
    EventLines,
    capabilities_line,
    decode_client_message,
    decode_protocol_line,
    encode_client_message,
    error_line,
    message_run_id,
)
from .eventlog import CursorExpiredError, EventLog, UnknownRunError
from .input_decoding import DEFAULT_MAX_BODY_BYTES, decode_json_input, decode_run_input
from .input_errors import InvalidInputError
from .retrying_client import TERMINAL_EVENTS, ConnectionLostError, end_or_raise, remote_error_from_line
from .runs import RegistryOptions, RunRegistry, Subscription
from .server_options import ConnectionOptions, merge_options
from .tool_runner import STANDARD_TOOL_RUNNER

__all__ = [
    "READ_CHUNK_BYTES",
    "STDIN_MAX_PENDING_LINES",
    "STDIO_EXIT_TIMEOUT",
    "StdioAgent",
    "serve_stdio",
]

_log = logging.getLogger("agui_engine.transports")

#: How long StdioAgent waits for the subprocess to exit after its run ended (or
#: after a cancel) before it kills it. The server exits as soon as stdin closes
#: and its runs are done, so this only matters for a stuck child.
STDIO_EXIT_TIMEOUT = 5.0

#: Lines read from stdin that may wait for the event loop at once; when that many
#: are pending the reader thread blocks, so a writer flooding stdin is held back
#: by the pipe (backpressure) instead of growing our memory. Read-ahead only has
#: to hide one readline's latency; 4 does that while the worst case stays
#: 4 x max_line_bytes (32 MiB at DEFAULT_MAX_BODY_BYTES).
STDIN_MAX_PENDING_LINES = 4

#: Bytes per read when skipping the rest of an over-long input line and when
#: draining a child's stdout: a typical pipe read, so skipping costs few calls
#: while no more than this is held at once.
READ_CHUNK_BYTES = 64 * 1024

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
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    max_line_bytes: int = DEFAULT_MAX_BODY_BYTES,
    options: RegistryOptions | None = None,
    log: EventLog | None = None,
    connection: ConnectionOptions | None = None,
) -> int:
    """Serve runs over stdin/stdout until the end of stdin; return the exit status (0).

    ``options`` and ``log`` build the :class:`~transports.runs.RunRegistry`.
    ``connection``: the :class:`~transports.server_options.ConnectionOptions` the
    network servers take; stdio reads its ``max_input_bytes`` (= ``max_line_bytes``;
    a setting given both ways is a UsageError). Raises UsageError when neither
    ``agent`` nor ``registry`` is given.
    """
    max_line_bytes = merge_options(
        ConnectionOptions, connection, where="serve_stdio", max_input_bytes=max_line_bytes
    ).max_input_bytes
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
        args=(source, loop, queue, max_line_bytes, slots, stop),
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
            await server.handle(line, line_no, max_line_bytes)
            await asyncio.sleep(0)  # let the runs just started stream before the next line is read
    finally:
        stop.set()
        slots.release()  # wake a reader blocked on a full queue so it sees ``stop``
    # End of input: let the runs in flight finish, then exit cleanly.
    if server.pumps:
        await asyncio.gather(*list(server.pumps), return_exceptions=True)
    return 0


# ---------------------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------------------


class StdioAgent:
    """An AG-UI stdio server run as a subprocess, as an :class:`~agui_engine.protocol.agent.Agent`.

    ``command`` is an argv list or a shell-style string (split with ``shlex``, no
    shell). Each ``run()`` starts the process, writes the input line, reads event
    lines until the terminal event, then closes stdin so the process exits.
    Closing the generator early sends ``{"type": "cancel"}`` and waits for the
    process (killing it after STDIO_EXIT_TIMEOUT). The child's stderr is passed
    through to ours (its logs). Raises, before the first event,
    ConnectionLostError (the process exited without a terminal event) or
    RemoteAgentError (it answered with an error line); after the first event such
    failures end the stream with ``RUN_ERROR`` (Agent contract).
    """

    #: The runner a :class:`~agui_engine.loops.thread.Thread` over this client runs its sync
    #: client tools with (the standard one: worker threads).
    tool_runner: ToolRunner = STANDARD_TOOL_RUNNER

    def __init__(self, command: str | Sequence[str], *, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        self.argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.argv:
            raise UsageError("StdioAgent needs a command")
        self.env = env
        self.cwd = cwd

    async def _spawn(self, line_limit: int) -> asyncio.subprocess.Process:
        """The command started with piped stdin / stdout (lines read up to ``line_limit``
        bytes), stderr passed through."""
        return await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, **self.env} if self.env is not None else None,
            cwd=self.cwd,
            limit=line_limit,
        )

    async def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        proc = await self._spawn(DEFAULT_MAX_BODY_BYTES + 1)
        assert proc.stdin is not None and proc.stdout is not None
        ended = False
        yielded = False
        where = f"the stdio agent {self.argv[0]!r}"
        legacy = LegacyThinkingMapper()
        try:
            proc.stdin.write(msgspec.json.encode(input) + b"\n")
            await proc.stdin.drain()
            line_no = 0
            while True:
                line = await proc.stdout.readline()
                line_no += 1
                if not line:
                    ended = True
                    yield end_or_raise(ConnectionLostError(f"{where} exited before the run ended"), yielded)
                    return
                if not line.strip():
                    continue
                try:
                    item = decode_protocol_line(line, where=f"{where}, output line {line_no}", legacy=legacy)
                except AguiEngineError as exc:  # a malformed line: the run is cancelled in _stop
                    yield end_or_raise(exc, yielded)
                    return
                if item.error is not None:
                    ended = True
                    yield end_or_raise(remote_error_from_line(item.error, where=where), yielded)
                    return
                event = item.event
                yielded = True
                yield event  # type: ignore[misc]
                if isinstance(event, TERMINAL_EVENTS):
                    ended = True
                    return
        finally:
            await self._stop(proc, input.run_id, cancel=not ended)

    async def capabilities(self, *, timeout: float = CAPABILITIES_TIMEOUT_SECONDS) -> AgentCapabilities:
        """The served agent's capabilities: the command run once, asked with a
        ``{"type": "capabilities"}`` line, its stdin closed at once (so it exits after
        answering). A server that does not know the message (its error line says
        ``bad_input`` or ``invalid_input``: an older server takes it for a RunAgentInput)
        declares nothing: ``AgentCapabilities()``.

        Raises ConnectionLostError when the process exits without an answer or gives none
        within ``timeout`` seconds (it is killed), RemoteAgentError for any other error line,
        LimitExceededError for a line over ``MAX_CAPABILITIES_BYTES``,
        CapabilitiesDecodeError / RemoteInputError for a line that is not an answer."""
        where = f"the stdio agent {self.argv[0]!r}"
        proc = await self._spawn(MAX_CAPABILITIES_BYTES + 1)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            async with asyncio.timeout(timeout):
                proc.stdin.write(encode_client_message(CapabilitiesMessage()) + b"\n")
                await proc.stdin.drain()
                proc.stdin.close()
                while True:
                    try:
                        line = await proc.stdout.readline()
                    except ValueError:  # asyncio's limit: the line is longer than the document may be
                        raise LimitExceededError(
                            f"{where}: an output line is over {MAX_CAPABILITIES_BYTES} bytes", code="capabilities_too_large"
                        ) from None
                    if not line:
                        raise ConnectionLostError(f"{where} exited without answering the capabilities message")
                    if line.strip():
                        answer = capabilities_answer(line, where=where)
                        if answer is not None:
                            return answer
        except TimeoutError:
            raise ConnectionLostError(f"{where} did not answer the capabilities message within {timeout:g} s") from None
        except (ConnectionError, RuntimeError) as exc:  # the pipe broke before the message went in
            raise ConnectionLostError(f"{where} exited before taking the capabilities message ({type(exc).__name__})") from None
        finally:
            await self._stop(proc, "", cancel=False)

    async def _stop(self, proc: asyncio.subprocess.Process, run_id: str, *, cancel: bool) -> None:
        assert proc.stdin is not None
        try:
            if cancel and proc.returncode is None:
                proc.stdin.write(encode_client_message(CancelMessage(run_id=run_id)) + b"\n")
                await proc.stdin.drain()
            proc.stdin.close()
        except (ConnectionError, RuntimeError):
            pass
        assert proc.stdout is not None
        stdout = proc.stdout

        async def drain_and_wait() -> None:
            # Read what the child still writes (e.g. the cancelled run's RUN_ERROR)
            # so that it never blocks on a full pipe while exiting.
            while await stdout.read(READ_CHUNK_BYTES):
                pass
            await proc.wait()

        try:
            await asyncio.wait_for(drain_and_wait(), STDIO_EXIT_TIMEOUT)
        except TimeoutError:
            _log.warning("stdio agent %r did not exit; killing it", self.argv[0])
            proc.kill()
            await proc.wait()

