// An assistant-ui page over its AG-UI runtime (@assistant-ui/react-ag-ui 0.0.58: useAgUiRuntime over
// @ag-ui/client 0.0.59's HttpAgent) whose agent URL is an agui-engine gateway. The test opens it as
//   index.html?agent=<gateway agent url>&thread=<id>[&token=<bearer token>][&history=1]
// What it shows, each in its own element for the test to read:
//   - the thread's messages (.user-message / .assistant-message), a running marker (#running);
//   - the frontend tool confirm_booking (a toolkit entry whose execute runs in the page): what it ran
//     goes into #handled;
//   - a renderer for the agent's show_component_WeatherCard tool calls: every distinct argsText it
//     was drawn with goes into #weather-args (the arguments growing while the model types);
//   - assistant-ui's A2UI parts (react-ag-ui turns each a2ui-surface ACTIVITY_SNAPSHOT into a
//     `present` tool call): drawn with react-generative-ui's own library, a button's action sent
//     back with useAgUiSendA2uiAction (forwardedProps.a2uiAction.userAction on the next run);
//   - the shared state (useAgUiState) in #state, and #set-note changing it (useAgUiSetState);
//   - every error the runtime reports in #errors.
// With history=1 the runtime gets a ThreadHistoryAdapter whose load() reads the thread back from the
// gateway (POST <agent>/agent/default/connect, the thread's kept history in the 0.x wire, applied by
// @ag-ui/client's own HttpAgent), so a reloaded page shows its thread again.
// window.auiMessages() returns the runtime's thread messages (the test checks every tool result).
import React, { useEffect } from "react";
import { createRoot } from "react-dom/client";
import { HttpAgent } from "@ag-ui/client";
import {
  AssistantRuntimeProvider,
  AuiConfig,
  ComposerPrimitive,
  ExportedMessageRepository,
  MessagePrimitive,
  ThreadPrimitive,
  Tools,
} from "@assistant-ui/react";
import {
  fromAgUiMessages,
  useAgUiRuntime,
  useAgUiSendA2uiAction,
  useAgUiSetState,
  useAgUiState,
} from "@assistant-ui/react-ag-ui";
import { defaultGenerativeUILibrary, renderGenerativeUI } from "@assistant-ui/react-generative-ui";
import { z } from "zod";

const params = new URLSearchParams(location.search);
const agentUrl = params.get("agent");
const threadId = params.get("thread") || undefined;
const headers = params.get("token") ? { Authorization: `Bearer ${params.get("token")}` } : {};
const agent = new HttpAgent({ url: agentUrl, threadId, headers });

function report(id, text) {
  const li = document.createElement("li");
  li.textContent = text;
  document.getElementById(id).appendChild(li);
}

const argsSeen = new Set();

function WeatherArgs({ argsText }) {
  useEffect(() => {
    if (argsText && !argsSeen.has(argsText)) {
      argsSeen.add(argsText);
      report("weather-args", argsText);
    }
  }, [argsText]);
  return <div className="weather-card">{argsText}</div>;
}

function A2uiSurface({ args, toolCallId, status }) {
  const sendA2uiAction = useAgUiSendA2uiAction();
  const dispatch = (action) => {
    report("a2ui-actions", action.name);
    sendA2uiAction(action);
  };
  return (
    <div className="a2ui-surface" data-surface={toolCallId}>
      {renderGenerativeUI(args, defaultGenerativeUILibrary, {
        status: status?.type === "running" ? "streaming" : "done",
        dispatch,
      })}
    </div>
  );
}

const toolkit = {
  confirm_booking: {
    type: "frontend",
    description: "Ask the user to confirm a booking",
    parameters: z.object({ guests: z.number() }),
    execute: async ({ guests }) => {
      const result = `confirmed for ${guests} guests`;
      report("handled", result);
      return result;
    },
    renderText: ({ args }) => `confirming ${args?.guests ?? "?"} guests`,
  },
  show_component_WeatherCard: { type: "backend", render: WeatherArgs },
  present: { type: "backend", render: A2uiSurface },
};

const config = AuiConfig({ tools: Tools({ toolkit }) });

function ToolPart({ toolName, argsText }) {
  return <div className="tool-part" data-tool={toolName}>{toolName}</div>;
}

function Message() {
  return (
    <MessagePrimitive.Root>
      <MessagePrimitive.If user><div className="user-message"><MessagePrimitive.Parts /></div></MessagePrimitive.If>
      <MessagePrimitive.If assistant>
        <div className="assistant-message"><MessagePrimitive.Parts components={{ tools: { Fallback: ToolPart } }} /></div>
      </MessagePrimitive.If>
    </MessagePrimitive.Root>
  );
}

function SharedState() {
  const state = useAgUiState();
  const setState = useAgUiSetState();
  return (
    <div>
      <pre id="state">{state === undefined ? "" : JSON.stringify(state)}</pre>
      <button id="set-note" onClick={() => setState((s) => ({ ...(s ?? {}), note: "window seat" }))}>note</button>
    </div>
  );
}

// The thread read back from the gateway: its runtime route `connect` answers the thread's kept history
// as an AG-UI stream, which @ag-ui/client's HttpAgent applies to its messages and state.
const history = params.get("history") ? {
  async load() {
    const reader = new HttpAgent({ url: `${agentUrl.replace(/\/+$/, "")}/agent/default/connect`, threadId, headers });
    await reader.runAgent({});
    report("history", `${reader.messages.length} messages`);
    const repository = ExportedMessageRepository.fromArray(fromAgUiMessages(reader.messages));
    return reader.state && Object.keys(reader.state).length ? { ...repository, state: reader.state } : repository;
  },
  async append() {}, // the gateway keeps the thread itself (its history of every run)
} : undefined;

function App() {
  const runtime = useAgUiRuntime({
    agent,
    onError: (e) => report("errors", String(e && e.message ? e.message : e)),
    ...(history ? { adapters: { history } } : {}),
  });
  useEffect(() => {
    window.auiMessages = () => runtime.thread.getState().messages;
  }, [runtime]);
  return (
    <AssistantRuntimeProvider runtime={runtime} config={config}>
      <ThreadPrimitive.Root>
        <ThreadPrimitive.Viewport>
          <ThreadPrimitive.Messages components={{ Message }} />
        </ThreadPrimitive.Viewport>
        <ThreadPrimitive.If running><div id="running">running</div></ThreadPrimitive.If>
        <SharedState />
        <ComposerPrimitive.Root>
          <ComposerPrimitive.Input id="composer" />
          <ComposerPrimitive.Send id="send">Send</ComposerPrimitive.Send>
        </ComposerPrimitive.Root>
      </ThreadPrimitive.Root>
    </AssistantRuntimeProvider>
  );
}

createRoot(document.getElementById("root")).render(<App />);
