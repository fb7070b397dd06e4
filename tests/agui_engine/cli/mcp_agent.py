"""What ``agui-engine serve --agent py:tests.agui_engine.cli.mcp_agent:agent --mcp ...`` serves in the
CLI's MCP tests: the scripted model calls the MCP tool ``header_seen`` (the tests' own server tells
how long the Authorization header it received was), then says what it got."""

from __future__ import annotations

from agui_engine.demo.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, tool_results
from agui_engine.loops.llm_agent import LLMAgent

agent = LLMAgent(ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("header_seen")]),
                                lambda messages: "header length " + " | ".join(tool_results(messages))]))

#: The remote agent of ``agui-engine serve --agent http://... --mcp ...``: it knows no MCP server and
#: calls ``add``, a client tool to it, that the gateway's loop runs on the MCP server; then it says
#: what the follow-up run gave it.
remote = LLMAgent(ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("add", {"a": 20, "b": 22})]),
                                 lambda messages: "got: " + " | ".join(tool_results(messages))]))

#: Calls the MCP tool ``slow``, which never returns: a run in flight on the stdio server when ``serve`` stops.
hanging = LLMAgent(ScriptedModel([ScriptedTurn(tool_calls=[ScriptedCall("slow")]), "never reached"]))
