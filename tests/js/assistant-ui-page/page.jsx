// An assistant-ui page over its AG-UI runtime (@assistant-ui/react-ag-ui 0.0.58: useAgUiRuntime over
// @ag-ui/client 0.0.59's HttpAgent) whose agent URL is an agui-engine gateway. The test opens it as
//   index.html?agent=<gateway agent url>
// The page registers one frontend tool (useAssistantTool); its execute writes what it ran into
// #handled, and every error the runtime reports is written into #errors.
import React from "react";
import { createRoot } from "react-dom/client";
import { HttpAgent } from "@ag-ui/client";
import { AssistantRuntimeProvider, ComposerPrimitive, MessagePrimitive, ThreadPrimitive, useAssistantTool } from "@assistant-ui/react";
import { useAgUiRuntime } from "@assistant-ui/react-ag-ui";
import { z } from "zod";

const params = new URLSearchParams(location.search);
const agent = new HttpAgent({ url: params.get("agent"), threadId: params.get("thread") || undefined });

function report(id, text) {
  const li = document.createElement("li");
  li.textContent = text;
  document.getElementById(id).appendChild(li);
}

function Tools() {
  useAssistantTool({
    toolName: "confirm_booking",
    type: "frontend",
    description: "Ask the user to confirm a booking",
    parameters: z.object({ guests: z.number() }),
    execute: async ({ guests }) => {
      const result = `confirmed for ${guests} guests`;
      report("handled", result);
      return result;
    },
  });
  return null;
}

function Message() {
  return (
    <MessagePrimitive.Root>
      <MessagePrimitive.If user><div className="user-message"><MessagePrimitive.Parts /></div></MessagePrimitive.If>
      <MessagePrimitive.If assistant><div className="assistant-message"><MessagePrimitive.Parts /></div></MessagePrimitive.If>
    </MessagePrimitive.Root>
  );
}

function App() {
  const runtime = useAgUiRuntime({ agent, onError: (e) => report("errors", String(e && e.message ? e.message : e)) });
  return (
    <AssistantRuntimeProvider runtime={runtime}>
      <Tools />
      <ThreadPrimitive.Root>
        <ThreadPrimitive.Viewport>
          <ThreadPrimitive.Messages components={{ Message }} />
        </ThreadPrimitive.Viewport>
        <ThreadPrimitive.If running><div id="running">running</div></ThreadPrimitive.If>
        <ComposerPrimitive.Root>
          <ComposerPrimitive.Input id="composer" />
          <ComposerPrimitive.Send id="send">Send</ComposerPrimitive.Send>
        </ComposerPrimitive.Root>
      </ThreadPrimitive.Root>
    </AssistantRuntimeProvider>
  );
}

createRoot(document.getElementById("root")).render(<App />);
