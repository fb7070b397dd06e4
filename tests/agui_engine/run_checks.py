"""What every whole run of this engine must pass: the verifier, ag-ui-validate and the accumulator."""

from __future__ import annotations

from typing import Any

from ag_ui_validate import ValidatorOptions, create_validator

from agui_engine.genui.component_stream import COMPONENT_HANDLERS
from agui_engine.protocol.accumulator import Accumulator
from agui_engine.protocol.codec import encode_event
from agui_engine.protocol.events import RunAgentInput, ToolCallArgsEvent
from agui_engine.protocol.verify import Verifier

#: ag-ui-validate findings every run of this engine may produce (spec/decision.md):
#: AGUI902 -- no timestamps (the core has no clock; a transport may stamp events);
#: AGUI208 -- a tool call's parentMessageId names the step's assistant message, which no
#: TEXT_MESSAGE_START has announced when the step has no text or its text comes after the
#: call (clients create it on demand; a later TEXT_MESSAGE_START with that id reuses it).
ACCEPTED_FINDINGS = {"AGUI902", "AGUI208"}


def check_run(events: list[Any], acc: Accumulator | None = None, input_: RunAgentInput | None = None) -> Accumulator:
    """The run passes the verifier, ag-ui-validate (accepted findings only) and accumulates cleanly
    (into ``acc``: a client's accumulator that may already know its interactables)."""
    verifier = Verifier(input=input_)
    validator = create_validator(ValidatorOptions())
    acc = Accumulator(custom_handlers=COMPONENT_HANDLERS) if acc is None else acc
    for event in events:
        verifier.feed(event)
        validator.feed(encode_event(event).decode())
        acc.apply(event)
    verifier.close()
    validator.finalize()
    findings = {d.rule for d in validator.report().diagnostics}
    assert findings <= ACCEPTED_FINDINGS, validator.report().diagnostics
    assert acc.problems == []
    # standard parameters never reach the wire's tool arguments (they travel as status events)
    assert not any("_tambo_" in e.delta for e in events if isinstance(e, ToolCallArgsEvent))
    return acc
