import { createHash } from "node:crypto";

/**
 * The web chat served at `/`: one self-contained page (inline CSS and JS, no build step, no
 * external requests) that talks to `/v1/chat/completions` with `stream: true`, parses the SSE
 * itself, renders the answer as Markdown as it streams (built with DOM nodes and `textContent`,
 * never `innerHTML`; links only for http(s) URLs) and each tool call and its result as they happen
 * (from the `agentloop` field of the chunks), and keeps the conversation in the page. A busy line
 * shows what runs (the model, or which tools) and Send becomes Stop, which aborts the request and
 * so the run on the server. A run that stops with `approval_required` shows each waiting call
 * with Approve and Deny; once every call is decided the page posts the decisions to
 * `/v1/runs/{runId}/approvals` (streaming) and the continuation streams into the same
 * conversation. The optional API key stays in the page's memory (never in storage) and is sent
 * as a Bearer token.
 *
 * Hooks for tests: `#model`, `#key`, `#input`, `#send`, `#reset`, `#busy`; `.msg.user`,
 * `.msg.assistant`, `.tool` (with `.call` and `.result`), `.tool.approval` (with `button.approve`
 * and `button.deny`), `.meta`, `.error`; a sub-agent's work in `.tool details.sub` (its name the
 * `summary`) under the call that delegated to it.
 * (The script and style are raw template literals: no backticks and no `${` in them.)
 */

const STYLE = `
  :root { color-scheme: light dark; --muted: #8a8f98; --accent: #2563eb; --danger: #e5484d; --line: #8883; --soft: #8881; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.55 system-ui, -apple-system, sans-serif; display: flex; flex-direction: column; height: 100vh; height: 100dvh; }
  header { padding: 10px 16px; border-bottom: 1px solid var(--line); display: flex; gap: 8px 10px; align-items: center; flex-wrap: wrap; }
  header h1 { font-size: 16px; margin: 0 auto 0 0; letter-spacing: .02em; }
  header select, header input, header button { font: inherit; font-size: 13px; padding: 3px 8px; min-width: 0; }
  header input { flex: 0 1 190px; }
  #log { flex: 1; overflow-y: auto; padding: 20px 16px; display: flex; flex-direction: column; gap: 10px; }
  #log:empty::before { content: "Ask the agent something. Tool calls appear here as they happen."; color: var(--muted); margin: auto; text-align: center; }
  .msg { max-width: min(760px, 90%); min-width: 0; overflow-wrap: anywhere; padding: 8px 12px; border-radius: 12px; }
  .user { align-self: flex-end; background: var(--accent); color: #fff; white-space: pre-wrap; }
  .assistant { align-self: flex-start; background: var(--soft); }
  .assistant > :first-child { margin-top: 0; }
  .assistant > :last-child { margin-bottom: 0; }
  .assistant p { margin: .5em 0; white-space: pre-line; }
  .assistant ul, .assistant ol { margin: .5em 0; padding-left: 1.4em; }
  .assistant pre { margin: .5em 0; padding: 8px 10px; border-radius: 8px; background: #8882; overflow-x: auto; max-width: 100%; }
  .assistant code { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; }
  .assistant :not(pre) > code { background: #8882; padding: 0 4px; border-radius: 4px; }
  .assistant a { color: var(--accent); }
  .tool { align-self: flex-start; max-width: min(760px, 90%); min-width: 0; font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, monospace; border-left: 3px solid var(--line); padding: 2px 10px; overflow-wrap: anywhere; }
  .tool .call { color: var(--accent); }
  .tool .result { color: var(--muted); white-space: pre-wrap; }
  .tool.pending .call::after { content: " …"; }
  .tool.failed { border-color: var(--danger); }
  .tool.failed .result { color: var(--danger); }
  .tool details.sub { margin: 2px 0 2px 4px; padding-left: 8px; border-left: 2px solid var(--line); }
  .tool details.sub summary { cursor: pointer; color: var(--muted); }
  .tool.approval { border-color: #d97706; }
  .approval .buttons { display: flex; gap: 8px; margin: 4px 0 2px; }
  .approval button { font: inherit; padding: 1px 12px; border-radius: 6px; border: 1px solid; cursor: pointer; background: transparent; }
  .approval button.approve { background: var(--accent); border-color: var(--accent); color: #fff; }
  .approval button.deny { border-color: var(--danger); color: var(--danger); }
  .approval button:disabled { opacity: .45; cursor: default; }
  .meta { font-size: 12px; color: var(--muted); align-self: flex-start; }
  .error { align-self: stretch; color: var(--danger); background: #e5484d1a; border: 1px solid #e5484d66; border-radius: 8px; padding: 6px 10px; overflow-wrap: anywhere; }
  .error::before { content: "⚠ "; }
  #busy { display: flex; align-items: center; gap: 8px; padding: 4px 16px; font-size: 13px; color: var(--muted); }
  #busy[hidden] { display: none; }
  #busy .spinner { width: 12px; height: 12px; border: 2px solid var(--line); border-top-color: var(--accent); border-radius: 50%; animation: spin .8s linear infinite; }
  @keyframes spin { to { transform: rotate(360deg); } }
  form { display: flex; gap: 8px; padding: 12px 16px; border-top: 1px solid var(--line); }
  textarea { flex: 1; min-width: 0; font: inherit; padding: 8px 10px; resize: none; height: 46px; border-radius: 8px; }
  #send { font: inherit; padding: 0 20px; border-radius: 8px; border: 0; background: var(--accent); color: #fff; cursor: pointer; }
  #send.stop { background: var(--danger); }
`;

const SCRIPT = String.raw`
"use strict";
const $ = (id) => document.getElementById(id);
const log = $("log"), input = $("input"), keyField = $("key"), modelField = $("model"), sendButton = $("send");
const busy = $("busy"), busyText = $("busy-text");
let messages = [], running = null;

// The key lives in the field only (page memory), never in web storage.
keyField.onchange = () => loadModels();
const headers = () => Object.assign({ "content-type": "application/json" }, keyField.value ? { authorization: "Bearer " + keyField.value } : {});

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}
function add(cls, text, parent) {
  const node = el("div", cls, text);
  (parent || log).appendChild(node);
  log.scrollTop = log.scrollHeight;
  return node;
}
/** "1 iteration", "3 iterations". */
const count = (n, what) => n + " " + what + (n === 1 ? "" : "s");
/** How the server's answer names the calls a run waits for (server/map-events.ts, waitingFor). */
const WAITING = "Waiting for approval: ";
function showError(text) {
  const node = add("error", text);
  node.setAttribute("role", "alert");
  return node;
}
function setBusy(text) {
  busy.hidden = !text;
  if (text) busyText.textContent = text;
}
async function errorOf(res) {
  const body = await res.json().catch(() => ({}));
  return (body.error && body.error.message) || "HTTP " + res.status;
}
async function loadModels() {
  const res = await fetch("/v1/models", { headers: headers() });
  if (!res.ok) { showError("Models: " + await errorOf(res)); return; }
  modelField.replaceChildren();
  for (const m of (await res.json()).data) modelField.appendChild(el("option", "", m.id));
}

// Markdown, the safe subset: paragraphs, fenced code, headings, lists, inline code, bold,
// italic, and links to http(s) URLs. Every piece of model text lands in a text node.
const ITEM = /^\s*([-*+]|\d{1,9}[.)])\s+(.*)$/;
const INLINE = /(\x60+)([^\x60][\s\S]*?)\1(?!\x60)|\*\*(\S[\s\S]*?)\*\*|__(\S[\s\S]*?)__|\*(\S[\s\S]*?)\*|\b_(\S[\s\S]*?)_\b|\[([^\]\n]+)\]\((https?:\/\/[^\s()]+)\)|(https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"])/g;
function link(href) {
  const a = el("a");
  a.href = href; a.target = "_blank"; a.rel = "noopener noreferrer";
  return a;
}
function inline(text, into) {
  const re = new RegExp(INLINE.source, "g");
  let last = 0, m;
  while ((m = re.exec(text))) {
    if (m.index > last) into.appendChild(document.createTextNode(text.slice(last, m.index)));
    let node;
    if (m[1]) node = el("code", "", m[2]);
    else if (m[3] || m[4]) { node = el("strong"); inline(m[3] || m[4], node); }
    else if (m[5] || m[6]) { node = el("em"); inline(m[5] || m[6], node); }
    else if (m[7]) { node = link(m[8]); node.textContent = m[7]; }
    else { node = link(m[9]); node.textContent = m[9]; }
    into.appendChild(node);
    last = re.lastIndex;
  }
  if (last < text.length) into.appendChild(document.createTextNode(text.slice(last)));
}
function markdown(text, into) {
  const lines = text.split("\n");
  const nodes = [];
  let para = [];
  const flush = () => {
    if (para.length) { const p = el("p"); inline(para.join("\n"), p); nodes.push(p); para = []; }
  };
  for (let i = 0; i < lines.length;) {
    const line = lines[i];
    const fence = /^\s*(\x60{3,}|~{3,})\s*([\w+#.-]*)/.exec(line);
    if (fence) {
      flush();
      const code = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) code.push(lines[i]);
      i++;
      const pre = el("pre"), c = el("code", fence[2] ? "language-" + fence[2] : "", code.join("\n"));
      pre.appendChild(c); nodes.push(pre);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const item = ITEM.exec(line);
    if (heading) {
      flush();
      const h = el("h" + Math.min(heading[1].length + 2, 6)); inline(heading[2], h); nodes.push(h); i++;
    } else if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      const list = el(ordered ? "ol" : "ul");
      if (ordered && parseInt(item[1], 10) !== 1) list.start = parseInt(item[1], 10);
      for (let m = item; m && /\d/.test(m[1]) === ordered; m = i < lines.length ? ITEM.exec(lines[i]) : null) {
        const li = el("li"); inline(m[2], li); i++;
        for (; i < lines.length && /^\s{2,}\S/.test(lines[i]) && !ITEM.test(lines[i]); i++) inline(" " + lines[i].trim(), li);
        list.appendChild(li);
      }
      nodes.push(list);
    } else if (line.trim() === "") { flush(); i++; }
    else { para.push(line); i++; }
  }
  flush();
  into.replaceChildren(...nodes);
}

/** Yields the JSON of each SSE data event of a fetch response (comments and [DONE] skipped). */
async function* sse(res) {
  const reader = res.body.getReader(), decoder = new TextDecoder();
  let buffer = "";
  while (true) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) !== -1) {
      const lines = buffer.slice(0, cut).split("\n"); buffer = buffer.slice(cut + 2);
      const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
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
  const model = modelField.value || undefined;
  await exchange("/v1/chat/completions", { model, messages, stream: true }, model, false);
}

// A run stopped on approval_required: Approve and Deny on each waiting call's card, which a
// decision replaces; once all are decided, the note naming the waiting calls goes, the decisions
// go to the server and the run's continuation streams in.
function askApproval(runId, calls, model, cards, note) {
  const decisions = new Map();
  for (const call of calls) {
    let card = cards.get(call.id) && cards.get(call.id).card;
    if (!card) { card = add("tool"); add("call", "→ " + (call.agent ? call.agent + ": " : "") + call.name + " " + JSON.stringify(call.arguments), card); }
    card.classList.remove("pending");
    card.classList.add("approval");
    const buttons = add("buttons", undefined, card);
    const approve = el("button", "approve", "Approve"), deny = el("button", "deny", "Deny");
    approve.type = deny.type = "button";
    buttons.append(approve, deny);
    const decide = (approved) => {
      if (running || decisions.has(call.id)) return;
      decisions.set(call.id, approved);
      buttons.remove();
      add("result", approved ? "✓ Approved" : "✗ Denied", card);
      if (decisions.size < calls.length) return;
      if (note && note.before) markdown(note.before, note.bubble);
      else if (note) note.bubble.remove();
      const ids = [...decisions.keys()];
      exchange("/v1/runs/" + encodeURIComponent(runId) + "/approvals", {
        model, stream: true,
        approve: ids.filter((id) => decisions.get(id)), deny: ids.filter((id) => !decisions.get(id)),
      }, model, true);
    };
    approve.onclick = () => decide(true);
    deny.onclick = () => decide(false);
  }
}

// A sub-agent's event, folded under the call that delegated to it: its calls, their results and its answer.
function fold(ev, folds, cards) {
  let box = folds.get(ev.parentCallId);
  if (!box) {
    box = el("details", "sub");
    box.append(el("summary", undefined, ev.agent));
    (cards.get(ev.parentCallId) || add("tool")).appendChild(box);
    folds.set(ev.parentCallId, box);
  }
  if (ev.type === "tool_call") {
    const card = add("tool pending", undefined, box);
    add("call", "→ " + ev.name + " " + JSON.stringify(ev.arguments), card);
    cards.set(ev.id, card);
  } else if (ev.type === "tool_result") {
    const card = cards.get(ev.id) || add("tool", undefined, box);
    card.classList.remove("pending");
    if (ev.isError) card.classList.add("failed");
    add("result", (ev.isError ? "✗ " : "✓ ") + (ev.content.length > 400 ? ev.content.slice(0, 400) + "…" : ev.content), card);
  } else if (ev.type === "turn_complete") {
    add("result", ev.stopReason + ": " + (ev.output.length > 400 ? ev.output.slice(0, 400) + "…" : ev.output), box);
  } else if (ev.type === "approval_request") {
    add("call", "waits for approval: " + ev.name, box);
  }
}

// One streamed answer: a new turn, or (continued) a run going on after approvals.
async function exchange(path, body, model, continued) {
  running = new AbortController();
  sendButton.textContent = "Stop"; sendButton.classList.add("stop");
  setBusy("Thinking…");
  // One bubble per stretch of text between tool calls; its Markdown is rendered once a frame.
  let bubble = null, bubbleText = "", content = "", frame = 0;
  const render = () => { frame = 0; if (bubble) markdown(bubbleText, bubble); log.scrollTop = log.scrollHeight; };
  const tools = new Map(); // call id -> { card, name }, while the call runs
  const folds = new Map(); // a delegating call's id -> the fold its sub-agent's work goes in
  const cards = new Map(); // call id -> its card, sub-agents' calls included
  let waiting = null; // the turn_complete of a run that waits for approvals
  let note = null; // the bubble naming the calls that wait, and its text before that
  const runningTools = () => "Running " + [...new Set([...tools.values()].map((t) => t.name))].join(", ") + "…";
  try {
    const res = await fetch(path, {
      method: "POST", headers: headers(), signal: running.signal, body: JSON.stringify(body),
    });
    if (!res.ok) { showError("Error: " + await errorOf(res)); return; }
    for await (const chunk of sse(res)) {
      const delta = (chunk.choices && chunk.choices[0] && chunk.choices[0].delta) || {}, ev = chunk.agentloop;
      if (delta.content) {
        content += delta.content;
        if (!bubble) { bubble = add("msg assistant"); bubbleText = ""; }
        bubbleText = (bubbleText + delta.content).replace(/^\s+/, "");
        if (!frame) frame = requestAnimationFrame(render);
      }
      if (!ev) continue;
      if (ev.parentCallId) { fold(ev, folds, cards); continue; }
      if (ev.type === "tool_call") {
        render();
        const card = add("tool pending");
        add("call", "→ " + ev.name + " " + JSON.stringify(ev.arguments), card);
        tools.set(ev.id, { card, name: ev.name }); cards.set(ev.id, card); bubble = null;
        setBusy(runningTools());
      } else if (ev.type === "tool_result") {
        const card = tools.has(ev.id) ? tools.get(ev.id).card : add("tool");
        card.classList.remove("pending");
        if (ev.isError) card.classList.add("failed");
        const shown = ev.content.length > 400 ? ev.content.slice(0, 400) + "…" : ev.content;
        add("result", (ev.isError ? "✗ " : "✓ ") + shown + " (" + ev.durationMs + " ms)", card);
        tools.delete(ev.id);
        setBusy(tools.size ? runningTools() : "Thinking…");
      } else if (ev.type === "error") {
        showError("Error: " + ev.message);
      } else if (ev.type === "turn_complete") {
        const tokens = ev.usage.inputTokens + ev.usage.outputTokens;
        add("meta", ev.stopReason + " · " + count(ev.iterations, "iteration") + " · " + count(tokens, "token"));
        if (ev.pendingApprovals && ev.pendingApprovals.length) {
          waiting = ev;
          // The note naming the waiting calls is for this moment: it goes once they are decided.
          const at = bubbleText.lastIndexOf(WAITING);
          if (bubble && at !== -1) note = { bubble, before: bubbleText.slice(0, at).trim() };
        }
      }
    }
  } catch (error) {
    if (error.name === "AbortError") add("meta", "Stopped.");
    else showError("Error: " + error.message);
  } finally {
    if (frame) cancelAnimationFrame(frame);
    render();
    const last = messages[messages.length - 1];
    // The conversation keeps what the model said, not the note about the calls that wait.
    if (waiting && content.lastIndexOf(WAITING) !== -1) content = content.slice(0, content.lastIndexOf(WAITING)).trim();
    if (content && continued && last && last.role === "assistant") last.content += "\n\n" + content;
    else if (content) messages.push({ role: "assistant", content });
    running = null;
    setBusy("");
    sendButton.textContent = "Send"; sendButton.classList.remove("stop");
    input.focus();
  }
  if (waiting) askApproval(waiting.runId, waiting.pendingApprovals, model, tools, note);
}

$("form").onsubmit = (e) => { e.preventDefault(); if (running) running.abort(); else send(); };
input.addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); } });
$("reset").onclick = () => { if (running) running.abort(); messages = []; log.replaceChildren(); };
loadModels();
input.focus();
`;

/** The page's icon, a loop: inline in the page (no request), and at `/favicon.ico` for what asks there anyway. */
export const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="5.5" fill="none" stroke="#2563eb" stroke-width="2.5"/></svg>';
const FAVICON = `data:image/svg+xml,${encodeURIComponent(FAVICON_SVG)}`;

const hash = (text: string) => `'sha256-${createHash("sha256").update(text).digest("base64")}'`;

/** The page's Content-Security-Policy: its own inline script and style (by hash) and calls to its own origin, nothing else. */
export const WEB_PAGE_CSP = [
  "default-src 'none'",
  `script-src ${hash(SCRIPT)}`,
  `style-src ${hash(STYLE)}`,
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

export const WEB_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>agentloop</title>
<link rel="icon" href="${FAVICON}">
<style>${STYLE}</style>
</head>
<body>
<header>
  <h1>agentloop</h1>
  <select id="model" aria-label="model"></select>
  <input id="key" type="password" placeholder="API key (if required)" aria-label="API key" autocomplete="off">
  <button id="reset" type="button">New chat</button>
</header>
<main id="log" aria-live="polite"></main>
<div id="busy" role="status" hidden><span class="spinner"></span><span id="busy-text"></span></div>
<form id="form">
  <textarea id="input" placeholder="Message the agent" title="Enter sends, Shift+Enter breaks the line" aria-label="message"></textarea>
  <button id="send" type="submit">Send</button>
</form>
<script>${SCRIPT}</script>
</body>
</html>
`;
