// @ag-ui/client's HttpAgent runs one turn against a pai-http server and prints what it saw:
// the event types in order, the final messages, and the tool call results.
// Usage: node agui-client.mjs BASE_URL AGENT THREAD_ID TOKEN TEXT
import { HttpAgent } from "@ag-ui/client";

const [baseUrl, agentId, threadId, token, text] = process.argv.slice(2);
const agent = new HttpAgent({
  url: `${baseUrl}/agents/${agentId}/ag-ui`,
  headers: { Authorization: `Bearer ${token}` },
  threadId,
  initialMessages: [{ id: "user-1", role: "user", content: text }],
});
const types = [];
const results = [];
let failure = null;
try {
  await agent.runAgent(
    { runId: "run-from-agui-client" },
    {
      onEvent({ event }) {
        types.push(event.type);
      },
      onToolCallResultEvent({ event }) {
        results.push({ toolCallId: event.toolCallId, content: event.content });
      },
    },
  );
} catch (error) {
  failure = String(error?.message ?? error);
}
const messages = agent.messages.map((m) => ({
  role: m.role,
  content: typeof m.content === "string" ? m.content : null,
  toolCalls: (m.toolCalls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
}));
console.log(JSON.stringify({ types, results, messages, failure }));
