// How people decide (GET /stats), for operators: one table per tool, policy rule, door and person.
// Tools and people are names others chose: they are only ever put on the page as text (textContent).
"use strict";

const TOKEN_KEY = "hitl-api-token";  // the inbox's: signed in there, in this tab
const state = { csrf: null };
const $ = (id) => document.getElementById(id);
const COLUMNS = [["requested", "requested"], ["approved", "approved"], ["edited", "edited"], ["rejected", "rejected"],
                 ["timed_out", "timed out"], ["decide_seconds_p50", "p50 s"], ["decide_seconds_p95", "p95 s"]];

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== undefined && value !== null && value !== false) node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function headers() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return state.csrf ? { "X-CSRF-Token": state.csrf } : { "Authorization": `Bearer ${token}` };
}

function cell(value) {
  if (value === null || value === undefined) return "-";
  return typeof value === "number" && !Number.isInteger(value) ? value.toFixed(1) : String(value);
}

function table(title, rows, flagRubberStamps) {
  const head = el("tr", {}, el("th", {}, title), COLUMNS.map(([, label]) => el("th", {}, label)),
                  flagRubberStamps ? el("th", {}, "rubber stamp") : null);
  const body = Object.entries(rows).map(([name, figures]) => el(
    "tr", { class: flagRubberStamps && figures.rubber_stamp ? "rubber-stamp" : null },
    el("td", {}, name), COLUMNS.map(([key]) => el("td", {}, cell(figures[key]))),
    flagRubberStamps ? el("td", {}, figures.rubber_stamp ? el("span", { class: "badge rubber-stamp" }, "rubber stamp") : "") : null,
  ));
  return el("table", { class: "figures", "data-section": title }, el("thead", {}, head), el("tbody", {}, body));
}

function isoOf(input) {
  return input.value ? new Date(input.value + "Z").toISOString() : "";
}

async function show() {
  const query = new URLSearchParams();
  for (const [name, value] of [["since", isoOf($("since"))], ["until", isoOf($("until"))],
                               ["tool", $("tool").value.trim()], ["person", $("person").value.trim()]]) {
    if (value) query.set(name, value);
  }
  $("stats-error").textContent = "";
  $("summary").textContent = "reading the sessions' audits…";
  const response = await fetch(`/stats?${query}`, { headers: headers() });
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    $("summary").textContent = "";
    $("tables").replaceChildren();
    $("stats-error").textContent = (data && typeof data.detail === "string") ? data.detail : `error ${response.status}`;
    return;
  }
  const rubber = data.rubber_stamp;
  $("summary").textContent = `${data.since} until ${data.until}, from ${data.sessions} sessions`
    + (data.complete ? "" : " (more were active: only these were read)")
    + `. Rubber stamp: at least ${rubber.min_decisions} decisions, ${Math.round(rubber.approve_rate * 100)}% approved`
    + ` unchanged, half in ${rubber.median_seconds} s or less.`;
  $("tables").replaceChildren(
    table("total", { all: data.total }, false), table("tool", data.tools, false), table("rule", data.rules, false),
    table("door", data.doors, false), table("person", data.people, true));
}

async function start() {
  if (!sessionStorage.getItem(TOKEN_KEY)) {
    const answer = await fetch("/auth/session");
    const data = await answer.json().catch(() => ({}));
    if (!answer.ok) { $("not-signed-in").hidden = false; return; }
    state.csrf = data.csrf;
  }
  const me = await fetch("/me", { headers: headers() });
  if (!me.ok) { $("not-signed-in").hidden = false; return; }
  $("who").textContent = `signed in as ${(await me.json()).person}`;
  $("period").hidden = false;
  await show();
}

document.addEventListener("DOMContentLoaded", () => {
  $("period").addEventListener("submit", (submitted) => { submitted.preventDefault(); show(); });
  start();
});
