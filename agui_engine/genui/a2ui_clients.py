"""Surfaces each client can draw: which A2UI form a run's client gets (pure).

Theory of operation
-------------------
The engine streams an A2UI surface as one ``ACTIVITY_SNAPSHOT`` and then ``ACTIVITY_DELTA``
patches, component by component (``spec/a2ui.md``). Not every client applies the deltas:
assistant-ui's AG-UI runtime (``@assistant-ui/react-ag-ui`` 0.0.58) turns each ``a2ui-surface``
snapshot into a generative-UI part and has no ``ACTIVITY_DELTA`` handler, so it needs the
progress as whole snapshots (*snapshot mode*). Its converter
(``@assistant-ui/react-generative-ui`` 0.0.16, ``convertSurfaceToUISpec``) also reads an older
shape of some components than A2UI v0.9/v1.0 writes: it follows only a ``children`` list (not
the single ``child`` of a ``Card`` or ``Button``) and a button's ``action.name`` /
``action.context`` (not v0.9's ``action.event``), so a v0.9 booking form draws as an empty card
with no button.

A loop's choice (``a2ui_snapshots=``, ``serve --a2ui-snapshots``, an agent table's
``a2ui_snapshots``) is ``True``, ``False`` or ``"auto"`` (the default):
:func:`a2ui_snapshots_option` checks it, :func:`run_wants_snapshots` resolves it for one run.
``"auto"`` gives snapshots to a run from assistant-ui's runtime, recognised by
:func:`from_assistant_ui`. Nothing that runtime sends declares what it draws (no header beyond
``@ag-ui/client`` 0.0.59's ``Content-Type``/``Accept``, no ``protocolVersion``, no capability,
``forwardedProps`` holds the page's own model-context settings); what tells it apart is its run
id, made by ``@assistant-ui/core``'s ``generateId`` (nanoid's ``customAlphabet`` of the 62 ASCII
letters and digits, 7 characters) for every run it starts, where ``@ag-ui/client`` and
CopilotKit use UUIDs and this engine 32 hex digits. A run so recognised also gets each
component with the aliases that converter reads (:func:`whole_surface_component`), beside the
standard keys, so the same surface draws in both kinds of renderer.

``"auto"`` also gives snapshots to a run from a CopilotKit page whose A2UI renderer is on
(:func:`from_copilotkit_a2ui`: its ``A2UICatalogContext`` puts
:data:`COPILOTKIT_A2UI_CONTEXT_DESCRIPTION` into ``RunAgentInput.context``). Such a page may sit
behind CopilotKit's runtime with a bare ``a2ui: {}`` switch, whose ``@ag-ui/a2ui-middleware``
injects no tool (so the run cannot show it) yet paints this engine's own ``render_a2ui`` calls on
the same ``a2ui-surface-<call id>`` activity with whole ``replace`` snapshots (its ``building``
progress among them): a delta of this engine would then land on the middleware's content and fail.
With whole snapshots on both sides nothing is patched, and the activity ends with the same
content (the differential's final content). A CopilotKit page straight at the gateway draws
snapshots as well (only more bytes).

A client that is not recognised and does not apply deltas is given snapshots by the explicit
choice; a client recognised wrongly gets snapshots, which every AG-UI client applies (a few
times more bytes: ``spec/a2ui.md``).
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

from ..protocol.errors import UsageError
from ..protocol.events import RunAgentInput

__all__ = [
    "A2UISnapshots",
    "ASSISTANT_UI_RUN_ID",
    "COPILOTKIT_A2UI_CONTEXT_DESCRIPTION",
    "a2ui_snapshots_option",
    "from_assistant_ui",
    "from_copilotkit_a2ui",
    "run_wants_snapshots",
    "whole_surface_component",
]

#: A loop's snapshot-mode choice: always, never, or per run's client (``"auto"``).
A2UISnapshots = bool | Literal["auto"]

#: The run ids ``@assistant-ui/core``'s ``generateId`` makes (``customAlphabet`` of ``0-9A-Za-z``, 7).
ASSISTANT_UI_RUN_ID: Final = re.compile(r"[0-9A-Za-z]{7}")

#: The context entry CopilotKit's page adds to every run while its A2UI renderer is on
#: (``@copilotkit/react-core`` 1.74 ``A2UICatalogContext``, byte for byte).
COPILOTKIT_A2UI_CONTEXT_DESCRIPTION: Final = ("A2UI catalog capabilities: available catalog IDs and custom "
                                              "component definitions the client can render.")


def a2ui_snapshots_option(value: object, where: str) -> A2UISnapshots:
    """A loop's ``a2ui_snapshots=`` argument: ``True``, ``False`` or ``"auto"``; UsageError naming
    ``where`` for anything else."""
    if value is True or value is False or value == "auto":
        return value
    raise UsageError(f"{where}: a2ui_snapshots must be True, False or 'auto', got {value!r}")


def from_assistant_ui(run_input: RunAgentInput) -> bool:
    """Whether ``run_input`` comes from assistant-ui's AG-UI runtime: its run id is one
    ``@assistant-ui/core``'s ``generateId`` makes (:data:`ASSISTANT_UI_RUN_ID`)."""
    return ASSISTANT_UI_RUN_ID.fullmatch(run_input.run_id) is not None


def from_copilotkit_a2ui(run_input: RunAgentInput) -> bool:
    """Whether ``run_input`` comes from a CopilotKit page with its A2UI renderer on: its context
    holds :data:`COPILOTKIT_A2UI_CONTEXT_DESCRIPTION`."""
    return any(entry.description == COPILOTKIT_A2UI_CONTEXT_DESCRIPTION for entry in run_input.context)


def run_wants_snapshots(run_input: RunAgentInput, choice: A2UISnapshots) -> bool:
    """Whether this run's surfaces go as whole snapshots: ``choice`` when it is a bool, else
    (``"auto"``) when the run comes from a client that does not apply ``ACTIVITY_DELTA``
    (assistant-ui) or from a CopilotKit A2UI page, which a bare runtime A2UI middleware may paint
    for too (the module docstring)."""
    if choice == "auto":
        return from_assistant_ui(run_input) or from_copilotkit_a2ui(run_input)
    return bool(choice)


def whole_surface_component(component: Any) -> Any:
    """``component`` with the aliases assistant-ui's converter reads, beside the A2UI keys it
    has: ``children: [child]`` for a single ``child`` (when it has no ``children``), and a
    button action's ``name`` / ``context`` copied up from its ``event``. Anything else is
    returned as it is (the same object when nothing applies)."""
    if not isinstance(component, dict):
        return component
    out = component
    child = component.get("child")
    if isinstance(child, str) and "children" not in component:
        out = {**out, "children": [child]}
    action = component.get("action")
    event = action.get("event") if isinstance(action, dict) else None
    if isinstance(action, dict) and isinstance(event, dict) and "name" not in action and isinstance(
            event.get("name"), str):
        lifted = {**action, "name": event["name"]}
        if "context" in event and "context" not in action:
            lifted["context"] = event["context"]
        out = {**out, "action": lifted}
    return out
