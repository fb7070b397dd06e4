// A CopilotKit v2 chat page (@copilotkit/react-core 1.74). The test opens it as
//   index.html?runtime=<runtime url>&thread=<thread id>[&agent=<agent id>][&token=<bearer token>][&single=1]
// where the runtime URL is either an agui-engine gateway itself (no Node runtime) or CopilotKit's
// Node CopilotRuntime in front of the gateway; the page is the same. `token` is sent as
// CopilotKit's headers, `single=1` makes the provider use the runtime's single-endpoint form
// (`useSingleEndpoint`). What a person would see and what CopilotKit reports is written into the
// DOM for the test to read:
//   #handled   one line per run of the frontend tool's handler (useFrontendTool)
//   #errors    every error CopilotKit reports (provider or chat onError)
//   #weather   the WeatherCard tool renderer (useRenderTool): one <li> per distinct parameters
//              object it was rendered with, with its status, in order (the arguments growing)
//   #state     the agent's shared state (useAgent, re-rendered on state changes), as JSON
//   #tool-results  the agent's tool messages (role "tool"), as JSON lines: no error result may be there
// The A2UI surfaces and the MCP Apps activity are drawn by CopilotKit's own renderers in the chat.
import React from "react";
import { createRoot } from "react-dom/client";
import {
  CopilotKitProvider,
  CopilotChat,
  UseAgentUpdate,
  useAgent,
  useFrontendTool,
  useRenderTool,
} from "@copilotkit/react-core/v2";
import { z } from "zod";

const params = new URLSearchParams(location.search);
const runtimeUrl = params.get("runtime");
const threadId = params.get("thread") || undefined;
const agentId = params.get("agent") || "default";
const token = params.get("token");
const headers = token ? { Authorization: `Bearer ${token}` } : undefined;
const useSingleEndpoint = params.get("single") === "1" ? true : undefined;

function report(id, text) {
  const li = document.createElement("li");
  li.textContent = text;
  document.getElementById(id).appendChild(li);
}

function onError({ error, code }) {
  report("errors", `${code}: ${error && error.message ? error.message : String(error)}`);
}

const seenWeather = new Set();

function WeatherCard({ status, parameters }) {
  const shown = JSON.stringify(parameters ?? {});
  if (!seenWeather.has(`${status} ${shown}`)) {
    seenWeather.add(`${status} ${shown}`);
    report("weather", `${status} ${shown}`);
  }
  return (
    <div data-testid="weather-card" data-status={status}>WeatherCard ({status}): {shown}</div>
  );
}

function Tools() {
  useFrontendTool({
    name: "confirm_booking",
    description: "Ask the user to confirm a booking",
    parameters: z.object({ guests: z.number() }),
    handler: async ({ guests }) => {
      const result = `confirmed for ${guests} guests`;
      report("handled", result);
      return result;
    },
  });
  useRenderTool({ name: "show_component_WeatherCard", render: WeatherCard }, []);
  return null;
}

function AgentView() {
  const { agent } = useAgent({
    agentId,
    updates: [UseAgentUpdate.OnStateChanged, UseAgentUpdate.OnMessagesChanged],
  });
  const tools = (agent.messages || []).filter((m) => m.role === "tool");
  return (
    <>
      <pre id="state">{JSON.stringify(agent.state ?? null)}</pre>
      <ul id="tool-results">
        {tools.map((m) => (
          <li key={m.id}>{JSON.stringify({ toolCallId: m.toolCallId, content: m.content, error: m.error })}</li>
        ))}
      </ul>
    </>
  );
}

function App() {
  return (
    <CopilotKitProvider runtimeUrl={runtimeUrl} headers={headers} onError={onError} showDevConsole={false}
      enableInspector={false} useSingleEndpoint={useSingleEndpoint}>
      <Tools />
      <CopilotChat agentId={agentId} threadId={threadId} onError={onError} />
      <AgentView />
    </CopilotKitProvider>
  );
}

createRoot(document.getElementById("root")).render(<App />);
