// A CopilotKit v2 chat page (@copilotkit/react-core 1.74) whose runtimeUrl is an agui-engine
// gateway itself: no Node runtime in between. The test opens it as
//   index.html?runtime=<gateway url>&thread=<thread id>
// (and &token=<bearer token>, sent as CopilotKit's headers). The page registers one frontend
// tool with CopilotKit's hook; its handler writes what it ran into
// #handled, and every error CopilotKit reports (provider or chat) is written into #errors.
import React from "react";
import { createRoot } from "react-dom/client";
import { CopilotKitProvider, CopilotChat, useFrontendTool } from "@copilotkit/react-core/v2";
import { z } from "zod";

const params = new URLSearchParams(location.search);
const runtimeUrl = params.get("runtime");
const threadId = params.get("thread") || undefined;
const token = params.get("token");
const headers = token ? { Authorization: `Bearer ${token}` } : undefined;

function report(id, text) {
  const li = document.createElement("li");
  li.textContent = text;
  document.getElementById(id).appendChild(li);
}

function onError({ error, code }) {
  report("errors", `${code}: ${error && error.message ? error.message : String(error)}`);
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
  return null;
}

function App() {
  return (
    <CopilotKitProvider runtimeUrl={runtimeUrl} headers={headers} onError={onError} showDevConsole={false} enableInspector={false}>
      <Tools />
      <CopilotChat agentId="default" threadId={threadId} onError={onError} />
    </CopilotKitProvider>
  );
}

createRoot(document.getElementById("root")).render(<App />);
