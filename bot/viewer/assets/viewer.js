// agentos run viewer: follows the session's event stream (Server-Sent
// Events) so the page updates live, and survives reconnects: every event
// carries its sequence number as the SSE id, the browser resends the last
// one (Last-Event-ID) when it reconnects by itself, and this script
// reconnects with ?after=<last seen> when the browser gives up. A row is
// added only for a sequence number above the last one shown, so a replayed
// event never duplicates a row. Text from events is set with textContent
// only; the server-rendered parts (timeline, approvals, cost, status) are
// fetched as HTML that the server escaped.
(function () {
  "use strict";
  var root = document.getElementById("run");
  if (!root || root.dataset.live !== "true") { return; }
  var sid = root.dataset.session;
  var last = parseInt(root.dataset.lastSeq, 10) || 0;
  var body = document.getElementById("events-body");
  var status = document.getElementById("live-status");
  var types = ["session.start", "session.close", "hook.fired", "skill.invoke", "skill.complete", "agent.transition",
    "llm.request", "llm.response", "tool.invoke", "tool.result", "tool.rejected", "tool.args_repaired",
    "role.output_repaired", "worker.report", "event.amended", "schema.violation", "run.started", "run.paused",
    "run.resumed", "run.completed", "run.failed", "output.delta", "output.message", "approval.requested",
    "approval.resolved", "artifact.emitted", "checkpoint.created", "turn.terminal", "workflow.started",
    "workflow.phase_advanced", "workflow.policy_gated", "workflow.completed", "workflow.aborted"];
  var es = null, retry = null, pending = null, ended = false;
  var maxRows = Math.max(parseInt(root.dataset.maxRows, 10) || 1000, body.rows.length);

  function say(text) { status.textContent = text; }

  function cell(tr, text) {
    var td = document.createElement("td");
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function addRow(seq, type, data) {
    var ev;
    try { ev = JSON.parse(data); } catch (e) { ev = { ts: "", actor: "", payload: data }; }
    var tr = document.createElement("tr");
    tr.id = "ev-" + seq;
    tr.dataset.seq = String(seq);
    cell(tr, String(seq)).className = "num";
    var t = cell(tr, "");
    var time = document.createElement("time");
    time.dateTime = ev.ts || "";
    time.textContent = (ev.ts || "").replace(/^.*T/, "").replace(/Z$/, "");
    t.appendChild(time);
    cell(tr, ev.actor || "");
    cell(tr, type);
    var td = cell(tr, "");
    var det = document.createElement("details");
    var sum = document.createElement("summary");
    sum.textContent = summary(type, ev.payload || {}) || "payload";
    var pre = document.createElement("pre");
    var text = JSON.stringify(ev.payload, null, 2) || "";
    if (text.length > 65536) { text = text.slice(0, 65536) + "\n… (truncated; reload for the full page)"; }
    pre.textContent = text;
    det.appendChild(sum);
    det.appendChild(pre);
    td.appendChild(det);
    body.appendChild(tr);
    // Keep the table as long as the server lists it (DefaultMaxRows), so a
    // page left open for hours does not grow without bound.
    while (body.rows.length > maxRows) { body.deleteRow(0); }
  }

  // summary mirrors the server's one-line summaries of the common events
  // (RowOf); the text is only ever set with textContent.
  function summary(type, p) {
    var s = "";
    switch (type) {
      case "session.start": case "run.started": s = p.prompt || ""; break;
      case "llm.response":
        var r = p.response || {}, u = r.usage || {};
        s = (r.model || "") + " · " + (r.finish_reason || "") + " · " + (u.input_tokens || 0) + " in / " + (u.output_tokens || 0) + " out tokens";
        break;
      case "tool.invoke": s = (p.tool || "") + " " + (p.call_id || ""); break;
      case "tool.result":
        var res = p.ok ? (p.result || {}) : ((p.error || {}).details || {});
        var cmd = p.tool === "test.run" || p.tool === "lint.run" || p.tool === "process.run";
        var exit = typeof res.exit_code === "number" ? res.exit_code : null;
        if (cmd && exit !== null && (exit !== 0 || res.passed === false || !p.ok)) { s = "failed: exit " + exit; }
        else if (cmd && exit !== null) { s = "passed: exit " + exit; }
        else { s = p.ok ? "ok" : "failed: " + ((p.error || {}).code || ""); }
        break;
      case "approval.requested": s = "approval " + (p.approval_id || "") + " for " + (p.tool || ""); break;
      case "approval.resolved": s = (p.decision || "") + " by " + (p.by || "") + (p.reason ? " (" + p.reason + ")" : ""); break;
      case "agent.transition": s = (p.from || "") + " → " + (p.to || ""); break;
      case "run.paused": s = "paused: " + (p.reason || ""); break;
      case "turn.terminal": s = (p.status || "") + (p.reason ? ": " + p.reason : ""); break;
    }
    s = String(s).replace(/\s+/g, " ");
    return s.length > 200 ? s.slice(0, 200) + "…" : s;
  }

  // refresh re-renders the server-side parts, at most every 400 ms.
  function refresh() {
    if (pending) { return; }
    pending = setTimeout(function () {
      pending = null;
      fetch("/runs/" + encodeURIComponent(sid) + "/parts", { credentials: "same-origin", headers: { "Accept": "application/json" } })
        .then(function (r) { if (!r.ok) { throw new Error("parts: " + r.status); } return r.json(); })
        .then(function (p) {
          ["status", "timeline", "evidence", "approvals", "cost"].forEach(function (k) {
            var el = document.getElementById("part-" + k);
            if (el && typeof p[k] === "string") { el.innerHTML = p[k]; }
          });
        })
        .catch(function () { /* the next event retries */ });
    }, 400);
  }

  function onEvent(e) {
    var seq = parseInt(e.lastEventId, 10);
    if (!(seq > last)) { return; } // seen already: no duplicate row
    last = seq;
    root.dataset.lastSeq = String(seq);
    addRow(seq, e.type, e.data);
    if (e.type !== "output.delta") { refresh(); }
    if (e.type === "session.close") {
      // The run has ended: stop following (reload the page to follow a
      // later run of the session).
      ended = true;
      es.close();
      say("the session's run has ended");
    }
  }

  function connect() {
    retry = null;
    if (es) { es.close(); }
    es = new EventSource("/v1/runs/" + encodeURIComponent(sid) + "/events?after=" + last);
    types.forEach(function (t) { es.addEventListener(t, onEvent); });
    es.onopen = function () { say("live"); };
    es.onerror = function () {
      if (es.readyState === EventSource.CLOSED) {
        if (ended) { say("the session's run has ended"); return; }
        say("disconnected; reconnecting…");
        if (!retry) { retry = setTimeout(connect, 2000); }
      } else {
        say("reconnecting…");
      }
    };
  }
  connect();
})();
