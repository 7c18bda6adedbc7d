// The chat page: it speaks the server's public routes, as any client does. Runs stream over
// POST /agents/{agent}/ag-ui (AG-UI's event types name tool calls and results directly). Every
// text the model or a tool produced is shown with textContent, never parsed as HTML.

const $ = (id) => document.getElementById(id);
const state = { agent: null, threadId: null, runId: null, controller: null };

function newId() {
  return crypto.randomUUID().replaceAll("-", "");
}

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  if (!response.ok && response.status !== 204) {
    let message = `${response.status}`;
    try {
      message = (await response.json()).error.message;
    } catch {}
    throw new Error(message);
  }
  return response.status === 204 ? null : response.json();
}

function status(text) {
  $("status").textContent = text;
}

function bubble(role, text) {
  const div = document.createElement("div");
  div.className = `msg ${role}`;
  div.textContent = text;
  $("log").append(div);
  div.scrollIntoView({ block: "end" });
  return div;
}

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function toolCard(name) {
  const details = document.createElement("details");
  details.className = "tool";
  details.open = true;
  const summary = document.createElement("summary");
  summary.textContent = /skill/i.test(name) ? `skill: ${name}` : `tool: ${name}`;
  const args = document.createElement("pre");
  args.className = "args";
  const result = document.createElement("pre");
  result.className = "result";
  result.hidden = true;
  details.append(summary, args, result);
  $("log").append(details);
  return { details, summary, args, result, argsText: "" };
}

function showResult(card, content) {
  card.result.hidden = false;
  card.result.textContent = pretty(content);
  // A sandbox command's result carries its exit code: show it in the summary.
  try {
    const parsed = JSON.parse(content);
    if (parsed && typeof parsed === "object" && "exit_code" in parsed) {
      const code = document.createElement("span");
      code.className = parsed.exit_code === 0 ? "exit-ok" : "exit-bad";
      code.textContent = ` — exit ${parsed.exit_code}`;
      card.summary.append(code);
    }
  } catch {}
  const match = /exit code:? (\d+)/i.exec(content);
  if (match && !card.summary.querySelector("span")) {
    const code = document.createElement("span");
    code.className = match[1] === "0" ? "exit-ok" : "exit-bad";
    code.textContent = ` — exit ${match[1]}`;
    card.summary.append(code);
  }
}

async function* sseEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => line.slice(6))
        .join("\n");
      if (data) yield JSON.parse(data);
    }
  }
}

async function send(text) {
  if (!state.threadId) state.threadId = newId();
  $("title").textContent = state.threadId;
  $("delete-thread").hidden = false;
  bubble("user", text);
  const controller = new AbortController();
  state.controller = controller;
  $("send").disabled = true;
  $("cancel").hidden = false;
  status("running…");
  let current = null;
  const cards = new Map();
  try {
    const response = await fetch(`agents/${encodeURIComponent(state.agent)}/ag-ui`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({
        threadId: state.threadId,
        runId: newId(),
        state: null,
        messages: [{ id: newId(), role: "user", content: text }],
        tools: [],
        context: [],
        forwardedProps: null,
      }),
      signal: controller.signal,
    });
    if (!response.ok) {
      let message = `${response.status}`;
      try {
        message = (await response.json()).error.message;
      } catch {}
      throw new Error(message);
    }
    state.runId = response.headers.get("x-pai-run-id");
    for await (const event of sseEvents(response)) {
      switch (event.type) {
        case "TEXT_MESSAGE_START":
          current = bubble("assistant", "");
          break;
        case "TEXT_MESSAGE_CONTENT":
          current.textContent += event.delta;
          current.scrollIntoView({ block: "end" });
          break;
        case "TOOL_CALL_START":
          cards.set(event.toolCallId, toolCard(event.toolCallName));
          break;
        case "TOOL_CALL_ARGS": {
          const card = cards.get(event.toolCallId);
          card.argsText += event.delta;
          card.args.textContent = card.argsText;
          break;
        }
        case "TOOL_CALL_END": {
          const card = cards.get(event.toolCallId);
          card.args.textContent = pretty(card.argsText);
          break;
        }
        case "TOOL_CALL_RESULT": {
          const card = cards.get(event.toolCallId) ?? toolCard("tool");
          showResult(card, event.content);
          break;
        }
        case "RUN_ERROR":
          bubble("error", event.message);
          break;
      }
    }
    status("");
  } catch (error) {
    if (error.name === "AbortError") status("cancelled");
    else bubble("error", String(error.message ?? error));
  } finally {
    $("send").disabled = false;
    $("cancel").hidden = true;
    state.controller = null;
    state.runId = null;
    await loadThreads();
  }
}

async function cancelRun() {
  if (state.runId && state.threadId) {
    try {
      await api(`threads/${encodeURIComponent(state.threadId)}/runs/${state.runId}/cancel`, { method: "POST" });
    } catch (error) {
      status(String(error.message));
    }
  }
}

function renderStored(messages) {
  $("log").replaceChildren();
  const cards = new Map();
  for (const message of messages) {
    if (message.role === "user") bubble("user", message.content);
    else if (message.role === "assistant") {
      if (message.content) bubble("assistant", message.content);
      for (const call of message.tool_calls ?? []) {
        const card = toolCard(call.name);
        card.args.textContent = JSON.stringify(call.arguments, null, 2);
        cards.set(call.id, card);
      }
    } else if (message.role === "tool") {
      const card = cards.get(message.tool_call_id) ?? toolCard(message.tool_name);
      showResult(card, message.content);
    } else if (message.role === "error") bubble("error", message.message);
  }
}

async function openThread(thread) {
  state.threadId = thread.id;
  state.agent = thread.agent;
  $("agent").value = thread.agent;
  $("title").textContent = thread.id;
  $("delete-thread").hidden = false;
  const { messages } = await api(`threads/${encodeURIComponent(thread.id)}/messages`);
  renderStored(messages);
  await loadThreads();
}

async function loadThreads() {
  const { threads } = await api("threads");
  const list = $("threads");
  list.replaceChildren();
  for (const thread of threads.slice().reverse()) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = `${thread.agent} · ${thread.id.slice(0, 8)}`;
    button.title = thread.id;
    if (thread.id === state.threadId) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => openThread(thread));
    item.append(button);
    list.append(item);
  }
}

function newThread() {
  state.threadId = null;
  $("title").textContent = "New thread";
  $("delete-thread").hidden = true;
  $("log").replaceChildren();
  loadThreads();
  $("message").focus();
}

async function deleteThread() {
  if (!state.threadId || !confirm("Delete this thread and its sandbox?")) return;
  await api(`threads/${encodeURIComponent(state.threadId)}`, { method: "DELETE" });
  newThread();
}

async function start() {
  const { agents } = await api("agents");
  const select = $("agent");
  for (const agent of agents) {
    const option = document.createElement("option");
    option.value = option.textContent = agent.id;
    select.append(option);
  }
  state.agent = agents[0]?.id ?? null;
  select.addEventListener("change", () => {
    state.agent = select.value;
    newThread();
  });
  $("new-thread").addEventListener("click", newThread);
  $("delete-thread").addEventListener("click", deleteThread);
  $("cancel").addEventListener("click", cancelRun);
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("message").value.trim();
    if (!text || !state.agent) return;
    $("message").value = "";
    send(text);
  });
  $("message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      $("composer").requestSubmit();
    }
  });
  await loadThreads();
}

start().catch((error) => status(String(error.message ?? error)));
