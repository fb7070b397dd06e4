"""A flow written the way ``ag-ui-crewai`` 1.0 documents (``CopilotKitState``, its
``copilotkit_emit_state`` / ``copilotkit_stream`` helpers around a litellm stream), with a
crew inside: the same flow for the differential test and the benchmark, driven by the
project's provider replay server."""

from __future__ import annotations

import os

# Not OTEL_SDK_DISABLED: process-global, it would silence every other test's SDK (tests/adapters/test_crewai.py).
os.environ.update(CREWAI_DISABLE_TELEMETRY="true", CREWAI_TRACING_ENABLED="false",
                  CREWAI_DISABLE_TRACKING="true", LITELLM_LOCAL_MODEL_COST_MAP="True")

from typing import Any  # noqa: E402

from ag_ui_crewai import CopilotKitState, copilotkit_emit_state, copilotkit_stream  # noqa: E402
from crewai.flow.flow import Flow, listen, start  # noqa: E402

from agui_engine.protocol.events import RunAgentInput, Tool, UserMessage  # noqa: E402
from tests.adapters.agent_runs import KEY  # noqa: E402
from tests.adapters.test_crewai import ScriptedLLM, final, use_tool, weather_crew  # noqa: E402

#: The client's tool both bridges hand the flow (ag-ui-crewai refuses a run without a tools list).
WEATHER = Tool(name="get_weather", description="The weather for a city.",
               parameters={"type": "object", "properties": {"city": {"type": "string"}}})
#: The run input of the differential test and the benchmark.
QUESTION = RunAgentInput(thread_id="t1", run_id="r1", messages=[UserMessage(id="u1", content="Weather in Paris?")],
                         tools=[WEATHER], state={})


def chat_flow(chat_base_url: str, crew_words: int = 3) -> type[Flow[Any]]:
    """A Flow class: ``chat`` streams the replay server's Chat Completions answer through
    ``copilotkit_stream`` (ag-ui-crewai's way), ``forecast`` kicks off the tests' two-agent
    crew (a tool call, then ``crew_words`` words of answer), writing state on the way."""
    answer = " ".join(["sunny"] * crew_words)

    class ChatFlow(Flow[CopilotKitState]):
        @start()
        async def chat(self) -> str:
            import litellm

            await copilotkit_emit_state({"progress": "thinking"})
            response = await copilotkit_stream(await litellm.acompletion(
                model="openai/gpt-4o", api_base=chat_base_url, api_key=KEY, stream=True,
                messages=self.state.messages or [{"role": "user", "content": "hi"}],
                tools=self.state.copilotkit.actions or None))
            message = response.choices[0].message
            self.state.messages.append({"role": "assistant", "content": message.content or ""})
            return str(message.content or "")

        @listen(chat)
        def forecast(self, said: str) -> str:
            crew = weather_crew(ScriptedLLM(model="a", replies=[use_tool("Paris"), final(answer)]),
                                ScriptedLLM(model="b", replies=[final(f"In Paris: {answer}.")]))
            out = crew.kickoff(inputs={"message": "Paris"})
            self.state.messages.append({"role": "assistant", "content": out.raw})
            return str(out.raw)

    return ChatFlow
