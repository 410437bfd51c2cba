/**
 * The web chat served at `/`: one self-contained page (inline CSS and JS, no build step, no
 * external requests) that talks to `/v1/chat/completions` with `stream: true`, parses the SSE
 * itself, renders the answer as it streams and each tool call and its result as they happen
 * (from the `agentloop` field of the chunks), and keeps the conversation in the page. An
 * optional API key is kept in localStorage and sent as a Bearer token. Stop aborts the
 * request, which aborts the run on the server.
 *
 * Hooks for tests: `#model`, `#key`, `#input`, `#send`, `#reset`; `.msg.user`,
 * `.msg.assistant`, `.tool` (with `.call` and `.result`), `.meta`, `.error`.
 * (The script avoids backticks and `${`: it lives in a template literal.)
 */
export const WEB_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentloop</title>
<style>
  :root { color-scheme: light dark; --muted: #8a8f98; --accent: #2563eb; --line: #8883; --soft: #8881; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.55 system-ui, -apple-system, sans-serif; display: flex; flex-direction: column; height: 100vh; }
  header { padding: 10px 16px; border-bottom: 1px solid var(--line); display: flex; gap: 10px; align-items: center; flex-wrap: wrap; }
  header h1 { font-size: 16px; margin: 0 auto 0 0; letter-spacing: .02em; }
  header select, header input, header button { font: inherit; font-size: 13px; padding: 3px 8px; }
  #log { flex: 1; overflow-y: auto; padding: 20px 16px; display: flex; flex-direction: column; gap: 10px; }
  #log:empty::before { content: "Ask the agent something. Tool calls appear here as they happen."; color: var(--muted); margin: auto; }
  .msg { max-width: min(760px, 90%); white-space: pre-wrap; overflow-wrap: anywhere; padding: 8px 12px; border-radius: 12px; }
  .user { align-self: flex-end; background: var(--accent); color: #fff; }
  .assistant { align-self: flex-start; background: var(--soft); }
  .tool { align-self: flex-start; max-width: min(760px, 90%); font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; border-left: 3px solid var(--line); padding: 2px 10px; }
  .tool .call { color: var(--accent); }
  .tool .result { color: var(--muted); white-space: pre-wrap; overflow-wrap: anywhere; }
  .tool.pending .call::after { content: " …"; }
  .tool.failed { border-color: #e5484d; }
  .tool.failed .result { color: #e5484d; }
  .meta { font-size: 12px; color: var(--muted); align-self: flex-start; }
  .error { align-self: flex-start; color: #e5484d; }
  form { display: flex; gap: 8px; padding: 12px 16px; border-top: 1px solid var(--line); }
  textarea { flex: 1; font: inherit; padding: 8px 10px; resize: none; height: 46px; border-radius: 8px; }
  #send { font: inherit; padding: 0 20px; border-radius: 8px; border: 0; background: var(--accent); color: #fff; cursor: pointer; }
  #send.stop { background: #e5484d; }
</style>
</head>
<body>
<header>
  <h1>agentloop</h1>
  <select id="model" aria-label="model"></select>
  <input id="key" type="password" placeholder="API key (if required)" aria-label="API key" autocomplete="off">
  <button id="reset" type="button">New chat</button>
</header>
<main id="log" aria-live="polite"></main>
<form id="form">
  <textarea id="input" placeholder="Message the agent (Enter sends, Shift+Enter breaks the line)" aria-label="message"></textarea>
  <button id="send" type="submit">Send</button>
</form>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const log = $("log"), input = $("input"), keyField = $("key"), modelField = $("model"), sendButton = $("send");
let messages = [], running = null;

keyField.value = localStorage.getItem("agentloop-key") || "";
keyField.onchange = () => { localStorage.setItem("agentloop-key", keyField.value); loadModels(); };
const headers = () => Object.assign({ "content-type": "application/json" }, keyField.value ? { authorization: "Bearer " + keyField.value } : {});

function add(cls, text, parent) {
  const el = document.createElement("div");
  el.className = cls;
  if (text !== undefined) el.textContent = text;
  (parent || log).appendChild(el);
  log.scrollTop = log.scrollHeight;
  return el;
}
async function errorOf(res) {
  const body = await res.json().catch(() => ({}));
  return (body.error && body.error.message) || "HTTP " + res.status;
}
async function loadModels() {
  const res = await fetch("/v1/models", { headers: headers() });
  if (!res.ok) { add("error", "Models: " + await errorOf(res)); return; }
  modelField.replaceChildren();
  for (const m of (await res.json()).data) { const o = document.createElement("option"); o.textContent = m.id; modelField.appendChild(o); }
}

/** Yields the JSON of each SSE data event of a fetch response (comments and [DONE] skipped). */
async function* sse(res) {
  const reader = res.body.getReader(), decoder = new TextDecoder();
  let buffer = "";
  while (true) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true }).replace(/\\r\\n?/g, "\\n");
    let cut;
    while ((cut = buffer.indexOf("\\n\\n")) !== -1) {
      const lines = buffer.slice(0, cut).split("\\n"); buffer = buffer.slice(cut + 2);
      const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\\n");
      if (data && data !== "[DONE]") yield JSON.parse(data);
    }
  }
}

async function send() {
  const text = input.value.trim();
  if (!text || running) return;
  input.value = "";
  add("msg user", text);
  messages.push({ role: "user", content: text });
  running = new AbortController();
  sendButton.textContent = "Stop"; sendButton.classList.add("stop");
  let bubble = null, content = "";
  const tools = {};
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST", headers: headers(), signal: running.signal,
      body: JSON.stringify({ model: modelField.value || undefined, messages, stream: true }),
    });
    if (!res.ok) { add("error", "Error: " + await errorOf(res)); return; }
    for await (const chunk of sse(res)) {
      const delta = (chunk.choices && chunk.choices[0] && chunk.choices[0].delta) || {}, ev = chunk.agentloop;
      if (delta.content) {
        content += delta.content;
        if (!bubble) bubble = add("msg assistant", "");
        bubble.textContent = (bubble.textContent + delta.content).replace(/^\\s+/, "");
      }
      if (!ev) continue;
      if (ev.type === "tool_call") {
        const card = add("tool pending");
        add("call", "→ " + ev.name + " " + JSON.stringify(ev.arguments), card);
        tools[ev.id] = card; bubble = null;
      } else if (ev.type === "tool_result") {
        const card = tools[ev.id] || add("tool");
        card.classList.remove("pending");
        if (ev.isError) card.classList.add("failed");
        const shown = ev.content.length > 400 ? ev.content.slice(0, 400) + "…" : ev.content;
        add("result", (ev.isError ? "✗ " : "✓ ") + shown + " (" + ev.durationMs + " ms)", card);
      } else if (ev.type === "error") {
        add("error", "Error: " + ev.message);
      } else if (ev.type === "turn_complete") {
        const tokens = ev.usage.inputTokens + ev.usage.outputTokens;
        add("meta", ev.stopReason + " · " + ev.iterations + " iteration(s) · " + tokens + " tokens");
      }
    }
  } catch (error) {
    add("error", error.name === "AbortError" ? "Stopped." : "Error: " + error.message);
  } finally {
    if (content) messages.push({ role: "assistant", content });
    running = null;
    sendButton.textContent = "Send"; sendButton.classList.remove("stop");
    input.focus();
  }
}

$("form").onsubmit = (e) => { e.preventDefault(); if (running) running.abort(); else send(); };
input.addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); } });
$("reset").onclick = () => { if (running) running.abort(); messages = []; log.replaceChildren(); };
loadModels();
input.focus();
</script>
</body>
</html>
`;
