"""A2UI in the loops: any agent's run, with ``render_a2ui`` offered and its calls drawn as surfaces.

:func:`a2ui_events` is what ``LLMAgent(a2ui=...)`` and ``AgentLoop(a2ui=...)`` (so LangGraph,
CrewAI and remote agents too) do with a run, and :class:`A2UIAgent` the same around any
:class:`~agui_engine.protocol.agent.Agent`, the way ``@ag-ui/a2ui-middleware`` wraps one: the
input gets the tool, the catalog and the usage guide (and a user action from
``forwardedProps`` as a ``log_a2ui_event`` call and result,
:func:`~agui_engine.genui.a2ui.prepare_a2ui_run`), and the agent's events go through an
:class:`~agui_engine.genui.a2ui.A2UITransformer` (the ``a2ui-surface`` activities, the tool
results of unanswered surface calls, a refusal telling the model what to fix). A call of the
tool by any agent inside -- the model's, a framework's own -- is recognised by its name; a tool
result holding ``{"a2ui_operations": [...]}`` is drawn too.

A2UI is applied once: a run that shows a client-side A2UI middleware at work (its ``render_a2ui`` in
``RunAgentInput.tools``, or ``forwardedProps.injectA2UITool``:
:func:`~agui_engine.genui.a2ui.a2ui_client_applies`) goes to the agent as it came, and the middleware
draws the surfaces; the first such run of the process says so in the log (INFO, once).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import cast

from ..genui.a2ui import A2UI_TOOL, A2UICatalog, a2ui_catalog_option, a2ui_client_applies, prepare_a2ui_run
from ..genui.a2ui_clients import A2UISnapshots, a2ui_snapshots_option
from ..genui.resources import ResourceRegistry
from ..protocol.agent import Agent, AgentFunction, as_agent
from ..protocol.events import Event, RunAgentInput
from ..protocol.ids import IdFactory, new_id

__all__ = ["A2UIAgent", "a2ui_events"]

_log = logging.getLogger(__name__)
_said: set[str] = set()  # what was logged once already in this process (per surface tool name)


def _say_once(key: str, message: str) -> None:
    if key not in _said:
        _said.add(key)
        _log.info(message)


async def a2ui_events(run: Callable[[RunAgentInput], AsyncIterator[Event]], input: RunAgentInput,
                      catalog: A2UICatalog, *, tool_name: str = A2UI_TOOL,
                      ids: IdFactory = new_id, resources: ResourceRegistry | None = None,
                      snapshots: A2UISnapshots = False) -> AsyncIterator[Event]:
    """``run(input)`` with A2UI (see the module docstring); ``resources``: the server's registry
    (``$resource`` data bindings offered and checked when it is not empty); ``snapshots``: surfaces
    progress as whole snapshots, not deltas (clients without ``ACTIVITY_DELTA``; ``"auto"``: for such a client,
    ``spec/a2ui.md``). Raises, before the first event,
    :class:`~agui_engine.genui.a2ui.A2UIActionError` / ``A2UICatalogError`` for a bad user
    action or front-end catalog, and whatever ``run`` raises before its first event."""
    transformer = None
    if a2ui_client_applies(input, tool_name):
        _say_once(f"client-a2ui:{tool_name}", f"A2UI: a client-side A2UI middleware is active (its {tool_name} tool "
                                              "is in the run's tools): this gateway leaves A2UI to it and does not "
                                              "apply A2UI itself (logged once)")
        stream = run(input)
    else:
        inner_input, transformer = prepare_a2ui_run(input, catalog, tool_name=tool_name, ids=ids, resources=resources,
                                                    snapshots=snapshots)
        stream = run(inner_input)
    try:
        async for event in stream:
            if transformer is None:  # the client's middleware applies A2UI
                yield event
                continue
            for out in transformer.feed(event):
                yield cast(Event, out)
        for out in transformer.close() if transformer is not None else ():
            yield cast(Event, out)
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


class A2UIAgent:
    """An agent with A2UI: ``A2UIAgent(agent, a2ui=True, *, tool_name="render_a2ui", id_factory=new_id,
    snapshots="auto")`` (``snapshots``: progress as whole snapshots, for clients without ``ACTIVITY_DELTA``:
    ``True``, ``False``, or ``"auto"`` for the runs of such a client, ``spec/a2ui.md``).

    ``a2ui``: an :class:`~agui_engine.genui.a2ui.A2UICatalog` or ``True`` (the basic catalog).
    Raises :class:`~agui_engine.protocol.errors.UsageError` for an ``agent`` that is not one or a
    bad ``a2ui``."""

    __slots__ = ("agent", "catalog", "id_factory", "snapshots", "tool_name")

    def __init__(self, agent: Agent | AgentFunction, a2ui: A2UICatalog | bool = True, *, tool_name: str = A2UI_TOOL,
                 id_factory: IdFactory = new_id, snapshots: A2UISnapshots = "auto") -> None:
        self.agent: Agent = as_agent(agent, where="A2UIAgent(agent)")
        catalog = a2ui_catalog_option(a2ui, "A2UIAgent")
        if catalog is None:
            catalog = A2UICatalog.basic()
        self.catalog = catalog
        self.tool_name = tool_name
        self.id_factory = id_factory
        self.snapshots = a2ui_snapshots_option(snapshots, "A2UIAgent")

    def run(self, input: RunAgentInput) -> AsyncIterator[Event]:
        """The agent's run with A2UI (see :func:`a2ui_events`)."""
        return a2ui_events(self.agent.run, input, self.catalog, tool_name=self.tool_name, ids=self.id_factory,
                           snapshots=self.snapshots)
