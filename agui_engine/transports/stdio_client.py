"""AG-UI over stdio (NDJSON), the client: :class:`StdioAgent` runs an AG-UI stdio server
(:mod:`~transports.stdio_server`, ``agui-engine serve --transport stdio``) as a subprocess
and serves it as an :class:`~agui_engine.protocol.agent.Agent`: the input goes in as one line,
the run's events come out one line each (:mod:`~transports.envelope`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
from collections.abc import AsyncIterator, Sequence

import msgspec

from agui_engine.loops.tool_runner import ToolRunner
from agui_engine.protocol.capabilities import AgentCapabilities
from agui_engine.protocol.codec import LegacyThinkingMapper
from agui_engine.protocol.errors import AguiEngineError, LimitExceededError, UsageError
from agui_engine.protocol.events import Event, RunAgentInput

from .capabilities import CAPABILITIES_TIMEOUT_SECONDS, MAX_CAPABILITIES_BYTES, capabilities_answer
from .data import query_answer
from .envelope import (
    READ_CHUNK_BYTES,
    CancelMessage,
    CapabilitiesMessage,
    ThreadsMessage,
    decode_protocol_line,
    encode_client_message,
)
from .input_decoding import DEFAULT_MAX_BODY_BYTES
from .retrying_client import TERMINAL_EVENTS, ConnectionLostError, end_or_raise, remote_error_from_line
from .thread_messages import MAX_THREADS_ANSWER_BYTES, ThreadsByMessage
from .tool_runner import STANDARD_TOOL_RUNNER

__all__ = ["STDIO_EXIT_TIMEOUT", "StdioAgent"]

_log = logging.getLogger("agui_engine.transports")

#: How long StdioAgent waits for the subprocess to exit after its run ended (or
#: after a cancel) before it kills it. The server exits as soon as stdin closes
#: and its runs are done, so this only matters for a stuck child.
STDIO_EXIT_TIMEOUT = 5.0


class StdioAgent(ThreadsByMessage):
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

    async def ask_threads(self, message: ThreadsMessage, timeout: float) -> bytes:
        """The answer to a ``threads`` message: the command run once, the message its one
        line, its stdin closed at once (:class:`~transports.thread_messages.ThreadsByMessage`:
        ``list_threads``, ``history`` -- so ``Thread.restore`` -- ``rename_thread``,
        ``delete_thread``). The stdio server's one client may touch every thread its store
        keeps (a durable store: ``serve --transport stdio`` keeps them in its default SQLite
        file, so they outlive each run's process). Raises RemoteAgentError for the server's
        refusal (404 ``unknown_thread``, 400, 404 ``threads_not_listed``), ConnectionLostError
        (the process exits without an answer, or none within ``timeout`` seconds: it is
        killed), LimitExceededError (a line over MAX_THREADS_ANSWER_BYTES)."""
        where = f"the stdio agent {self.argv[0]!r}"
        proc = await self._spawn(MAX_THREADS_ANSWER_BYTES + 1)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            async with asyncio.timeout(timeout):
                proc.stdin.write(encode_client_message(message) + b"\n")
                await proc.stdin.drain()
                proc.stdin.close()
                while True:
                    try:
                        line = await proc.stdout.readline()
                    except ValueError:  # asyncio's limit
                        raise LimitExceededError(
                            f"{where}: an output line is over {MAX_THREADS_ANSWER_BYTES} bytes (MAX_THREADS_ANSWER_BYTES)"
                        ) from None
                    if not line:
                        raise ConnectionLostError(f"{where} exited without answering threads {message.action}")
                    if line.strip():
                        answer = query_answer(line, message.query_id, where)
                        if answer is not None:
                            return answer
        except TimeoutError:
            raise ConnectionLostError(f"{where} did not answer threads {message.action} within {timeout:g} s") from None
        except (ConnectionError, RuntimeError) as exc:  # the pipe broke before the message went in
            raise ConnectionLostError(
                f"{where} exited before taking the threads message ({type(exc).__name__})"
            ) from None
        finally:
            await self._stop(proc, "", cancel=False)

    def _where(self) -> str:
        return f"the stdio agent {self.argv[0]!r}"

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
