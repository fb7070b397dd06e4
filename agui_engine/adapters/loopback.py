"""Any in-process model as an OpenAI-compatible endpoint on loopback: what an agent
framework (a LangGraph graph's ``ChatOpenAI``, a CrewAI ``LLM``) points its ``base_url`` at
to run offline, against a :class:`~agui_engine.demo.scripted.ScriptedModel` or the embedded
demo model.

Theory of operation
-------------------
:func:`serve_openai_compatible` starts the server the demo's ``--model-path openai`` uses
(:class:`~agui_engine.adapters.replay.ReplayServer`'s model route: the request is read back
into AG-UI messages, the model's items are written as Chat Completions SSE) on its own event
loop in a daemon thread, so it can be started anywhere -- at the import of an example
module, before ``agui-engine serve`` runs its loop, in a synchronous script -- and a
framework calling it from any thread or loop reaches it. It records no requests (a
long-running server keeps nothing per request). The handle's :attr:`ModelEndpoint.base_url`
ends in ``/v1``, as OpenAI clients expect; any API key is accepted and the model name of the
request is echoed. Only streamed requests are served (``"stream": true``; set
``streaming=True`` on ``ChatOpenAI``, ``stream=True`` on a CrewAI ``LLM``), the format every
adapter of this project reads.

Inside a running event loop, :func:`~agui_engine.adapters.replay.serve_over_openai_chat` is the
async form (and hands back an :class:`~agui_engine.adapters.openai_chat.OpenAIChatClient`).
The server listens on 127.0.0.1 and an ephemeral port unless told otherwise. Raises
:class:`OSError` when it cannot listen, :class:`TimeoutError` when it does not start within
:data:`LOOPBACK_START_TIMEOUT_SECONDS`, and :class:`~agui_engine.protocol.errors.UsageError`
for a model without ``complete()``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Final

from agui_engine.llm import LLMClient
from agui_engine.protocol.errors import UsageError

from .replay import ReplayServer

__all__ = ["LOOPBACK_START_TIMEOUT_SECONDS", "ModelEndpoint", "serve_openai_compatible"]

#: How long :func:`serve_openai_compatible` waits for its server to listen. Binding a loopback
#: port takes milliseconds; 30 s is for a machine loaded with imports of agent frameworks.
LOOPBACK_START_TIMEOUT_SECONDS: Final = 30.0


class ModelEndpoint:
    """A model served over loopback HTTP by :func:`serve_openai_compatible`: ``base_url``
    (``http://127.0.0.1:<port>/.../v1``) and :meth:`close`. Usable as a context manager."""

    def __init__(self, base_url: str, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self.base_url = base_url
        self._loop = loop
        self._thread = thread

    def close(self) -> None:
        """Stop the server and its thread (idempotent)."""
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not threading.current_thread():
            self._thread.join(LOOPBACK_START_TIMEOUT_SECONDS)

    def __enter__(self) -> ModelEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ModelEndpoint({self.base_url!r})"


def serve_openai_compatible(model: LLMClient, *, host: str = "127.0.0.1", port: int = 0) -> ModelEndpoint:
    """Serve ``model`` as an OpenAI Chat Completions endpoint on ``host:port`` (0: a free
    port) from a daemon thread; returns the endpoint once it listens (see the module docstring)."""
    if not callable(getattr(model, "complete", None)):
        raise UsageError(f"serve_openai_compatible needs an LLMClient (a complete() method), got {type(model).__name__}")
    loop = asyncio.new_event_loop()
    started = threading.Event()
    result: dict[str, object] = {}

    def main() -> None:
        asyncio.set_event_loop(loop)
        server = ReplayServer(host=host, port=port, record=False)
        try:
            loop.run_until_complete(server.start())
            result["url"] = server.serve_model(model)
        except BaseException as exc:  # noqa: BLE001 - handed to the starting thread
            result["error"] = exc
            started.set()
            loop.close()
            return
        started.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(server.close())
            loop.close()

    thread = threading.Thread(target=main, name="agui-engine-model-endpoint", daemon=True)
    thread.start()
    if not started.wait(LOOPBACK_START_TIMEOUT_SECONDS):
        raise TimeoutError(f"the model endpoint did not start within {LOOPBACK_START_TIMEOUT_SECONDS:g} s")
    error = result.get("error")
    if isinstance(error, BaseException):
        raise error
    return ModelEndpoint(str(result["url"]), loop, thread)
