"""agui-engine: a streaming engine for the AG-UI event protocol.

The names a user needs to start: the events and the run's input, the agent contract
(``Agent``), the agents (``LLMAgent``, ``AgentLoop``, ``Thread``), the verifier, the
accumulator, the event writer, the JSON-to-patch tokenizer, the codecs and the error bases.
Everything else is in its subpackage's ``__all__``:

* :mod:`agui_engine.protocol` -- events, codecs (JSON, SSE, NDJSON, protobuf), verifier, writer,
  accumulator, compaction, capabilities, the error tree.
* :mod:`agui_engine.genui` -- components, interactables, the UI spec tree, A2UI, resources, MCP Apps.
* :mod:`agui_engine.loops` -- the decision loop, ``LLMAgent``, ``AgentLoop``, ``Thread``, tool runners.
* :mod:`agui_engine.llm` -- the model contract; :mod:`agui_engine.demo` -- the scripted models.
* :mod:`agui_engine.adapters`, :mod:`agui_engine.transports` -- providers and frameworks; servers and clients.

The core does no IO. This file is the list of the front door's names: the imports below are the
table, ``__all__`` repeats them (ruff holds the two equal, ``tests/agui_engine/test_package.py``
holds them equal and the list small). See ``spec/`` for the protocol as implemented.
"""

from __future__ import annotations

from .genui.components import Component
from .jsonstream import PatchStream
from .loops.agent_loop import AgentLoop
from .loops.llm_agent import LLMAgent
from .loops.thread import Thread
from .protocol.accumulator import Accumulator
from .protocol.agent import Agent
from .protocol.codec import (
    EventDecodeError,
    NDJSONDecoder,
    SSEDecoder,
    decode_event,
    encode_event,
    encode_ndjson,
    encode_sse,
)
from .protocol.errors import AguiEngineError, LimitExceededError, UpstreamError, UsageError
from .protocol.events import (
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    AssistantMessage,
    BaseEvent,
    Context,
    CustomEvent,
    DeveloperMessage,
    Event,
    EventType,
    FunctionCall,
    Message,
    MessagesSnapshotEvent,
    RawEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SystemMessage,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    Tool,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from .protocol.verify import ProtocolViolation, Verifier, verify_events
from .protocol.writer import EventWriter

__version__ = "0.1.0"

__all__ = [
    "Accumulator", "ActivityDeltaEvent", "ActivitySnapshotEvent", "Agent", "AgentLoop", "AguiEngineError",
    "AssistantMessage", "BaseEvent", "Component", "Context", "CustomEvent", "DeveloperMessage", "Event",
    "EventDecodeError", "EventType", "EventWriter", "FunctionCall", "LLMAgent", "LimitExceededError", "Message",
    "MessagesSnapshotEvent", "NDJSONDecoder", "PatchStream", "ProtocolViolation", "RawEvent", "RunAgentInput",
    "RunErrorEvent", "RunFinishedEvent", "RunStartedEvent", "SSEDecoder", "StateDeltaEvent", "StateSnapshotEvent",
    "StepFinishedEvent", "StepStartedEvent", "SystemMessage", "TextMessageChunkEvent", "TextMessageContentEvent",
    "TextMessageEndEvent", "TextMessageStartEvent", "Thread", "Tool", "ToolCall", "ToolCallArgsEvent",
    "ToolCallChunkEvent", "ToolCallEndEvent", "ToolCallResultEvent", "ToolCallStartEvent", "ToolMessage",
    "UpstreamError", "UsageError", "UserMessage", "Verifier", "__version__", "decode_event", "encode_event",
    "encode_ndjson", "encode_sse", "verify_events",
]
