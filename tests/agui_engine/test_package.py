"""The package's public API: ``agui_engine.__all__`` is the literal list below (adding or
removing a public name means editing this test), every name is the object its module
exports, and every public module has a literal, sorted ``__all__``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import agui_engine
from tests.public_api import check_every_public_name_is_in_all, check_module, check_package, public_modules

# The schema writer is a program over the library (it writes spec/schema), not part of
# it; the command line is the subpackage agui_engine.cli (not a module of this folder).
NOT_PUBLIC = {"schema"}
#: the core's layer folders (tests/test_layers.py); the CLI is not a library module
LAYER_FOLDERS = ("protocol", "genui", "loops", "demo")
MODULES = public_modules("agui_engine", NOT_PUBLIC, LAYER_FOLDERS)

EXPECTED_ALL = [
    "A2UIActionError", "A2UICatalog", "A2UICatalogError", "A2UIProblem", "A2UIResourceBinding", "A2UISurfaceStream", "A2UITransformer",
    "A2UI_ACTIVITY_TYPE", "A2UI_LOG_EVENT_TOOL", "A2UI_OPERATIONS_KEY", "A2UI_SCHEMA_CONTEXT_DESCRIPTION",
    "A2UI_TOOL", "Accumulator", "ActivityDeltaEvent", "ActivityMessage", "ActivitySnapshotEvent", "AddOperation",
    "Agent", "AgentCapabilities", "AgentFunction", "AgentLoop", "AguiEngineError", "AnyEvent", "AppServer",
    "AppToolResult", "AssistantMessage", "AudioInputContent", "AudioPart", "BASIC_CATALOG_ID", "BaseEvent",
    "COMPONENT_END", "COMPONENT_HANDLERS", "COMPONENT_PROPS_DELTA", "COMPONENT_START", "COMPONENT_STATE_DELTA",
    "CapabilitiesDecodeError", "CapableAgent", "CapacityError", "ChunkExpander", "Component", "ComponentSizeError",
    "ComponentStream", "ContentPart", "Context", "CopyOperation", "CustomEvent", "DataSource", "Decision",
    "DecisionStreamItem", "DeveloperMessage", "DocumentInputContent", "DocumentPart", "EVENT_CLASSES",
    "EmbeddedModel", "Event", "EventDecodeError", "EventStreamDecoder", "EventType", "EventWriter",
    "ExecutionCapabilities", "FileSource", "Finish", "FinishReason", "FrameTooLargeError", "FunctionCall",
    "GenUILimitError", "GenUISpecError", "GenUIStream", "HumanInTheLoopCapabilities", "IdentityCapabilities",
    "ImageInputContent", "ImagePart", "InputContent", "Interactable", "InteractableUpdateStream", "Interrupt",
    "JSONStreamError", "JSONStreamLimitError", "JSONTooDeepError", "JsonPatch", "JsonPatchOperation", "LLMAgent",
    "LLMClient", "LLMStreamItem", "LLMTool", "LimitExceededError", "MAX_A2UI_ATTEMPTS", "MCP_APPS_ACTIVITY_TYPE",
    "McpAppsProxy", "Message", "MessagesSnapshotEvent", "ModelStreamError", "MoveOperation",
    "MultiAgentCapabilities", "MultimodalCapabilities", "MultimodalInputCapabilities",
    "MultimodalOutputCapabilities", "NDJSONDecoder", "NDJSON_CONTENT_TYPE", "NotAnEventError", "NullPolicy",
    "OutputCapabilities", "PROTOCOL_VERSION", "PROTO_CONTENT_TYPE", "PartSource", "PatchError", "PatchStream",
    "Problem", "ProtoDecodeError", "ProtoEventDecoder", "ProtoFrameDecoder", "ProtoTooDeepError",
    "ProtocolViolation", "ProxiedRequestError", "RawEvent", "ReasoningBlock", "ReasoningCapabilities",
    "ReasoningDelta", "ReasoningEncryptedValueEvent", "ReasoningEndEvent", "ReasoningMessage",
    "ReasoningMessageChunkEvent", "ReasoningMessageContentEvent", "ReasoningMessageEndEvent",
    "ReasoningMessageStartEvent", "ReasoningStartEvent", "RemoteInputError", "RemoveOperation", "ReplaceOperation",
    "Resource", "ResourceBusyError", "ResourceFailedError", "ResourceParamsError", "ResourcePermissionError",
    "ResourceRegistry", "ResourceResultTooLargeError", "ResourceTimeoutError", "ResumeEntry", "Role",
    "RunAgentInput", "RunErrorEvent", "RunFinishedCancelledOutcome", "RunFinishedEvent",
    "RunFinishedInterruptOutcome", "RunFinishedOutcome", "RunFinishedSuccessOutcome", "RunRecord",
    "RunStartedEvent", "SSEDecoder", "SSEMessage", "SSE_CONTENT_TYPE", "ScriptedCall", "ScriptedModel",
    "ScriptedTurn", "ServerTool", "SourceTool", "SourceToolError", "SourceToolResult", "StateCapabilities",
    "StateDeltaEvent", "StateSnapshotEvent", "StatusMessages", "StepFinishedEvent", "StepLimitExceededError",
    "StepStartedEvent", "StreamError", "SubagentErrorEvent", "SubagentFinishedEvent", "SubagentFinishedOutcome",
    "SubagentFinishedSuccessOutcome", "SubagentFinishedSuspendedOutcome", "SubagentInfo", "SubagentStartedEvent",
    "SystemMessage", "TestOperation", "TextDelta", "TextInputContent", "TextMessageChunkEvent",
    "TextMessageContentEvent", "TextMessageEndEvent", "TextMessageRole", "TextMessageStartEvent", "TextPart",
    "Thread", "TokenUsage", "Tool", "ToolArgumentsError", "ToolCall", "ToolCallArgsDelta", "ToolCallArgsEvent",
    "ToolCallArgumentsError", "ToolCallArgumentsLimitError", "ToolCallChunkEvent", "ToolCallEnd",
    "ToolCallEndEvent", "ToolCallRequest", "ToolCallResultEvent", "ToolCallStart", "ToolCallStartEvent",
    "ToolChoice", "ToolDeadlineExceeded", "ToolMessage", "ToolRoundsExceededError", "ToolRunner", "ToolSource",
    "ToolsCapabilities", "TransportCapabilities", "Turn", "UINode", "UISpecTool", "UI_SPEC_COMPONENT",
    "UI_SPEC_TOOL", "UnknownComponentError", "UnknownEvent", "UnknownProtoEventError", "UnknownResourceError",
    "UnknownToolChoiceError", "UpstreamError", "UrlSource", "Usage", "UsageError", "UserMessage", "Verifier",
    "VideoInputContent", "VideoPart", "Violation", "WriterError", "__version__", "a2ui_context", "a2ui_data_model",
    "a2ui_resource_bindings", "a2ui_user_action",
    "agent_capabilities", "apply_json_patch", "as_agent", "compact_events", "component_blocks", "decode_event",
    "decode_proto", "encode_event", "encode_ndjson", "encode_proto", "encode_proto_frame", "encode_sse",
    "encode_sse_comment", "find_component", "interactable_tools", "interactables_from_context", "mcp_apps_activity",
    "render_a2ui_tool", "run_agent_loop", "run_decision_loop", "schema_from_struct", "server_hash",
    "to_strict_schema", "tool_from_callable", "tool_from_schema", "validate_components", "validate_spec",
    "validate_tree", "verify_events",
]


def test_all_is_the_literal_expected_list() -> None:
    check_package(
        agui_engine, EXPECTED_ALL, Path(agui_engine.__file__), [name for name, _ in MODULES]
    )


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[name for name, _ in MODULES])
def test_public_module_has_a_literal_sorted_all(module: str, path: Path) -> None:
    check_module(module, path)


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[name for name, _ in MODULES])
def test_public_module_keeps_no_public_name_outside_its_all(module: str, path: Path) -> None:
    check_every_public_name_is_in_all(module, path)


def test_demo_data_and_internals_are_not_exported() -> None:
    from agui_engine.demo import weather_model as embedded
    from agui_engine.protocol import ids, verify

    for name in ["DEMO_WEATHER", "plan_reply", "chunk_text", "ANY", "TEXT", "Row", "KEEP", "DROP", "new_id"]:
        assert name not in agui_engine.__all__
    # the public API of their modules (for the demo and the tests), not of the package
    assert embedded.DEMO_WEATHER and embedded.plan_reply and verify.Row and ids.new_id
    for module, names in [(embedded, ["DEMO_WEATHER", "plan_reply", "chunk_text"]), (verify, ["ANY", "TEXT", "Row"]),
                          (ids, ["new_id"])]:
        assert set(names) <= set(module.__all__)


def test_importing_the_core_pulls_in_no_io_library() -> None:
    code = (
        "import sys, agui_engine; "
        "bad = [m for m in ('aiohttp', 'httpx', 'websockets', 'agui_engine.transports', 'agui_engine.adapters') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""
