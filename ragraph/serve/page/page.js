// The page of `ragraph serve`: the compiled graphs, requests moving through them, a rolling
// timeline of engine and search work, and a box to ask a question. Plain script, no libraries,
// no CDN: every byte comes from this server. Streams are read with fetch (not EventSource) so
// an API key can go in the Authorization header.
"use strict";

const WINDOW_S = 20;
const TRACK_COLORS = { llm: "#1d4ed8", search: "#15803d", embed: "#0e7490" };
const $ = (id) => document.getElementById(id);
const page = {
  key: sessionStorage.getItem("ragraph-key") || "",
  shown: null,
  requests: new Map(), // rid -> {workflow, unit}
  spans: [], // {track, start, end} in server seconds
  now: 0, // the server's latest time seen, and when we saw it
  seenAt: performance.now(),
  finished: 0,
  moves: 0, // units completed in the shown graph, and engine spans seen (the page's own tally)
  spanCount: 0,
};

function headers(json) {
  const h = json ? { "Content-Type": "application/json" } : {};
  if (page.key) h.Authorization = "Bearer " + page.key;
  return h;
}

async function call(path, body) {
  const init = body === undefined ? { headers: headers(false) }
    : { method: "POST", headers: headers(true), body: JSON.stringify(body) };
  const response = await fetch(path, init);
  if (response.status === 401) {
    $("key-box").hidden = false;
    throw new Error("this server needs an API key");
  }
  if (!response.ok) {
    const text = await response.text();
    let message = text;
    try { message = JSON.parse(text).error.message; } catch (e) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

// Server-sent events of a response body: {event, data} as each block arrives.
async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { event, data: data.join("\n") };
    }
  }
}

async function showEngine() {
  const health = await (await call("/health")).json();
  const badge = health.simulated ? '<span class="sim">SIMULATED</span>' : "";
  $("engine").innerHTML = badge;
  $("engine").append(`engine: ${health.engine} · executor ${health.executor}`);
}

async function loadWorkflows() {
  const { workflows } = await (await call("/workflows")).json();
  for (const w of workflows) {
    const tab = document.createElement("button");
    tab.textContent = w.name;
    tab.dataset.workflow = w.name;
    tab.addEventListener("click", () => show(w.name));
    $("tabs").append(tab);
    const option = document.createElement("option");
    option.value = option.textContent = w.name;
    $("ask-workflow").append(option);
  }
  return workflows.map((w) => w.name);
}

async function show(name) {
  const w = await (await call("/workflows/" + encodeURIComponent(name))).json();
  $("viz-css").textContent = w.drawing_css;
  $("graph").innerHTML = w.drawing;
  $("graph").dataset.workflow = name;
  page.shown = name;
  for (const tab of $("tabs").children) tab.classList.toggle("on", tab.dataset.workflow === name);
  $("ask-workflow").value = name;
  highlight();
}

// Nodes of the shown graph that requests are at now, with how many.
function highlight() {
  const at = new Map();
  for (const r of page.requests.values()) {
    if (r.workflow === page.shown && r.unit) at.set(r.unit, (at.get(r.unit) || 0) + 1);
  }
  for (const node of document.querySelectorAll("#graph g.node")) {
    const n = at.get(node.dataset.node) || 0;
    node.classList.toggle("live", n > 0);
    let hits = node.querySelector("text.hits");
    if (n > 0 && !hits) {
      const box = node.getBBox();
      hits = document.createElementNS("http://www.w3.org/2000/svg", "text");
      hits.setAttribute("class", "hits");
      hits.setAttribute("x", box.x + box.width - 4);
      hits.setAttribute("y", box.y + 10);
      hits.setAttribute("text-anchor", "end");
      node.append(hits);
    }
    if (hits) hits.textContent = n > 0 ? "×" + n : "";
  }
  const busy = new Map();
  for (const r of page.requests.values()) busy.set(r.workflow, (busy.get(r.workflow) || 0) + 1);
  for (const tab of $("tabs").children) {
    const n = busy.get(tab.dataset.workflow) || 0;
    tab.innerHTML = "";
    tab.append(tab.dataset.workflow);
    if (n) tab.insertAdjacentHTML("beforeend", `<span class="busy">${n}</span>`);
  }
}

function listRequests() {
  const list = $("requests");
  list.innerHTML = "";
  for (const [rid, r] of [...page.requests].slice(-40)) {
    const item = document.createElement("li");
    item.textContent = `${rid.slice(-8)} ${r.workflow} · ${r.unit || "queued"}`;
    list.append(item);
  }
  $("counts").textContent = `${page.requests.size} in flight · ${page.finished} finished`;
}

function onLive(kind, item) {
  if (kind === "request") page.requests.set(item.rid, { workflow: item.workflow, unit: null });
  else if (kind === "unit" && page.requests.has(item.rid)) {
    page.requests.get(item.rid).unit = item.unit;
    if (item.workflow === page.shown) $("graph").dataset.moves = ++page.moves;
  }
  else if (kind === "done") {
    page.requests.delete(item.rid);
    page.finished += 1;
    $("finished").textContent = `last: ${item.workflow} ${item.status} in ${item.latency_s.toFixed(2)} s`;
  } else if (kind === "span") {
    page.spans.push(item);
    $("timeline").dataset.spans = ++page.spanCount;
    if (item.end > page.now) { page.now = item.end; page.seenAt = performance.now(); }
    const horizon = page.now - WINDOW_S;
    while (page.spans.length && page.spans[0].end < horizon) page.spans.shift();
    return;
  }
  highlight();
  listRequests();
}

// Follows the live feed for good (reconnecting); `subscribed` runs once it is first on.
async function followLive(subscribed) {
  for (;;) {
    try {
      for await (const ev of events(await call("/live"))) {
        if (ev.event === "hello") subscribed();
        else onLive(ev.event, JSON.parse(ev.data));
      }
    } catch (err) {
      console.warn("live feed:", err.message);
    }
    await new Promise((resolve) => setTimeout(resolve, 2000)); // reconnect
  }
}

function drawTimeline() {
  const canvas = $("timeline");
  const width = (canvas.width = canvas.clientWidth);
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, width, canvas.height);
  const now = page.now + (performance.now() - page.seenAt) / 1000;
  const tracks = [...new Set(page.spans.map((s) => s.track))].sort();
  const lane = Math.min(40, (canvas.height - 16) / Math.max(tracks.length, 1));
  const x = (t) => 90 + ((t - (now - WINDOW_S)) / WINDOW_S) * (width - 90);
  ctx.font = "12px system-ui, sans-serif";
  tracks.forEach((track, i) => {
    ctx.fillStyle = "#374151";
    ctx.fillText(track, 4, i * lane + lane / 2 + 4);
  });
  for (const s of page.spans) {
    const i = tracks.indexOf(s.track);
    ctx.fillStyle = TRACK_COLORS[s.track] || "#6b7280";
    ctx.globalAlpha = 0.55;
    ctx.fillRect(x(s.start), i * lane + 3, Math.max(x(s.end) - x(s.start), 1), lane - 6);
  }
  ctx.globalAlpha = 1;
}

async function ask(workflow, question) {
  const answer = $("answer");
  answer.textContent = "";
  answer.dataset.state = "streaming";
  $("answer-meta").textContent = "";
  const started = performance.now();
  try {
    const response = await call("/v1/chat/completions", {
      model: workflow, stream: true, stream_options: { include_usage: true },
      messages: [{ role: "user", content: question }],
    });
    for await (const ev of events(response)) {
      if (ev.data === "[DONE]") break;
      const chunk = JSON.parse(ev.data);
      if (chunk.error) throw new Error(chunk.error.message);
      const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
      if (delta && delta.content) answer.append(delta.content);
      if (chunk.usage) {
        const seconds = ((performance.now() - started) / 1000).toFixed(2);
        $("answer-meta").textContent = `${chunk.usage.total_tokens} tokens · ${seconds} s`;
      }
    }
    answer.dataset.state = "done";
  } catch (err) {
    answer.textContent = err.message;
    answer.dataset.state = "error";
  }
}

async function main() {
  $("key").value = page.key;
  $("key").addEventListener("change", () => {
    page.key = $("key").value;
    sessionStorage.setItem("ragraph-key", page.key);
    location.reload();
  });
  $("ask-form").addEventListener("submit", (e) => {
    e.preventDefault();
    ask($("ask-workflow").value, $("ask-question").value);
  });
  $("window").textContent = WINDOW_S;
  setInterval(drawTimeline, 250);
  try {
    await showEngine();
    const names = await loadWorkflows();
    const params = new URLSearchParams(location.search);
    const first = names.includes(params.get("workflow")) ? params.get("workflow") : names[0];
    await show(first);
    await new Promise((subscribed) => followLive(subscribed));
    document.body.dataset.ready = "yes";
    if (params.get("ask")) {  // a link that asks: ?workflow=hyde&ask=Who...
      $("ask-question").value = params.get("ask");
      await ask(first, params.get("ask"));
    }
  } catch (err) {
    $("engine").textContent = err.message;
  }
}

main();
