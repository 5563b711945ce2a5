// The web inbox: the caller's waiting items, one session's pauses and live events.
// Everything shown comes from the model, tools or other people: it is untrusted and
// is only ever put on the page as text (textContent), never parsed as HTML.
"use strict";

const TOKEN_KEY = "hitl-api-token";
const INBOX_EVERY_MS = 5000;
// `signedIn` counts sign-ins: an answer that arrives after its person signed out belongs to nobody.
// `csrf`: set while signed in through the organisation's sign-in (an HttpOnly cookie the page never
// reads), sent with every request; with an API token instead, the token goes in Authorization.
const state = { session: null, source: null, lastEventId: null, inboxTimer: null, signedIn: 0, csrf: null, person: null,
                // The rows ticked, each with the arguments' digest its row showed when ticked: a call
                // whose arguments changed since is refused, not decided on what was not seen.
                selected: new Map(), filters: "", shown: [],
                // The calls this page has shown a card of, for this session: a refresh that another
                // event set off may take a settled card away before its pause_settled arrives.
                cardsShown: new Set() };

const $ = (id) => document.getElementById(id);

function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function token() { return sessionStorage.getItem(TOKEN_KEY); }
function signedInNow() { return Boolean(token() || state.csrf); }

async function api(method, path, body) {
  const asked = state.signedIn;
  const response = await fetch(path, {
    method,
    headers: { ...(state.csrf ? { "X-CSRF-Token": state.csrf } : { "Authorization": `Bearer ${token()}` }),
               ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch (_) { /* no body */ }
  // Asked for someone who has signed out since: never settles, so nothing of theirs is drawn.
  if (asked !== state.signedIn) return new Promise(() => {});
  if (response.status === 401) signOut((state.csrf ? "Your sign-in has ended: " : "That token was refused: ") + reason(data));
  return { ok: response.ok, status: response.status, data };
}

function reason(data) {
  if (!data) return "no reason given";
  if (typeof data.detail === "string") return data.detail;
  return JSON.stringify(data.detail ?? data);
}

const path = (...parts) => "/" + parts.map(encodeURIComponent).join("/");
// A sub-agent's call, listed by its root: the agents that asked, then for whom.
const askedBy = (item) => {
  const person = item.requested_by || "someone unnamed";
  return item.path && item.path.length ? `${item.path.join(" › ")}, for ${person}` : person;
};

// ------------------------------------------------------------------ sign in

// Signing out leaves nothing of the person on the page: no token, no stream, no card, row or event.
function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  // The server ends the session the cookie names and clears the cookie.
  if (state.csrf) fetch("/auth/sign-out", { method: "POST", headers: { "X-CSRF-Token": state.csrf } });
  state.csrf = null;
  state.signedIn += 1;
  closeStream();
  clearInterval(state.inboxTimer);
  Object.assign(state, { session: null, lastEventId: null, inboxTimer: null, person: null, filters: "", shown: [] });
  state.selected.clear();
  $("bulk-confirm").hidden = true;
  for (const id of ["items", "pending", "transcript", "events", "bulk-outcomes"]) $(id).replaceChildren();
  for (const id of ["count", "inbox-error", "session-id", "decision-result", "stream-state", "bulk-summary"]) $(id).textContent = "";
  $("empty").hidden = true;
  $("detail").hidden = true;
  $("main").hidden = true;
  $("sign-out").hidden = true;
  $("who").textContent = message || "";
  $("sign-in").hidden = false;
}

async function signIn() {
  state.signedIn += 1;
  $("sign-in").hidden = true;
  $("main").hidden = false;
  $("sign-out").hidden = false;
  const me = await api("GET", "/me");
  if (!me.ok) return;
  state.person = me.data.person;
  $("who").textContent = `signed in as ${me.data.person}`;
  await refreshInbox();
  state.inboxTimer = setInterval(refreshInbox, INBOX_EVERY_MS);
}

// ------------------------------------------------------------------ the inbox

function badge(text) { return el("span", { class: `badge ${text}` }, text); }

// Who asked is "verified" only when the session proves its people (a proof the API signed);
// anything else is what a caller said: "asserted". An item that does not say is asserted.
function trustBadge(item) { return badge(item.verified === true ? "verified" : "asserted"); }

// A deadline as a person reads it: "in 42 s", "in 5 min", "in 23 h", "in 3 d", or "overdue".
function relativeDeadline(deadline, now = Date.now()) {
  const seconds = (new Date(deadline).getTime() - now) / 1000;
  if (!(seconds > 0)) return "overdue";
  if (seconds >= 172800) return `in ${Math.floor(seconds / 86400)} d`;
  if (seconds >= 3600) return `in ${Math.floor(seconds / 3600)} h`;
  if (seconds >= 60) return `in ${Math.floor(seconds / 60)} min`;
  return `in ${Math.ceil(seconds)} s`;
}

// A moment as the person's own clock shows it, with the day: a deadline may be days away.
function clock(moment) {
  return new Date(moment).toLocaleString([], { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" });
}

function age(seconds) {
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (seconds >= size) return `${Math.floor(seconds / size)}${unit}`;
  }
  return `${Math.floor(seconds)}s`;
}

function callText(item) {
  if (item.kind === "question") return `? ${item.question || ""}`;
  const args = Object.entries(item.args || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ");
  return `${item.tool}(${args})${item.args_truncated ? " …" : ""}`;
}

async function refreshInbox() {
  if (!signedInNow()) return;
  const answer = await api("GET", "/inbox?claimed=true" + state.filters);
  if (!answer.ok) { $("inbox-error").textContent = reason(answer.data); return; }
  $("inbox-error").textContent = "";
  for (const due of document.querySelectorAll('[data-role="deadline"]')) {  // kept cards count down too
    due.textContent = relativeDeadline(due.title);
    due.classList.toggle("overdue", due.textContent === "overdue");
  }
  const claims = [...document.querySelectorAll('[data-role="claim"]')];
  if (claims.some((held) => new Date(held.title).getTime() <= Date.now())) refreshPending();  // a claim ended: Claim again
  const items = answer.data;
  state.shown = items;
  $("count").textContent = `(${items.length})`;
  $("empty").hidden = items.length > 0;
  $("items").replaceChildren(...items.map((item) => el("li", {},
    selectBox(item),
    el("button", {
      type: "button", class: "item" + (item.session_id === state.session ? " selected" : ""),
      "data-session": item.session_id, "data-call": item.call_id,
      onclick: () => openSession(item.session_id),
    },
    el("span", { class: `kind ${item.kind}` }, item.kind, item.destructive ? badge("destructive") : ""),
    el("span", { class: "call" }, callText(item)),
    el("span", { class: "meta asker" }, `asked by ${askedBy(item)} `, trustBadge(item)),
    el("span", { class: "meta" }, `${item.session_id} · waiting ${age(item.age_seconds)}`,
      item.deadline ? ` · due ${relativeDeadline(item.deadline)}` : "",
      item.claimed_by ? ` · claimed by ${item.claimed_by}` : "",
      item.required_approvals > 1 ? ` · ${item.approvals.length}/${item.required_approvals} approvals` : "")))));
}

// ------------------------------------------------------------------ many at once

const rowKey = (item) => `${item.session_id}\u0000${item.call_id}`;

function selectBox(item) {
  return el("input", {
    type: "checkbox", class: "select", "aria-label": `select ${item.call_id} of ${item.session_id}`,
    "data-session": item.session_id, "data-call": item.call_id, checked: state.selected.has(rowKey(item)),
    onchange: (changed) => { select(item, changed.target.checked); showSelection(); },
  });
}

function select(item, on) {
  if (on) state.selected.set(rowKey(item), { session_id: item.session_id, call_id: item.call_id, args_sha256: item.args_sha256 });
  else state.selected.delete(rowKey(item));
}

function showSelection() {
  const count = state.selected.size;
  $("approve-selected").disabled = $("reject-selected").disabled = count === 0;
  $("approve-selected").textContent = count ? `Approve selected (${count})` : "Approve selected";
  $("reject-selected").textContent = count ? `Reject selected (${count})` : "Reject selected";
  for (const box of document.querySelectorAll("#items input.select")) {
    box.checked = state.selected.has(`${box.dataset.session}\u0000${box.dataset.call}`);
  }
}

function filtersFromForm() {
  const query = new URLSearchParams();
  for (const [name, id] of [["tool", "filter-tool"], ["requested_by", "filter-requested-by"],
                            ["older_than", "filter-older-than"], ["session", "filter-session"]]) {
    const value = $(id).value.trim();
    if (value) query.append(name, value);
  }
  const pair = $("filter-arg").value.trim();
  if (pair) {
    const at = pair.indexOf("=");
    if (at < 1) { $("inbox-error").textContent = "write the argument filter as name=value"; return null; }
    query.append(`arg.${pair.slice(0, at).trim()}`, pair.slice(at + 1));
  }
  return query.toString() ? `&${query}` : "";
}

// Asks first, naming the count; nothing is sent until the person says yes.
function askToDecide(verb) {
  const count = state.selected.size;
  if (!count) return;
  const why = $("bulk-reason").value.trim();
  if (verb === "reject" && !why) { $("bulk-summary").textContent = "Say why you reject them (the model reads it)."; return; }
  $("bulk-question").textContent = `${verb === "approve" ? "Approve" : "Reject"} ${count} call${count === 1 ? "" : "s"}?`;
  $("bulk-confirm").hidden = false;
  $("bulk-yes").onclick = () => { $("bulk-confirm").hidden = true; decideSelected(verb, why); };
}

async function decideSelected(verb, why) {
  const rows = [...state.selected.values()].map((row) => ({ ...row, decision: verb, ...(verb === "reject" ? { reason: why } : {}) }));
  $("bulk-summary").textContent = `Deciding ${rows.length}…`;
  const answer = await api("POST", "/decisions", { decisions: rows });
  if (!answer.ok) { $("bulk-summary").textContent = `Nothing decided (${answer.status}): ${reason(answer.data)}`; return; }
  const decided = answer.data.filter((row) => row.outcome === "decided").length;
  $("bulk-summary").textContent = `${decided} decided, ${answer.data.length - decided} refused`;
  $("bulk-outcomes").replaceChildren(...answer.data.map((row) => el("li", {
    class: row.outcome, "data-session": row.session_id, "data-call": row.call_id, "data-outcome": row.outcome },
    `${row.session_id} ${row.call_id}: `, row.outcome === "decided" ? "decided" : `refused (${row.code}): ${row.reason}`)));
  state.selected.clear();
  showSelection();
  refreshInbox();
}

// ------------------------------------------------------------------ one session

async function openSession(sessionId) {
  if (state.session !== sessionId) {
    state.session = sessionId;
    state.lastEventId = null;
    state.cardsShown = new Set();
    $("events").replaceChildren();
    openStream();
  }
  $("detail").hidden = false;
  $("session-id").textContent = sessionId;
  $("decision-result").textContent = "";
  bringIntoView($("detail"));
  showPending();
  refreshInbox();
}

// On a phone the card sits under the list, maybe a screen or more below the row just tapped.
function bringIntoView(element) {
  const box = element.getBoundingClientRect();
  if (box.top < 0 || box.top > window.innerHeight * 0.5) element.scrollIntoView({ block: "start" });
}

function showPending() {
  $("transcript").hidden = true;
  $("pending").hidden = false;
  refreshPending();
}

async function refreshPending() {
  const sessionId = state.session;
  if (!sessionId) return;
  const answer = await api("GET", path("sessions", sessionId, "pending"));
  if (sessionId !== state.session) return;
  if (!answer.ok) { $("pending").replaceChildren(el("p", { class: "error" }, reason(answer.data))); return; }
  const items = answer.data;
  // A card that has not changed is kept as it is, so a refresh never wipes what a person is typing.
  const kept = new Map([...$("pending").querySelectorAll(".pending-item")].map((card) => [card.dataset.version, card]));
  $("pending").replaceChildren(...(items.length
    ? items.map((item) => kept.get(version(item)) || pendingCard(item))
    : [el("p", { class: "hint" }, "Nothing pending in this session.")]));
}

function version(item) {
  return JSON.stringify([item.call_id, item.args_sha256, item.approvals, holder(item), item.claim_until, item.approvers]);
}

function pendingCard(item) {
  state.cardsShown.add(String(item.call_id));
  const card = el("article", { class: `pending-item ${item.kind}`, "data-call": item.call_id, "data-version": version(item) });
  card.append(
    el("h4", {}, `${item.kind} · ${item.tool} · ${item.call_id}`, item.destructive ? badge("destructive") : ""),
    context(item),
  );
  if (item.kind === "approval") card.append(approvalForm(item));
  else if (item.kind === "question") card.append(questionForm(item));
  else card.append(reviewForm(item));
  card.append(claimRow(item));
  return card;
}

// Who holds the call now: a claim past its time holds nothing (workflows/pauses.py, `claimant`).
function holder(item) {
  return item.claimed_by && item.claim_until && new Date(item.claim_until).getTime() > Date.now() ? item.claimed_by : null;
}

// Claim when nobody holds the call; Release to its holder only; anyone else reads who holds it
// (the workflow refuses their claim, release and decision until the claim ends).
function claimRow(item) {
  const who = holder(item);
  if (who === null) {
    return el("div", { class: "claim" },
      el("button", { type: "button", class: "claim-button", onclick: () => decide(item, "claim", {}) }, "Claim"));
  }
  const until = new Date(item.claim_until).toLocaleTimeString();
  // `title`: the claim's end, so the inbox's timer redraws the card once it has passed.
  const held = (text) => el("span", { class: "hint", "data-role": "claim", title: item.claim_until }, text);
  if (who === state.person) {
    return el("div", { class: "claim" }, held(`claimed by you until ${until}`),
      el("button", { type: "button", class: "release-button", onclick: () => decide(item, "release", {}) }, "Release"));
  }
  return el("div", { class: "claim" }, held(`claimed by ${who} until ${until}`));
}

// What a person needs to decide well, each line only when the session says it: who asked (and whether
// that is proven), what they wrote, what the model said before the call, what the tool does, why a
// person is needed, and how long there is.
function context(item) {
  const rows = [];
  const row = (label, role, value, cls) => rows.push(el("dt", {}, label), el("dd", { "data-role": role, class: cls }, value));
  row("Asked by", "asked-by", [askedBy(item), " ", trustBadge(item)]);
  if (item.led_by) row("Their message", "led-by", item.led_by, "quote");
  if (item.model_text) row("The model said", "model-text", item.model_text, "quote");
  if ((item.description && item.kind !== "question") || item.destructive) {  // a question's tool is the question
    row("The tool", "description", [item.description || item.tool, item.destructive ? badge("destructive") : ""]);
  }
  if (item.because) row("Needs a person", "because", item.because);
  if (item.deadline) {
    const due = relativeDeadline(item.deadline);
    rows.push(el("dt", {}, "Deadline"),
      el("dd", { "data-role": "deadline", title: item.deadline, class: due === "overdue" ? "overdue" : null }, due));
    // What the session does then (the API words it from the workflow's rule), and what comes before it.
    if (item.at_deadline) row("If nobody decides", "at-deadline", `by ${clock(item.deadline)}: ${item.at_deadline}`);
  }
  if (item.escalate_at) {
    row("Escalation", "escalation", `at ${clock(item.escalate_at)}: the session's escalation contacts are told`
      + (item.approvers ? " and may decide it too" : ""));
  }
  if (item.remind_at) row("Reminder", "reminder", `at ${clock(item.remind_at)} (repeated while nobody decides)`);
  const rules = [];
  if (item.approvers) rules.push(`approvers: ${item.approvers.join(", ")}`);
  if (item.required_approvals > 1) rules.push(`${(item.approvals || []).length} of ${item.required_approvals} approvals`);
  if (item.four_eyes) rules.push("four eyes: the asker may not approve");
  if (rules.length) row("Rules", "rules", rules.join(" · "));
  return el("dl", { class: "context" }, ...rows);
}

// What a field is for is a label above it: a placeholder a phone's narrow field cuts says nothing.
function labelled(text, input, cls) {
  return el("label", { class: `above${cls ? " " + cls : ""}` }, el("span", { class: "hint" }, text), input);
}

function rejectRow(item, label) {
  const why = el("input", { type: "text", class: "reason" });
  return el("div", { class: "row" }, labelled("Reason (optional; the model reads it)", why),
    el("button", { type: "button", class: "reject", onclick: () => decide(item, "reject", why.value ? { reason: why.value } : {}) }, label));
}

const shown = (value) => JSON.stringify(value);

// The arguments a person changed, against the model's: [name, before, after], in the call's order.
function changedArgs(original, edited) {
  const names = [...new Set([...Object.keys(original), ...Object.keys(edited)])];
  return names.filter((name) => JSON.stringify(original[name]) !== JSON.stringify(edited[name]))
    .map((name) => [name, original[name], edited[name]]);
}

function diffView(changes) {
  return changes.map(([name, before, after]) => el("p", { "data-arg": name },
    el("span", { class: "name" }, `${name}: `),
    el("del", {}, before === undefined ? "(absent)" : shown(before)), " → ",
    el("ins", {}, after === undefined ? "(absent)" : shown(after))));
}

// What the button does, in the tool's own words (the API's `approving`: "deletes notes.txt now").
function consequence(button, item) {
  return item.approving ? el("p", { class: "consequence", "data-role": "approving" }, `${button}: ${item.approving}`) : "";
}

function approvalForm(item) {
  // One input per argument: strings as typed, anything else as JSON.
  const original = item.args || {};
  const inputs = Object.entries(original).map(([name, value]) => {
    const isText = typeof value === "string";
    const input = el(isText && value.length < 80 ? "input" : "textarea",
      { "data-arg": name, "data-json": isText ? null : "1", "aria-label": name });
    input.value = isText ? value : JSON.stringify(value, null, 2);
    return { name, input, isText };
  });
  const read = () => {
    const edited = {};
    for (const { name, input, isText } of inputs) {
      if (isText) { edited[name] = input.value; continue; }
      try { edited[name] = JSON.parse(input.value); } catch (error) { return { error: `${name}: not JSON (${error.message})` }; }
    }
    return { edited };
  };
  // An edit is shown as a diff against the model's arguments; an edited or a destructive call is
  // approved only once confirmed: no single click runs either.
  const diff = el("div", { class: "diff", "data-role": "diff", hidden: true });
  const approveButton = el("button", { type: "button", class: "approve" }, "Approve");
  const approving = consequence("Approve", item);
  const comment = el("input", { type: "text", class: "comment", "data-role": "comment" });
  const confirmText = el("span", {});
  const confirmButton = el("button", { type: "button", class: "approve confirm-approval", onclick: () => send(true) });
  const confirmRow = el("div", { class: "row confirm", hidden: true }, confirmText, confirmButton,
    el("button", { type: "button", class: "cancel-confirm", onclick: () => { confirmRow.hidden = true; } }, "Not yet"));
  const askToConfirm = (edited) => {
    const destructive = item.destructive ? `${item.tool} is destructive. ` : "";
    confirmText.textContent = edited ? `${destructive}Run it with your edits (above) instead of the model's arguments?`
      : `${destructive}Run it now?`;
    confirmButton.textContent = edited ? "Confirm edited approval" : "Confirm approval";
    confirmRow.hidden = false;
  };
  // Absent means allowed; the operator's policy says false where it forbids it; several approvals are never remembered.
  const remember = item.remember_allowed !== false && !(item.required_approvals > 1)
    ? el("label", { class: "remember hint" }, el("input", { type: "checkbox", "data-role": "remember" }),
      `also approve later ${item.tool} calls ${item.requested_by ? item.requested_by + " asks for " : ""}in this session, for an hour`)
    : "";
  const refreshDiff = () => {
    const { edited, error } = read();
    const changes = edited ? changedArgs(original, edited) : [];
    diff.replaceChildren(...(error ? [el("p", { class: "error" }, error)]
      : changes.length ? [el("p", { class: "hint" }, "Your edits, against the model's arguments:"), ...diffView(changes)] : []));
    diff.hidden = !error && changes.length === 0;
    approveButton.textContent = changes.length ? "Approve with edits…" : item.destructive ? "Approve…" : "Approve";
    // The tool's words were said of the model's arguments: an edit runs it with others.
    if (approving) approving.textContent = changes.length
      ? `Approve with edits: runs ${item.tool} with your edited arguments (above) now` : `Approve: ${item.approving}`;
    return { edited, error, changes };
  };
  const send = (confirmed) => {
    const { edited, error, changes } = refreshDiff();
    if (error) { say(error, true); return; }
    if ((changes.length || item.destructive) && !confirmed) { askToConfirm(changes.length > 0); return; }
    const body = { expected_args_sha256: item.args_sha256 };
    if (changes.length) body.args = edited;
    if (comment.value.trim()) body.comment = comment.value.trim();
    if (remember && remember.querySelector("input").checked) body.remember = { scope: "tool", for_seconds: 3600 };
    decide(item, "approve", body);
  };
  approveButton.addEventListener("click", () => send(false));
  // A confirmation is of the arguments it was asked about: any later edit asks again.
  for (const { input } of inputs) input.addEventListener("input", () => { confirmRow.hidden = true; refreshDiff(); });
  return el("div", { class: "form" },
    item.args_truncated ? el("p", { class: "hint" }, "Arguments are long: shown from the session.") : "",
    ...inputs.map(({ name, input }) => el("label", {}, el("span", {}, name), input)),
    diff,
    remember,
    approving,
    el("div", { class: "row" }, labelled("Comment (optional; the model and the audit read it)", comment), approveButton),
    confirmRow,
    rejectRow(item, "Reject"));
}

function questionForm(item) {
  const parts = [el("p", { class: "question" }, item.question || "")];
  if (item.fields && item.fields.length) {
    const inputs = item.fields.map((field) => fieldInput(field));
    const submit = () => {
      const answer = {};
      for (const { field, read } of inputs) {
        const value = read();
        if (value !== null) answer[field.name] = value;
      }
      decide(item, "answer", { answer });
    };
    parts.push(...inputs.map(({ label }) => label),
      el("div", { class: "row" }, el("button", { type: "button", class: "answer", onclick: submit }, "Answer")));
  } else if (item.choices && item.choices.length) {
    parts.push(el("div", { class: "row choices" }, ...item.choices.map((choice) =>
      el("button", { type: "button", class: "choice", "data-choice": choice, onclick: () => decide(item, "answer", { answer: choice }) }, choice))));
  } else {
    const text = el("input", { type: "text", class: "free-answer" });
    parts.push(el("div", { class: "row" }, labelled("Your answer (the agent takes it as a fact)", text, "answer-label"),
      el("button", { type: "button", class: "answer", onclick: () => decide(item, "answer", { answer: text.value }) }, "Answer")));
  }
  parts.push(rejectRow(item, "Decline"));
  return el("div", { class: "form" }, ...parts);
}

function fieldInput(field) {
  // Form fields from the question's schema: name, type, choices, required, description.
  const type = field.type || "string";
  let input;
  if (type === "enum" || field.choices) {
    input = el("select", { "data-field": field.name },
      field.required === false ? el("option", { value: "" }, "") : "",
      ...(field.choices || []).map((choice) => el("option", { value: choice }, choice)));
  } else if (type === "boolean") {
    input = el("input", { type: "checkbox", "data-field": field.name });
  } else {
    // A date is typed as the session reads it, YYYY-MM-DD: Chromium's date input shows the locale's
    // mm/dd/yyyy beside a hint that says otherwise.
    const html = { number: "number", integer: "number" }[type] || "text";
    const isDate = type === "date";
    input = el("input", { type: html, "data-field": field.name, step: type === "number" ? "any" : null,
      required: field.required !== false, placeholder: isDate ? "YYYY-MM-DD" : null,
      pattern: isDate ? "\\d{4}-\\d{2}-\\d{2}" : null, inputmode: isDate ? "numeric" : null });
  }
  const read = () => {
    if (type === "boolean") return input.checked;
    if (input.value === "") return null;
    if (type === "number") return Number(input.value);
    if (type === "integer") return parseInt(input.value, 10);
    return input.value;
  };
  // Each field says its type, so a person knows "next friday" will not do for a date.
  const kindShown = type === "enum" || field.choices ? "one of" : type;
  const label = el("label", {}, el("span", {}, field.name + (field.required === false ? "" : " *"),
    el("span", { class: "field-type", "data-role": "field-type" }, kindShown)), input,
    field.description ? el("small", { class: "hint" }, field.description) : "");
  return { field, read, label };
}

function reviewForm(item) {
  const result = el("textarea", { class: "result", "aria-label": "result" });
  result.value = item.result || "";
  const pass = () => decide(item, "approve", result.value === (item.result || "") ? {} : { result: result.value });
  return el("div", { class: "form" },
    el("p", { class: "hint" }, "The tool ran; review its result before the model sees it (edit it to replace it)."),
    result,
    consequence("Pass result", item),
    el("div", { class: "row" }, el("button", { type: "button", class: "approve", onclick: pass }, "Pass result")),
    rejectRow(item, "Withhold"));
}

function say(text, isError) {
  $("decision-result").textContent = text;
  $("decision-result").className = isError ? "error" : "ok";
}

async function decide(item, verb, body) {
  const answer = await api("POST", path("sessions", state.session, "calls", item.call_id, verb), body);
  if (answer.ok) say(`${verb}: ${answer.data.outcome || answer.data.claimed_by || "accepted"}`, false);
  else say(`${verb} refused (${answer.status}): ${reason(answer.data)}`, true);
  refreshPending();
  refreshInbox();
}

// ------------------------------------------------------------------ transcript

async function showTranscript() {
  const answer = await api("GET", path("sessions", state.session, "transcript"));
  $("pending").hidden = true;
  $("transcript").hidden = false;
  if (!answer.ok) { $("transcript").replaceChildren(el("p", { class: "error" }, reason(answer.data))); return; }
  $("transcript").replaceChildren(...answer.data.map((message) => el("div", { class: `message ${message.role}` },
    el("strong", {}, message.role), " ",
    el("span", {}, message.content || ""),
    ...(message.tool_calls || []).map((call) => el("code", {}, ` → ${call.function.name}(${call.function.arguments})`)))));
}

// ------------------------------------------------------------------ live events

function closeStream() {
  if (state.source) state.source.close();
  state.source = null;
}

function describe(event) {
  const data = event.data || {};
  switch (event.type) {
    case "state": return `state: ${data.state}`;
    case "pause_opened": return `waiting: ${data.kind} of ${data.tool} (${data.call_id})`;
    case "pause_settled": return `${settledLine(data)}${data.reason ? ": " + data.reason : ""}`;
    case "tool_result": return `${data.tool || "result"} (${data.call_id}): ${data.content}`;
    case "vote": return `${data.call_id}: approval by ${data.by}`;
    case "answer": return `answer: ${data.text}`;
    case "message": return `message${data.by ? " from " + data.by : ""}: ${data.text}`;
    case "claimed": return `${data.call_id} claimed by ${data.by} until ${data.until}`;
    case "released": return `${data.call_id} released`;
    case "refused": return `refused ${data.signal}: ${data.reason}`;
    case "resync": return "some events were missed; the view was re-read";
    default: return `${event.type}: ${JSON.stringify(data)}`;
  }
}

const EVENT_TYPES = ["state", "pause_opened", "pause_settled", "tool_result", "answer", "message", "vote", "claimed", "released", "refused", "resync"];

async function openStream() {
  closeStream();
  const sessionId = state.session;
  const ticket = await api("POST", path("sessions", sessionId, "events", "ticket"));
  if (!ticket.ok || sessionId !== state.session) { $("stream-state").textContent = "not live: " + reason(ticket.data); return; }
  let url = ticket.data.url;
  if (state.lastEventId !== null) url += `&last_event_id=${encodeURIComponent(state.lastEventId)}`;
  closeStream();  // another openStream may have finished while this one waited for its ticket
  const source = new EventSource(url);
  state.source = source;
  source.onopen = () => { $("stream-state").textContent = "(live)"; };
  for (const type of EVENT_TYPES) source.addEventListener(type, (message) => onEvent(message, sessionId));
  source.addEventListener("end", (message) => {
    if (state.source !== source) return;
    const ended = JSON.parse(message.data);
    $("stream-state").textContent = ended.access_ended ? `(${ended.problem})` : "(session over)";
    closeStream();
    if (ended.access_ended) { refreshPending(); refreshInbox(); }
  });
  source.onerror = () => {
    $("stream-state").textContent = "(reconnecting…)";
    // The browser retries by itself with the same ticket; once that has expired, fetch a new one.
    if (source.readyState === EventSource.CLOSED && state.source === source) {
      setTimeout(() => { if (state.source === source && state.session === sessionId) openStream(); }, 1000);
    }
  };
}

// "call_1 approved by ana via slack": who settled a call, and through which door.
function settledLine(data) {
  return `${data.call_id} ${data.outcome}${data.by ? " by " + data.by : ""}${data.via ? " via " + data.via : ""}`;
}

function onEvent(message, sessionId) {
  if (sessionId !== state.session) return;
  const event = JSON.parse(message.data);
  const data = event.data || {};
  // A card on this page settled by someone else, or elsewhere (Slack, mail, the CLI): say so where
  // the card was, not only in the event list (this page's own decision says its own outcome).
  if (event.type === "pause_settled" && data.by !== state.person && state.cardsShown.has(String(data.call_id))) {
    say(settledLine(data), false);
  }
  if (event.type !== "resync") state.lastEventId = event.id;
  // Numbered by the event's own id (what Last-Event-ID names), in the row itself: a list marker sits
  // outside the scrolling box and lost its digits past 9.
  $("events").prepend(el("li", { "data-type": event.type, "data-id": event.id },
    el("span", { class: "event-id" }, event.id ?? ""), " ",
    el("time", {}, event.at ? new Date(event.at).toLocaleTimeString() : ""), " ",
    el("span", { class: "type" }, event.type), " ", el("span", { class: "text" }, describe(event))));
  if (event.type !== "tool_result") { refreshPending(); refreshInbox(); }
}

// ------------------------------------------------------------------ start

document.addEventListener("DOMContentLoaded", () => {
  $("token-form").addEventListener("submit", (submitted) => {
    state.csrf = null;
    submitted.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    signIn();
  });
  $("sign-out").addEventListener("click", () => signOut(""));
  $("show-pending").addEventListener("click", showPending);
  $("show-transcript").addEventListener("click", showTranscript);
  $("filters").addEventListener("submit", (submitted) => {
    submitted.preventDefault();
    const filters = filtersFromForm();
    if (filters === null) return;
    state.filters = filters;
    state.selected.clear();
    showSelection();
    refreshInbox();
  });
  $("select-all").addEventListener("change", (changed) => {
    for (const item of state.shown) select(item, changed.target.checked);
    showSelection();
  });
  $("approve-selected").addEventListener("click", () => askToDecide("approve"));
  $("reject-selected").addEventListener("click", () => askToDecide("reject"));
  $("bulk-no").addEventListener("click", () => { $("bulk-confirm").hidden = true; });
  if (token()) { signIn(); return; }
  fetch("/auth/session").then(async (answer) => {
    const data = await answer.json().catch(() => ({}));
    $("sso").hidden = !data.sign_in;
    if (answer.ok) { state.csrf = data.csrf; signIn(); return; }
    signOut("");
  });
});
