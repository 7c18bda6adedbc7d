// The ai package's DefaultChatTransport (what useChat uses) sends one message to a pai-http
// server's /chat route; readUIMessageStream parses the stream into the assistant message, whose
// parts are printed.
// Usage: node aisdk-client.mjs BASE_URL AGENT THREAD_ID TOKEN TEXT
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [baseUrl, agentId, threadId, token, text] = process.argv.slice(2);
const transport = new DefaultChatTransport({
  api: `${baseUrl}/agents/${agentId}/chat`,
  headers: { Authorization: `Bearer ${token}` },
});
const errors = [];
const stream = await transport.sendMessages({
  chatId: threadId,
  trigger: "submit-message",
  messageId: undefined,
  abortSignal: undefined,
  messages: [{ id: "user-1", role: "user", parts: [{ type: "text", text }] }],
});
let last = null;
for await (const message of readUIMessageStream({ stream, onError: (e) => errors.push(String(e)) })) {
  last = message;
}
const parts = (last?.parts ?? []).map((part) => {
  if (part.type === "text") return { type: "text", text: part.text, state: part.state };
  if (part.type.startsWith("tool-") || part.type === "dynamic-tool")
    return { type: part.type, toolCallId: part.toolCallId, state: part.state, input: part.input, output: part.output, errorText: part.errorText };
  return { type: part.type };
});
console.log(JSON.stringify({ role: last?.role ?? null, parts, errors }));
