/**
 * The web chat served at `/`: one self-contained page (no build step) that talks to
 * `/v1/chat/completions` with `stream: true`, renders the answer as it streams and each tool
 * call and result as it happens, and keeps the conversation in the page.
 */
export const WEB_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentloop</title>
<style>
  :root { color-scheme: light dark; --muted: #8a8f98; --accent: #3b82f6; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.5 system-ui, sans-serif; display: flex; flex-direction: column; height: 100vh; }
  header { padding: 10px 16px; border-bottom: 1px solid #8883; display: flex; gap: 12px; align-items: center; }
  header h1 { font-size: 16px; margin: 0; }
  header select, header input { font: inherit; padding: 2px 6px; }
  #log { flex: 1; overflow-y: auto; padding: 16px; display: flex; flex-direction: column; gap: 10px; }
  .msg { max-width: 760px; white-space: pre-wrap; padding: 8px 12px; border-radius: 10px; }
  .user { align-self: flex-end; background: var(--accent); color: white; }
  .assistant { align-self: flex-start; background: #8881; }
  .tool { align-self: flex-start; font: 13px/1.4 ui-monospace, monospace; color: var(--muted); border-left: 3px solid #8884; padding: 2px 10px; }
  .tool.error { border-color: #e5484d; }
  .meta { font-size: 12px; color: var(--muted); }
  form { display: flex; gap: 8px; padding: 12px 16px; border-top: 1px solid #8883; }
  textarea { flex: 1; font: inherit; padding: 8px; resize: none; height: 44px; }
  button { font: inherit; padding: 0 18px; }
</style>
</head>
<body>
<header>
  <h1>agentloop</h1>
  <select id="model" aria-label="model"></select>
  <input id="key" type="password" placeholder="API key (if the server needs one)" aria-label="API key">
  <button id="reset" type="button">New chat</button>
</header>
<main id="log" aria-live="polite"></main>
<form id="form">
  <textarea id="input" placeholder="Ask something... (Enter to send)" aria-label="message"></textarea>
  <button id="send">Send</button>
</form>
<script>
const log = document.getElementById("log"), input = document.getElementById("input");
const keyField = document.getElementById("key"), modelField = document.getElementById("model");
keyField.value = localStorage.getItem("agentloop-key") || "";
keyField.onchange = () => { localStorage.setItem("agentloop-key", keyField.value); loadModels(); };
let messages = [], busy = false;
const headers = () => ({ "content-type": "application/json", ...(keyField.value ? { authorization: "Bearer " + keyField.value } : {}) });
function add(cls, text) { const el = document.createElement("div"); el.className = cls; el.textContent = text; log.appendChild(el); log.scrollTop = log.scrollHeight; return el; }
async function loadModels() {
  const res = await fetch("/v1/models", { headers: headers() });
  if (!res.ok) return;
  modelField.innerHTML = "";
  for (const m of (await res.json()).data) { const o = document.createElement("option"); o.textContent = m.id; modelField.appendChild(o); }
}
document.getElementById("reset").onclick = () => { messages = []; log.innerHTML = ""; };
input.addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); } });
document.getElementById("form").onsubmit = (e) => { e.preventDefault(); send(); };
async function send() {
  const text = input.value.trim();
  if (!text || busy) return;
  busy = true; input.value = "";
  add("msg user", text);
  messages.push({ role: "user", content: text });
  let answer = null, content = "", bubble = "";
  const tools = {};
  try {
    const res = await fetch("/v1/chat/completions", { method: "POST", headers: headers(), body: JSON.stringify({ model: modelField.value || undefined, messages, stream: true }) });
    if (!res.ok) { const body = await res.json().catch(() => ({})); add("msg assistant", "Error: " + ((body.error && body.error.message) || res.status)); return; }
    const reader = res.body.getReader(), decoder = new TextDecoder();
    let buffer = "";
    while (true) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\\n\\n")) !== -1) {
        const event = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
        const data = event.split("\\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\\n");
        if (!data || data === "[DONE]") continue;
        const chunk = JSON.parse(data), ev = chunk.agentloop, delta = (chunk.choices[0] || {}).delta || {};
        if (delta.content) { answer = answer || add("msg assistant", ""); content += delta.content; bubble = (bubble + delta.content).trimStart(); answer.textContent = bubble; }
        if (ev && ev.type === "tool_call") { tools[ev.id] = add("tool", "→ " + ev.name + " " + JSON.stringify(ev.arguments)); answer = null; bubble = ""; }
        if (ev && ev.type === "tool_result") { const el = add("tool" + (ev.isError ? " error" : ""), (ev.isError ? "✗ " : "✓ ") + ev.name + " (" + ev.durationMs + " ms): " + ev.content.slice(0, 300)); el.dataset.id = ev.id; }
        if (ev && ev.type === "error") add("msg assistant", "Error: " + ev.message);
        if (ev && ev.type === "turn_complete") add("meta", ev.stopReason + " · " + ev.iterations + " iteration(s) · " + (ev.usage.inputTokens + ev.usage.outputTokens) + " tokens");
        log.scrollTop = log.scrollHeight;
      }
    }
    messages.push({ role: "assistant", content });
  } catch (error) {
    add("msg assistant", "Error: " + error.message);
  } finally { busy = false; input.focus(); }
}
loadModels();
</script>
</body>
</html>
`;
