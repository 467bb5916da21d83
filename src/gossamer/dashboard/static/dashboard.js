// The dashboard page: renders each status event of /events (server-sent events; the page
// never polls) and sends the stop button's POST with the page's CSRF token.
"use strict";

const csrf = document.querySelector('meta[name="gossamer-csrf"]').content;
const fmt = new Intl.NumberFormat("en");

function num(v, digits) {
  if (v === null || v === undefined) return "-";
  if (typeof v === "number" && digits !== undefined) return v.toFixed(digits);
  return typeof v === "number" ? fmt.format(v) : String(v);
}

function text(v) {
  return v === null || v === undefined ? "-" : String(v);
}

function bytes(v) {
  if (v === null || v === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + " " + units[i];
}

function duration(s) {
  if (s === null || s === undefined) return "-";
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = Math.floor(s % 60);
  return (h ? h + "h " : "") + (h || m ? m + "m " : "") + sec + "s";
}

function set(root, field, text) {
  const el = document.querySelector(`#${root} [data-field="${field}"]`);
  if (el) el.textContent = text;
}

function render(s) {
  const c = s.crawl, t = s.totals, fr = s.frontier || {}, g = s.graph || {};
  document.getElementById("crawl-id").textContent = c.id;
  document.getElementById("crawl-state").textContent = c.state;
  document.getElementById("last-event").textContent = new Date().toLocaleTimeString();
  const src = s.source.kind === "cluster" ? "cluster " + s.source.redis : s.source.directory;
  set("coordinator", "source", src);
  set("coordinator", "pid", text(c.pid));
  set("coordinator", "elapsed", duration(c.elapsed_s));
  set("coordinator", "pages_per_s", num(t.pages_per_s, 1));
  set("coordinator", "workers", num(t.workers));
  set("coordinator", "bytes", bytes(t.bytes));
  set("coordinator", "max_pages", num(c.max_pages));
  set("coordinator", "pages", num(t.pages));
  set("coordinator", "errors", num(t.errors));
  set("coordinator", "queued", num(fr.queued));
  const known = fr.queued === undefined ? null
    : fr.queued + (fr.leased || 0) + (fr.done || 0) + (fr.failed || 0);
  set("coordinator", "known", num(known));
  set("coordinator", "end_reason", c.end_reason || "-");
  for (const k of ["nodes", "edges", "scc_count", "largest_scc", "dangling"]) set("graph", k, num(g[k]));
  set("graph", "diameter", g.diameter !== undefined && g.diameter !== null ? num(g.diameter)
    : (g.diameter_lower_bound !== undefined && g.diameter_lower_bound !== null ? "≥" + num(g.diameter_lower_bound) : "-"));
  set("graph", "average_distance", num(g.average_distance, 2));
  set("graph", "updated", g.final ? "final" : (g.updated_at || "-"));
  const body = document.getElementById("workers");
  const rows = [];
  for (const w of s.workers) {
    const tr = document.createElement("tr");
    tr.dataset.worker = w.id;
    const hosts = (w.hosts || []).slice(0, 3).join(", ") + ((w.hosts || []).length > 3 ? " …" : "");
    const beat = w.beat_age_s === null || w.beat_age_s === undefined ? "-" : w.beat_age_s + " s ago";
    for (const v of [w.id, w.machine, text(w.pid), w.state, num(w.pages), num(w.pages_per_s, 1),
                     num(w.errors), hosts, beat]) {
      const td = document.createElement("td");
      td.textContent = v;
      tr.appendChild(td);
    }
    rows.push(tr);
  }
  body.replaceChildren(...rows);
  const running = c.state === "running";
  document.getElementById("stop").disabled = !running;
}

function connect() {
  const conn = document.getElementById("connection");
  const events = new EventSource("/events");
  events.addEventListener("status", (e) => { conn.textContent = "live"; conn.className = ""; render(JSON.parse(e.data)); });
  events.onerror = () => { conn.textContent = "disconnected, retrying"; conn.className = "down"; };
}

document.getElementById("stop").addEventListener("click", async () => {
  if (!window.confirm("Stop the crawl? Workers finish their batches and exit.")) return;
  const message = document.getElementById("message");
  try {
    const r = await fetch("/api/stop", { method: "POST", headers: { "X-Gossamer-CSRF": csrf } });
    const body = await r.json();
    message.textContent = r.ok ? body.message : "refused: " + body.error;
  } catch (err) {
    message.textContent = "stop failed: " + err;
  }
});

connect();
