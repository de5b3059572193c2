// The queue dashboard: reads /api/admin/queues/data with the admin key kept in sessionStorage, renders both
// queues (counts per state, failed and recent jobs) and sends retry/remove actions. Text only goes into the
// page through textContent, never as HTML, so job payloads cannot inject markup.
"use strict";

const KEY = "wagate.adminKey";
const STATES = ["waiting", "active", "delayed", "completed", "failed"];
let timer = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function say(text, isError) {
  const box = document.getElementById("message");
  box.textContent = text || "";
  box.className = isError ? "error" : "";
}

function askForKey() {
  document.getElementById("login").hidden = false;
  document.getElementById("queues").replaceChildren();
  document.getElementById("key").focus();
}

async function api(method, path) {
  const key = sessionStorage.getItem(KEY);
  if (!key) {
    askForKey();
    return null;
  }
  const response = await fetch(path, { method, headers: { "X-API-Key": key, Accept: "application/json" } });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401 || response.status === 403) {
    sessionStorage.removeItem(KEY);
    say(body.message || "This key may not open the queue dashboard.", true);
    askForKey();
    return null;
  }
  if (!response.ok) {
    say(body.message || ("HTTP " + response.status), true);
    return null;
  }
  return body;
}

function when(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "";
}

function jobTable(queue, jobs, emptyText) {
  if (!jobs.length) return el("p", { class: "muted" }, emptyText);
  const head = el("tr", {}, ...["Job", "State", "Event", "Attempts", "Last error", "Updated", "Payload", ""].map((h) => el("th", {}, h)));
  const rows = jobs.map((job) => {
    const actions = el("td", {});
    if (job.state === "failed") {
      const retry = el("button", { type: "button", "data-action": "retry", "data-job": job.id }, "Retry");
      retry.addEventListener("click", () => act("POST", queue, job.id, "retry"));
      actions.append(retry, " ");
    }
    const remove = el("button", { type: "button", "data-action": "remove", "data-job": job.id }, "Remove");
    remove.addEventListener("click", () => act("DELETE", queue, job.id, "remove"));
    actions.append(remove);
    const code = job.lastStatusCode ? "HTTP " + job.lastStatusCode : "";
    const error = job.lastError && code && !job.lastError.includes(code) ? job.lastError + " (" + code + ")" : (job.lastError || "");
    const payload = el("details", {}, el("summary", {}, "show"), el("pre", {}, JSON.stringify(job.payload, null, 2)));
    return el("tr", { "data-job": job.id, "data-state": job.state },
      el("td", {}, el("code", {}, job.id)),
      el("td", { class: "state-" + job.state }, job.state),
      el("td", {}, job.event || ""),
      el("td", {}, job.attempts),
      el("td", {}, error),
      el("td", {}, when(job.updatedAt || job.createdAt)),
      el("td", {}, payload),
      actions);
  });
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows));
}

function render(data) {
  const cards = data.queues.map((q) => el("section", { class: "queue", id: "queue-" + q.name },
    el("h2", {}, q.name, " ", el("span", { class: "muted" }, "(state read from " + q.source + ")")),
    el("p", { class: q.producerBuilt ? "muted fed-by" : "fed-by not-built" }, q.fedBy),
    el("div", { class: "counts" }, ...STATES.map((s) => el("span", { class: "count " + s, "data-state": s }, s, el("b", {}, q.counts[s])))),
    el("h3", {}, "Failed"),
    jobTable(q.name, q.failed, "No failed jobs."),
    el("h3", {}, "Recent"),
    jobTable(q.name, q.recent, "No jobs yet.")));
  document.getElementById("queues").replaceChildren(...cards);
  document.getElementById("updated").textContent = "updated " + data.generatedAt;
}

async function load() {
  const data = await api("GET", "/api/admin/queues/data");
  if (data) {
    document.getElementById("login").hidden = true;
    render(data);
  }
}

async function act(method, queue, id, verb) {
  const path = "/api/admin/queues/" + encodeURIComponent(queue) + "/jobs/" + encodeURIComponent(id) + (verb === "retry" ? "/retry" : "");
  const done = await api(method, path);
  if (done) {
    say("Job " + id + " " + done.action + ".");
    await load();
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = document.getElementById("key").value.trim();
    if (key) {
      sessionStorage.setItem(KEY, key);
      document.getElementById("key").value = "";
      say("");
      load();
    }
  });
  document.getElementById("refresh").addEventListener("click", load);
  document.getElementById("forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    askForKey();
  });
  load();
  timer = setInterval(() => {
    if (sessionStorage.getItem(KEY)) load();
  }, 3000);
});
