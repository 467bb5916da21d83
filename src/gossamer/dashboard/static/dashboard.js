// The dashboard page (docs/dashboard.md, "The page"). Everything live comes from two
// server-sent event streams: /events (one status object per change, at most every 0.5 s)
// and /events/log (batches of new log records). The page never polls: /api/history and
// /api/log are each read once, when the page opens (and the log again when its filter
// changes), to fill the chart and the log with what happened before.
// POSTs carry the page's CSRF token and a JSON body (the server's post_refused).
"use strict";

const csrf = document.querySelector('meta[name="gossamer-csrf"]').content;
const fmt = new Intl.NumberFormat("en");
const MAX_LOG_LINES = 500;       // the log pane keeps this many lines in the DOM
const MAX_RATE_POINTS = 1800;    // an hour of samples at one per 2 s
const $ = (id) => document.getElementById(id);
// the Setup form's first values as a crawl started now gets them (the settings model's
// defaults, and the dashboard's GOSSAMER_* environment), and its labels: the server's
// (_setup.py), never written here
const setupDefaults = JSON.parse($("setup-defaults").textContent);
// the crawl states in which it fetches: a status event then adds a point to the rate chart
const LIVE_STATES = new Set(["running", "stopping"]);

// what the tests (and a curious reader) can check without parsing the page
const page = window.gossamerPage = {
  statusEvents: 0, renderMs: null, lastHandledAt: null, lastStatusTime: null, logLines: 0,
  logWaiting: 0, logOnScreen: null, posts: [],
};

// ---- formatting ----------------------------------------------------------------------

function num(v, digits) {
  if (v === null || v === undefined) return "-";
  if (typeof v === "number" && digits !== undefined) return v.toFixed(digits);
  return typeof v === "number" ? fmt.format(v) : String(v);
}

function text(v) {
  return v === null || v === undefined ? "-" : String(v);
}

function bytes(v, suffix) {
  if (v === null || v === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : Math.round(v)) + " " + units[i] + (suffix || "");
}

function duration(s) {
  if (s === null || s === undefined) return "-";
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = Math.floor(s % 60);
  return (h ? h + "h " : "") + (h || m ? m + "m " : "") + sec + "s";
}

function clock(t) {
  const d = new Date(t * 1000);
  return d.toLocaleTimeString("en-GB", { hour12: false }) + "." +
    String(d.getMilliseconds()).padStart(3, "0");
}

// graph/stats.json's updated_at: "2026-11-26T07:39:48+0000" (the live graph's strftime)
function updatedAt(v) {
  if (v === null || v === undefined) return "-";
  if (typeof v === "number") return clock(v);
  const m = /T(\d\d:\d\d:\d\d)/.exec(String(v));
  return m ? m[1] : String(v);
}

function set(root, field, value) {
  const el = document.querySelector(`#${root} [data-field="${field}"]`);
  if (el) el.textContent = value;
}

function cell(tr, value, cls) {
  const td = document.createElement("td");
  td.textContent = value;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

// ---- tabs ----------------------------------------------------------------------------

let tabChosen = false;
let tabAuto = false;  // the tab shown was chosen by the page, not by the reader

const TABS = ["setup", "status", "performance"];

function showTab(name) {
  for (const t of TABS) {
    const on = t === name;
    $("tab-" + t).setAttribute("aria-selected", String(on));
    $("panel-" + t).hidden = !on;
  }
  if (name === "status") resizeCharts();
  if (name === "performance") drawPerf(true);
}

for (const t of TABS) {
  $("tab-" + t).addEventListener("click", () => { tabChosen = true; tabAuto = false; showTab(t); });
}

// ---- POST ----------------------------------------------------------------------------

async function post(path, body) {
  page.posts.push({ path, body });
  let r;
  try {
    r = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Gossamer-CSRF": csrf },
      body: JSON.stringify(body),
    });
  } catch (err) {
    return { ok: false, message: "request failed: " + err };
  }
  let data = null;
  try { data = await r.json(); } catch (_) { /* not JSON: said below */ }
  if (r.ok) return { ok: true, message: (data && data.message) || "done" };
  return { ok: false, message: (data && data.error) || `HTTP ${r.status} ${r.statusText}` };
}

// ---- Setup ---------------------------------------------------------------------------

const seeds = [];

function renderSeeds() {
  const items = seeds.map((url, i) => {
    const li = document.createElement("li");
    const span = document.createElement("span");
    span.textContent = url;
    const rm = document.createElement("button");
    rm.type = "button";
    rm.className = "seed-remove";
    rm.textContent = "Remove";
    rm.setAttribute("aria-label", "Remove seed " + url);
    rm.addEventListener("click", () => { seeds.splice(i, 1); renderSeeds(); });
    li.append(span, rm);
    return li;
  });
  $("seed-list").replaceChildren(...items);
}

function typedSeeds() {
  return $("seeds").value.split(/\s+/).map((s) => s.trim()).filter((s) => s);
}

// the settings' first values: what the crawl gets when the form is left as it is
function fillDefaults() {
  const v = setupDefaults.values || {};
  $("allow-private").checked = Boolean(v.allow_private);
  if (v.scope) $("scope").value = v.scope;
  $("delay").value = v.delay === null || v.delay === undefined ? "" : String(v.delay);
  $("max-depth").value = v.max_depth === null || v.max_depth === undefined ? "" : String(v.max_depth);
  $("max-pages").value = v.max_pages === null || v.max_pages === undefined ? "" : String(v.max_pages);
  $("workers").value = v.workers === null || v.workers === undefined ? "" : String(v.workers);
  const labels = setupDefaults.labels || {};
  const env = (setupDefaults.from_environment || []).map(
    (k) => `${labels[k] || k} (GOSSAMER_${k.toUpperCase()})`);
  $("setup-defaults-note").textContent = (setupDefaults.error
    ? "The dashboard's GOSSAMER_* settings are invalid (" + setupDefaults.error + "); the crawler's defaults are shown. "
    : "The values a crawl gets when left as they are: the crawler's defaults" +
      (env.length ? ", and from the dashboard's environment " + env.join(", ") : "") + ". ") +
    "An empty Max depth or Max pages is no limit.";
}
fillDefaults();

$("seed-add").addEventListener("click", () => {
  for (const url of typedSeeds()) if (!seeds.includes(url)) seeds.push(url);
  $("seeds").value = "";
  renderSeeds();
  $("seeds").focus();
});

function numberField(id) {
  const raw = $(id).value.trim();
  if (raw === "") return null;
  const v = Number(raw);
  return Number.isFinite(v) ? v : raw;  // the server says what is wrong with it
}

function optionField(id) {
  return $(id).value || null;
}

// a limit: a number, or "none" (no limit) when the field is empty
function limitField(id) {
  const v = numberField(id);
  return v === null ? "none" : v;
}

$("setup-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const all = seeds.concat(typedSeeds().filter((u) => !seeds.includes(u)));
  const body = {
    seeds: all,
    allow_private: $("allow-private").checked,
    scope: optionField("scope"),
    delay: numberField("delay"),
    max_depth: limitField("max-depth"),
    max_pages: limitField("max-pages"),
    workers: numberField("workers"),
    partition: isCluster ? optionField("partition") : null,
    machines: isCluster ? $("machine-list").value : null,  // a machine list (--machines FILE)
  };
  showSetupError("");
  $("setup-message").textContent = "starting…";
  $("start").disabled = true;
  const r = await post("/api/start", body);
  $("setup-message").textContent = r.ok ? r.message : "";
  if (r.ok) {
    tabChosen = true;
    startedHere = true;  // if it fetches nothing, the page comes back here to say why
    showTab("status");
  } else {
    showSetupError(r.message);
    $("start").disabled = false;
  }
});

// the one message of a refused start, or of a crawl that fetched nothing, in full; `field`
// (a setting of the form) is the one to change: marked, and given the focus
function showSetupError(message, field) {
  $("setup-error").textContent = message;
  $("setup-error").dataset.problem = "";
  for (const el of document.querySelectorAll(".needs-change")) el.classList.remove("needs-change");
  const id = field ? field.replace(/_/g, "-") : null;
  const input = id ? ($(id) || (field === "seeds" ? $("seeds") : null)) : null;
  if (input) {
    const label = document.querySelector(`label[for="${input.id}"]`);
    for (const el of [input, label]) if (el) el.classList.add("needs-change");
  }
  return input;
}

// embedded: `crawl --resume DIR`; a stopped cluster crawl: `crawl --resume --redis … --detach`
// (the server waits until its workers are spawned: the button stays off meanwhile, as Start)
$("resume").addEventListener("click", async () => {
  showSetupError("");
  $("setup-message").textContent = "resuming…";
  $("resume").disabled = true;
  const r = await post("/api/resume", {});
  $("setup-message").textContent = r.ok ? r.message : "";
  if (r.ok) { tabChosen = true; showTab("status"); } else {
    showSetupError(r.message);
    $("resume").disabled = false;
  }
});

// ---- control: scale and stop ---------------------------------------------------------

let scaleDirty = false;  // the slider was moved and not applied: status events leave it

$("scale").addEventListener("input", () => {
  scaleDirty = true;
  $("scale-value").textContent = $("scale").value;
});

$("scale-apply").addEventListener("click", async () => {
  const n = Number($("scale").value);
  $("control-message").textContent = `scaling to ${n} workers…`;
  const r = await post("/api/scale", { workers: n });
  $("control-message").textContent = r.ok ? r.message : "refused: " + r.message;
  if (r.ok) scaleDirty = false;
});

$("stop").addEventListener("click", async () => {
  if (!window.confirm("Stop the crawl? Workers finish their batches and exit.")) return;
  const r = await post("/api/stop", {});
  $("control-message").textContent = r.ok ? r.message : "refused: " + r.message;
});

// ---- charts (uPlot, vendored: static/vendor/) ----------------------------------------

const rate = { t: [], pages: [], bytes: [] };
const charts = {};

function chartWidth(id) {
  return Math.max(240, $(id).clientWidth || $(id).parentElement.clientWidth || 400);
}

function makeRateChart() {
  return new uPlot({
    width: chartWidth("chart-rate"), height: 170,
    scales: { x: { time: true }, p: { auto: true, range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)] },
              b: { auto: true, range: (u, lo, hi) => [0, Math.max(1, hi * 1.1)] } },
    series: [
      {},
      { label: "pages/s", scale: "p", stroke: "#1f6feb", width: 2, value: (u, v) => num(v, 1) },
      { label: "throughput", scale: "b", stroke: "#d97706", width: 1.5,
        value: (u, v) => bytes(v, "/s") },
    ],
    legend: { live: false },
    axes: [
      // ticks on whole seconds at least (uPlot's own go down to ms, and HH:MM:SS repeats)
      { space: 70, incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600],
        values: (u, vals) => vals.map((v) => new Date(v * 1000).toLocaleTimeString("en-GB", { hour12: false })) },
      { scale: "p", label: "pages/s", size: 55 },
      { scale: "b", side: 1, label: "bytes/s", size: 85, grid: { show: false },
        values: (u, vals) => vals.map((v) => bytes(v)) },
    ],
  }, [rate.t, rate.pages, rate.bytes], $("chart-rate"));
}

function makeDegreeChart(id, label) {
  return new uPlot({
    width: chartWidth(id), height: 190,
    scales: { x: { time: false, distr: 3 }, y: { distr: 3 } },
    series: [
      { label: "degree", value: (u, v) => num(v, 0) },
      { label: label, stroke: "#1f6feb", width: 1.5, points: { show: true, size: 6 },
        value: (u, v) => (v === null || v === undefined ? "-" : v.toPrecision(3)) },
      { label: "power-law fit", stroke: "#888", width: 1, dash: [5, 4], points: { show: false },
        value: (u, v) => (v === null || v === undefined ? "-" : v.toPrecision(3)) },
    ],
    legend: { live: false },
    axes: [{ label: "degree" }, { label: "nodes per degree", size: 60 }],
  }, [[], [], []], $(id));
}

function ensureCharts() {
  if (typeof uPlot === "undefined" || $("panel-status").hidden) return false;
  if (!charts.rate) {
    charts.rate = makeRateChart();
    charts.in = makeDegreeChart("chart-in-degree", "in-degree");
    charts.out = makeDegreeChart("chart-out-degree", "out-degree");
  }
  return true;
}

function resizeCharts() {
  if (!ensureCharts()) return;
  charts.rate.setSize({ width: chartWidth("chart-rate"), height: 170 });
  charts.in.setSize({ width: chartWidth("chart-in-degree"), height: 190 });
  charts.out.setSize({ width: chartWidth("chart-out-degree"), height: 190 });
  drawRate();
  if (lastStatus) drawDegrees(lastStatus.graph, true);
}
window.addEventListener("resize", resizeCharts);

function addRate(t, pagesPerS, bytesPerS) {
  const n = rate.t.length;
  if (n && t <= rate.t[n - 1]) return;
  rate.t.push(t);
  rate.pages.push(pagesPerS === undefined ? null : pagesPerS);
  rate.bytes.push(bytesPerS === undefined ? null : bytesPerS);
  if (rate.t.length > MAX_RATE_POINTS) for (const k of ["t", "pages", "bytes"]) rate[k].shift();
}

function drawRate() {
  const el = $("chart-rate");
  el.dataset.points = String(rate.t.length);
  el.dataset.last = rate.pages.length ? String(rate.pages[rate.pages.length - 1]) : "";
  if (ensureCharts()) charts.rate.setData([rate.t, rate.pages, rate.bytes]);
}

// Histogram bins are log bins ({min, max, count}: degree 0, [1,1], [2,3], [4,7], …): each
// is drawn at its geometric middle as nodes per degree (count / width), so a power law is
// a straight line; degree 0 has no place on a log axis and is left out.
function degreeSeries(d) {
  const xs = [], ys = [], fit = [];
  const bins = (d && d.histogram) || [];
  const pl = d && d.power_law;
  for (const b of bins) {
    if (!b.count || b.min < 1) continue;
    const x = Math.sqrt(b.min * b.max);
    xs.push(x);
    ys.push(b.count / (b.max - b.min + 1));
    // the fitted discrete law's expected nodes per degree: n_tail (α-1)/xmin (x/xmin)^-α
    fit.push(pl && x >= pl.xmin ? pl.n_tail * (pl.alpha - 1) / pl.xmin * Math.pow(x / pl.xmin, -pl.alpha) : null);
  }
  return [xs, ys, fit];
}

let drawnGraph = null;  // the graph statistics the degree charts show

// why there are no graph statistics (yet)
function noGraph(s) {
  const state = s && s.graph_state;
  if (state === "computing") return "computing the crawl's graph statistics (gossamer graph stats)…";
  if (state === "failed") return "the graph statistics could not be computed: " + (s.graph_error || "?");
  if (s && s.source && s.source.kind === "embedded" && s.crawl && LIVE_STATES.has(s.crawl.state))
    return "no graph statistics while the crawl runs with --no-live-graph; they are computed once it ends";
  if (s && s.source && s.source.kind === "embedded" && s.totals && !s.totals.pages)
    return "no graph: no page was fetched";
  return "no graph statistics (a crawl with the live graph has them)";
}

function drawDegrees(g, force) {
  // the live graph rewrites its statistics every few seconds, a status event comes every
  // 0.5 s: redraw the two charts only when their statistics changed
  const key = g ? JSON.stringify([g.in_degree, g.out_degree]) : "none " + noGraph(lastStatus);
  if (key === drawnGraph && !force) return;
  drawnGraph = key;
  for (const [key, chart, id, fitId] of [["in_degree", "in", "chart-in-degree", "fit-in"],
                                          ["out_degree", "out", "chart-out-degree", "fit-out"]]) {
    const d = g ? g[key] : null;
    const data = degreeSeries(d);
    $(id).dataset.points = String(data[0].length);
    const pl = d && d.power_law;
    $(fitId).textContent = pl ? `α = ${pl.alpha.toFixed(2)} ± ${pl.sigma.toFixed(2)}, xmin ${pl.xmin}`
      : !g ? "— " + noGraph(lastStatus)
      : !data[0].length ? "— no degrees yet" : "";
    if (ensureCharts()) charts[chart].setData(data);
  }
}

// ---- the Performance tab -------------------------------------------------------------
// One sample a second of the status events this page receives while the crawl fetches:
// pages/s, bytes/s, errors/s (the errors' growth between two samples), the queue, and each
// worker's CPU and memory from its heartbeat. Pages/s and bytes/s before the page opened
// come from /api/history (the rate chart's).

const PERF_EVERY_S = 1;
const perf = { t: [], errors: [], queued: [], workers: new Map(), last: null };
const perfCharts = {};
let perfWorkerKey = "";  // the workers the CPU and memory charts have a series for

function addPerf(s) {
  const t = s.time, tot = s.totals || {};
  if (typeof t !== "number") return;
  const n = perf.t.length;
  if (n && t - perf.t[n - 1] < PERF_EVERY_S) return;
  const prev = perf.last;
  const errorsPerS = prev && t > prev.t && typeof tot.errors === "number"
    ? Math.max(0, (tot.errors - prev.errors) / (t - prev.t)) : null;
  perf.last = { t, errors: tot.errors || 0 };
  perf.t.push(t);
  perf.errors.push(errorsPerS);
  perf.queued.push((s.frontier || {}).queued ?? null);
  const seen = new Set();
  for (const w of s.workers || []) {
    const id = String(w.id);
    seen.add(id);
    if (!perf.workers.has(id)) perf.workers.set(id, { cpu: new Array(n).fill(null), rss: new Array(n).fill(null) });
    const series = perf.workers.get(id);
    series.cpu.push(w.cpu_percent ?? null);
    series.rss.push(w.rss_bytes ?? null);
  }
  for (const [id, series] of perf.workers) {
    if (!seen.has(id)) { series.cpu.push(null); series.rss.push(null); }
  }
  if (perf.t.length > MAX_RATE_POINTS) {
    perf.t.shift(); perf.errors.shift(); perf.queued.shift();
    for (const series of perf.workers.values()) { series.cpu.shift(); series.rss.shift(); }
  }
}

const PALETTE = ["#1f6feb", "#d97706", "#2da44e", "#cf222e", "#8250df", "#0598bc", "#bf8700", "#e16f24"];
const timeAxis = { space: 70, incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600],
  values: (u, vals) => vals.map((v) => new Date(v * 1000).toLocaleTimeString("en-GB", { hour12: false })) };
const fromZero = (u, lo, hi) => [0, Math.max(1, hi * 1.1)];

function perfChart(id, series, axes) {
  return new uPlot({
    width: chartWidth(id), height: 200,
    scales: { x: { time: true }, y: { auto: true, range: fromZero }, y2: { auto: true, range: fromZero } },
    series: [{}, ...series], legend: { live: false }, axes: [timeAxis, ...axes],
  }, [[], ...series.map(() => [])], $(id));
}

function workerSeries(ids, value) {
  return ids.map((id, i) => ({ label: "worker " + id, scale: "y", stroke: PALETTE[i % PALETTE.length],
    width: 1.5, value }));
}

function drawPerf(force) {
  if (typeof uPlot === "undefined" || $("panel-performance").hidden) return;
  const ids = [...perf.workers.keys()].slice(0, 32);
  const key = ids.join(" ");
  if (!perfCharts.rate) {
    perfCharts.rate = perfChart("chart-perf-rate", [
      { label: "pages/s", scale: "y", stroke: "#1f6feb", width: 2, value: (u, v) => num(v, 1) },
      { label: "bytes/s", scale: "y2", stroke: "#d97706", width: 1.5, value: (u, v) => bytes(v, "/s") }],
      [{ scale: "y", label: "pages/s", size: 55 },
       { scale: "y2", side: 1, size: 85, grid: { show: false }, values: (u, vals) => vals.map((v) => bytes(v)) }]);
    perfCharts.errors = perfChart("chart-perf-errors", [
      { label: "errors/s", scale: "y", stroke: "#cf222e", width: 2, value: (u, v) => num(v, 2) },
      { label: "queued", scale: "y2", stroke: "#8250df", width: 1.5, value: (u, v) => num(v) }],
      [{ scale: "y", label: "errors/s", size: 55 }, { scale: "y2", side: 1, label: "queued", size: 70, grid: { show: false } }]);
  }
  if (force || key !== perfWorkerKey || !perfCharts.cpu) {
    for (const k of ["cpu", "rss"]) if (perfCharts[k]) { perfCharts[k].destroy(); perfCharts[k] = null; }
    perfWorkerKey = key;
    perfCharts.cpu = perfChart("chart-perf-cpu", workerSeries(ids, (u, v) => (v === null || v === undefined ? "-" : num(v, 0) + " %")),
      [{ scale: "y", label: "% of a core", size: 55 }]);
    perfCharts.rss = perfChart("chart-perf-rss", workerSeries(ids, (u, v) => bytes(v)),
      [{ scale: "y", size: 75, values: (u, vals) => vals.map((v) => bytes(v)) }]);
    for (const k of ["rate", "errors"]) perfCharts[k].setSize({ width: chartWidth("chart-perf-" + k), height: 200 });
  }
  perfCharts.rate.setData([rate.t, rate.pages, rate.bytes]);
  perfCharts.errors.setData([perf.t, perf.errors, perf.queued]);
  perfCharts.cpu.setData([perf.t, ...ids.map((id) => perf.workers.get(id).cpu)]);
  perfCharts.rss.setData([perf.t, ...ids.map((id) => perf.workers.get(id).rss)]);
  const panel = $("panel-performance");
  panel.dataset.points = String(perf.t.length);
  panel.dataset.workers = String(ids.length);
}
window.addEventListener("resize", () => drawPerf(true));

// ---- top pages (the graph pane) ------------------------------------------------------

function pageLink(url) {
  if (url && /^https?:\/\//.test(url)) {
    const a = document.createElement("a");
    a.href = url;
    a.rel = "noreferrer noopener";
    a.target = "_blank";
    a.textContent = url;
    return a;
  }
  return document.createTextNode(url || "-");
}

let drawnTop = null;

function renderTopLists(g) {
  const key = JSON.stringify([g.top_pages || null, g.top_pages_by_in_degree || null]);
  if (key === drawnTop) return;
  drawnTop = key;
  for (const [id, list, score] of [
    ["top-by-pagerank", g.top_pages, (p) => `PageRank ${p.pagerank.toFixed(4)}`],
    ["top-by-in-degree", g.top_pages_by_in_degree, (p) => `in-degree ${num(p.in_degree)}`]]) {
    const items = (list || []).slice(0, 5).map((p) => {
      const li = document.createElement("li");
      li.append(p.url ? pageLink(p.url) : document.createTextNode("id " + p.id));
      const sc = document.createElement("span");
      sc.className = "score";
      sc.textContent = " " + score(p);
      li.append(sc);
      li.title = `${p.url || "id " + p.id}: PageRank ${p.pagerank.toFixed(6)}, in-degree ${p.in_degree}`;
      return li;
    });
    if (!items.length) {
      const li = document.createElement("li");
      li.className = "empty";
      li.textContent = "-";
      items.push(li);
    }
    $(id).replaceChildren(...items);
  }
}

// the age of the slow figures (distances, PageRank and top pages) of a live graph's refresh
function slowAge(g) {
  const d = g.distances_age_s, r = g.ranking_age_s;
  if (d === undefined && r === undefined) return g.final ? "final" : "-";
  if (d === null || d === undefined) return "not yet";
  return d < 0.05 ? "current" : `${num(d, 0)} s old`;
}

// ---- worker table --------------------------------------------------------------------

let sortKey = "id", sortDir = 1;
const collator = new Intl.Collator("en", { numeric: true });

function sortValue(w, key) {
  if (key === "hosts") return (w.hosts || []).join(" ");
  return w[key];
}

function compareWorkers(a, b) {
  const x = sortValue(a, sortKey), y = sortValue(b, sortKey);
  if (x === y) return collator.compare(String(a.id), String(b.id));
  if (x === null || x === undefined) return 1;
  if (y === null || y === undefined) return -1;
  const c = typeof x === "number" && typeof y === "number" ? x - y : collator.compare(String(x), String(y));
  return c * sortDir;
}

for (const th of document.querySelectorAll("#worker-table th")) {
  th.querySelector("button").addEventListener("click", () => {
    const key = th.dataset.key;
    if (key === sortKey) sortDir = -sortDir;
    else { sortKey = key; sortDir = th.classList.contains("n") && key !== "beat_age_s" ? -1 : 1; }
    for (const other of document.querySelectorAll("#worker-table th")) other.removeAttribute("aria-sort");
    th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
    if (lastStatus) renderWorkers(lastStatus.workers || []);
  });
}

function renderWorkers(workers) {
  const rows = workers.slice().sort(compareWorkers).map((w) => {
    const tr = document.createElement("tr");
    tr.dataset.worker = w.id;
    tr.className = "state-" + w.state;
    const hosts = w.hosts || [];
    cell(tr, text(w.id));
    cell(tr, text(w.machine));
    cell(tr, text(w.pid), "n");
    cell(tr, text(w.state));
    const h = cell(tr, hosts.length ? hosts[0] + (hosts.length > 1 ? ` +${hosts.length - 1}` : "") : "-", "hosts");
    h.title = hosts.join("\n");
    cell(tr, num(w.pages), "n");
    cell(tr, num(w.pages_per_s, 1), "n");
    cell(tr, num(w.errors), "n");
    cell(tr, w.cpu_percent === null || w.cpu_percent === undefined ? "-" : num(w.cpu_percent, 0) + " %", "n");
    cell(tr, bytes(w.rss_bytes), "n");
    const d = cell(tr, bytes(w.disk_free_bytes) + (w.disk_low ? " (low: stopped)" : ""), "n");
    if (w.disk_low) d.classList.add("warn");
    cell(tr, bytes(w.bytes_in_per_s, "/s"), "n");
    cell(tr, bytes(w.bytes_out_per_s, "/s"), "n");
    cell(tr, w.beat_age_s === null || w.beat_age_s === undefined ? "-" : num(w.beat_age_s, 1) + " s ago", "n");
    return tr;
  });
  document.querySelector("#worker-table tbody").replaceChildren(...rows);
  const states = {};
  for (const w of workers) states[w.state] = (states[w.state] || 0) + 1;
  $("worker-summary").textContent = workers.length + " · " +
    Object.entries(states).map(([k, v]) => `${v} ${k}`).join(", ");
  // the log's worker filter offers every worker seen so far
  const select = $("log-worker");
  const known = new Set([...select.options].map((o) => o.value));
  for (const w of workers) {
    if (known.has(String(w.id))) continue;
    const o = document.createElement("option");
    o.value = o.textContent = String(w.id);
    select.appendChild(o);
  }
}

function renderMachines(machines) {
  $("machines").hidden = !machines || machines.length === 0;
  if (!machines) return;
  document.querySelector("#machine-table tbody").replaceChildren(...machines.map((m) => {
    const tr = document.createElement("tr");
    tr.dataset.machine = m.machine;
    cell(tr, text(m.machine));
    cell(tr, num(m.workers), "n");
    cell(tr, num(m.cpu_percent, 0) + " %", "n");
    cell(tr, bytes(m.rss_bytes), "n");
    const d = cell(tr, bytes(m.disk_free_bytes) + (m.disk_low ? ` (low: ${m.disk_low} stopped)` : ""), "n");
    if (m.disk_low) d.classList.add("warn");
    cell(tr, bytes(m.bytes_in_per_s, "/s"), "n");
    cell(tr, bytes(m.bytes_out_per_s, "/s"), "n");
    return tr;
  }));
}

function renderHosts(hosts) {
  const body = document.querySelector("#top-hosts tbody");
  if (!hosts) {
    const tr = document.createElement("tr");
    cell(tr, "not available").colSpan = 6;
    body.replaceChildren(tr);
    return;
  }
  body.replaceChildren(...hosts.map((h) => {
    const tr = document.createElement("tr");
    tr.dataset.host = h.host;
    cell(tr, text(h.host));
    cell(tr, num(h.queued), "n");
    cell(tr, num(h.fetched), "n");
    cell(tr, num(h.errors), "n");
    cell(tr, h.delay_s === null || h.delay_s === undefined ? "-" : num(h.delay_s, 2), "n");
    cell(tr, text(h.state));
    return tr;
  }));
}

// ---- the status event ----------------------------------------------------------------

let lastStatus = null;
let isCluster = false;
let startedHere = false;  // this page started the crawl shown
let problemShown = null;  // the crawl problem shown in the Setup tab (its crawl's start time)
let wasLive = null;  // whether the last status was of a crawl fetching

// the page of highest PageRank (docs/graph.md, "Ranking"): its URL as a link (http(s) only)
function renderTopPage(top) {
  const el = document.querySelector('#graph [data-field="top_page"]');
  if (!el) return;
  const url = top && top.url;
  const tip = top ? `PageRank ${top.pagerank.toFixed(4)}, in-degree ${top.in_degree}` : "";
  if (el.dataset.url === (url || "") && el.title === tip) return;
  el.dataset.url = url || "";
  el.title = tip;
  el.textContent = top && !url ? "id " + top.id : url ? "" : "-";
  if (url && /^https?:\/\//.test(url)) {
    const a = document.createElement("a");
    a.href = url;
    a.rel = "noreferrer noopener";
    a.target = "_blank";
    a.textContent = url;
    el.append(a);
  } else if (url) el.textContent = url;
}

function render(s) {
  const started = performance.now();
  const c = s.crawl, t = s.totals, fr = s.frontier || {}, g = s.graph || {};
  const ctl = s.control || null;
  lastStatus = s;
  isCluster = s.source.kind === "cluster";
  const live = LIVE_STATES.has(c.state);
  $("crawl-id").textContent = c.id || "";
  $("crawl-state").textContent = c.state;
  // the connection is live; the crawl may not be: a finished one's page says so
  const conn = $("connection");
  if (!conn.classList.contains("down")) conn.textContent = live ? "live" : c.state;
  $("crawl-state").className = "state-" + String(c.state).replace(/\s+/g, "-");
  $("last-event").textContent = new Date().toLocaleTimeString("en-GB", { hour12: false });
  $("source").textContent = isCluster ? "cluster " + s.source.redis : s.source.directory;
  set("coordinator", "pid", text(c.pid));
  set("coordinator", "elapsed", duration(c.elapsed_s));
  set("coordinator", "pages_per_s", num(t.pages_per_s, 1));
  set("coordinator", "workers", num(t.workers));
  set("coordinator", "bytes", bytes(t.bytes));
  set("coordinator", "bytes_per_s", bytes(t.bytes_per_s, "/s"));
  set("coordinator", "max_pages", num(c.max_pages));
  set("coordinator", "progress", c.max_pages && typeof t.pages === "number"
    ? `${Math.min(100, 100 * t.pages / c.max_pages).toFixed(1)} %` : "-");
  set("coordinator", "pages", num(t.pages));
  // the pages the crawl log marks duplicates (near-duplicates, identical payloads), and
  // their share of the pages: a directory's crawl (a cluster's heartbeats do not say)
  set("coordinator", "duplicates", t.duplicates === undefined || t.duplicates === null ? "-"
    : num(t.duplicates) + (t.pages ? " (" + (100 * t.duplicates / t.pages).toFixed(1) + " %)" : ""));
  set("coordinator", "requests", num(t.requests));
  set("coordinator", "errors", num(t.errors));
  set("coordinator", "queued", num(fr.queued));
  const known = fr.queued === undefined ? null
    : fr.queued + (fr.leased || 0) + (fr.done || 0) + (fr.failed || 0);
  set("coordinator", "known", num(known));
  set("coordinator", "hosts", num(fr.hosts));
  set("coordinator", "end_reason", c.end_reason || "-");
  for (const k of ["nodes", "edges", "scc_count", "largest_scc", "dangling"]) set("graph", k, num(g[k]));
  set("graph", "diameter", g.diameter !== undefined && g.diameter !== null ? num(g.diameter)
    : (g.diameter_lower_bound !== undefined && g.diameter_lower_bound !== null ? "≥" + num(g.diameter_lower_bound) : "-"));
  set("graph", "average_distance", num(g.average_distance, 2));
  renderTopPage((g.top_pages || [])[0]);
  renderTopLists(g);
  set("graph", "slow_age", slowAge(g));
  set("graph", "updated", g.computed ? "computed " + updatedAt(g.updated_at)
    : g.final ? "final" : s.graph_state === "computing" ? "computing…" : updatedAt(g.updated_at));

  renderWorkers(s.workers || []);
  renderMachines(s.machines);
  renderHosts(s.top_hosts === undefined ? null : s.top_hosts);
  // the rate chart: a point per event while the crawl fetches; once it stops, its whole
  // history from its files (GET /api/history) replaces what the page collected
  if (live && typeof s.time === "number") addRate(s.time, t.pages_per_s, t.bytes_per_s);
  if (live) addPerf(s);
  if (wasLive === true && !live) loadHistory(true);
  wasLive = live;
  drawRate();
  drawPerf(false);
  drawDegrees(s.graph);
  renderProblem(c, ctl);

  // controls: what the server says is possible now
  const running = c.state === "running";
  $("stop").disabled = ctl ? !ctl.can_stop : !running;
  const canScale = Boolean(ctl && ctl.can_scale);
  $("scale").disabled = $("scale-apply").disabled = !canScale;
  if (ctl) {
    $("scale").max = String(Math.max(1, ctl.max_workers || 16));
    $("scale").min = isCluster ? "0" : "1";  // a cluster crawl may keep no local worker
    if (!scaleDirty && ctl.workers !== null && ctl.workers !== undefined) {
      $("scale").value = String(ctl.workers);
      $("scale-value").textContent = String(ctl.workers);
    }
  }
  $("start").disabled = !(ctl && ctl.can_start);
  $("resume").disabled = !(ctl && ctl.can_resume);
  $("setup-note").textContent = !ctl ? "This dashboard cannot start or resume crawls."
    : c.problem && ctl.can_start ? "The crawl fetched no page: start it again with the settings changed (its files are replaced)."
    : ctl.can_start || ctl.can_resume ? "" : `The crawl is ${c.state}: nothing to start or resume now.`;
  for (const el of document.querySelectorAll(".cluster-only")) el.hidden = !isCluster;

  // the first event chooses the tab (unless the address or a click did): Setup for a crawl
  // not started, else Status; a crawl that starts while Setup was chosen so (from the command
  // line, or another page) turns the page to Status
  const setupFirst = (c.state === "not started" || Boolean(c.problem)) && Boolean(ctl && ctl.can_start);
  if (!tabChosen || (tabAuto && !setupFirst && $("tab-setup").getAttribute("aria-selected") === "true")) {
    tabChosen = true;
    tabAuto = true;
    showTab(setupFirst ? "setup" : "status");
  }
  page.statusEvents += 1;
  page.renderMs = performance.now() - started;  // the DOM work of one event (layout comes after)
  page.lastHandledAt = Date.now();
  page.lastStatusTime = s.time;
}

// `replace`: the history replaces what the chart holds (a crawl that just ended: its whole
// history); else what the page collected meanwhile is kept after it
async function loadHistory(replace) {
  try {
    const r = await fetch("/api/history");
    if (!r.ok) return;  // a server without history: the chart starts with the first event
    const h = await r.json();
    const old = replace ? { t: [], pages: [], bytes: [] }
      : { t: rate.t.slice(), pages: rate.pages.slice(), bytes: rate.bytes.slice() };
    rate.t.length = rate.pages.length = rate.bytes.length = 0;
    for (let i = 0; i < h.t.length; i++) addRate(h.t[i], h.pages_per_s[i], h.bytes_per_s[i]);
    for (let i = 0; i < old.t.length; i++) addRate(old.t[i], old.pages[i], old.bytes[i]);
    drawRate();
  } catch (_) { /* as above */ }
}

// a crawl that fetched no page: why and what to change, in the Setup tab (the page returns
// there when it started that crawl) and atop the Status tab
function renderProblem(c, ctl) {
  const p = c.problem;
  $("crawl-problem").textContent = p ? p.message : "";
  const key = p ? `${c.started} ${p.message}` : null;
  if (key === problemShown) return;
  if (!p) {
    if (problemShown !== null && $("setup-error").dataset.problem === "1") showSetupError("");
    problemShown = null;
    return;
  }
  problemShown = key;
  $("setup-message").textContent = "";  // (its start's "started: pid …" is over)
  const input = showSetupError(p.message, p.field);
  $("setup-error").dataset.problem = "1";
  // the seeds of the crawl that failed, to start again with the settings changed
  if (!seeds.length && !typedSeeds().length) {
    for (const url of c.seeds || []) seeds.push(url);
    renderSeeds();
  }
  if (startedHere && ctl && ctl.can_start) {
    startedHere = false;
    showTab("setup");
    if (input) input.focus();
  }
}

function connect() {
  const conn = $("connection");
  const events = new EventSource("/events");
  events.addEventListener("status", (e) => {
    conn.textContent = "live";
    conn.className = "";
    render(JSON.parse(e.data));  // ("live" becomes the crawl's state when it does not run)
  });
  events.onerror = () => { conn.textContent = "disconnected, retrying"; conn.className = "down"; };
}

// ---- the log tail --------------------------------------------------------------------

let logStream = null;
let logGeneration = 0;

function logLine(r) {
  const li = document.createElement("li");
  li.className = "level-" + r.level;
  const who = r.worker ? r.worker + " " : "";
  const what = r.kind === "fetch"
    ? `${r.status === null || r.status === undefined ? "---" : r.status} ${r.outcome || ""} ${r.url || ""}`
    : r.message;
  li.textContent = `${clock(r.time || Date.now() / 1000)} ${r.level.toUpperCase().padEnd(7)} ${who}${what}`;
  return li;
}

// The log pane is most of what the page costs the browser: 20 status events and 200 fetch
// lines every 0.5 s for 10 s cost Chromium 0.75 s of CPU with the pane on the screen, 0.32 s
// with it below the fold and its records waiting, 0.36 s with no log at all, 0.17 s on the
// Setup tab (bench_dashboard_cost.py --page). So while the pane is not on the screen
// (scrolled away, the Setup tab, a background tab) the records wait in memory, bounded like
// the pane, and are drawn when it shows again.
// unknown until the observer's first report, which every observed element gets: until then
// records wait, so a page loaded with the pane below the fold never draws them early
let logOnScreen = false;
const logWaiting = [];

function appendLog(records) {
  if (!records.length) return;
  if (!logOnScreen) {
    logWaiting.push(...records);
    if (logWaiting.length > MAX_LOG_LINES) logWaiting.splice(0, logWaiting.length - MAX_LOG_LINES);
    page.logWaiting = logWaiting.length;
    return;
  }
  drawLog(records);
}

function drawLog(records) {
  const ol = $("log");
  const atBottom = ol.scrollTop + ol.clientHeight >= ol.scrollHeight - 4;
  ol.append(...records.slice(-MAX_LOG_LINES).map(logLine));
  while (ol.childElementCount > MAX_LOG_LINES) ol.firstElementChild.remove();
  if (atBottom) ol.scrollTop = ol.scrollHeight;
  page.logLines = ol.childElementCount;
}

async function openLog() {
  const generation = ++logGeneration;
  if (logStream) logStream.close();
  logStream = null;
  $("log").replaceChildren();
  logWaiting.length = 0;
  const q = new URLSearchParams({ level: $("log-level").value });
  if ($("log-worker").value) q.set("worker", $("log-worker").value);
  // the stream first, its batches held until the past is shown: nothing falls between
  const held = [];
  let shownUntil = null;
  const stream = new EventSource("/events/log?" + q);
  logStream = stream;
  stream.addEventListener("log", (e) => {
    if (generation !== logGeneration) return;
    const batch = JSON.parse(e.data);
    if (shownUntil === null) held.push(...batch);
    else appendLog(batch);
  });
  stream.onerror = () => { $("log-state").textContent = "log stream interrupted, retrying"; };
  stream.onopen = () => { $("log-state").textContent = ""; };
  q.set("n", "200");
  let past = [];
  try {
    const r = await fetch("/api/log?" + q);
    if (!r.ok) {
      stream.close();
      $("log-state").textContent = r.status === 404 ? "this dashboard serves no log"
        : `the log cannot be read (HTTP ${r.status})`;
      return;
    }
    past = (await r.json()).records || [];
  } catch (err) {
    $("log-state").textContent = "the log cannot be read: " + err;
  }
  if (generation !== logGeneration) return;
  appendLog(past);
  shownUntil = past.length ? past[past.length - 1].time : 0;
  appendLog(held.filter((r) => r.time > shownUntil || r.kind === "skipped"));
}

function logShown(onScreen) {
  logOnScreen = page.logOnScreen = onScreen && !document.hidden;
  if (logOnScreen && logWaiting.length) drawLog(logWaiting.splice(0));
  page.logWaiting = logWaiting.length;
}
let logIntersecting = false;
new IntersectionObserver((entries) => {
  logIntersecting = entries[entries.length - 1].isIntersecting;
  logShown(logIntersecting);
}).observe($("log"));
document.addEventListener("visibilitychange", () => logShown(logIntersecting));

$("log-level").addEventListener("change", openLog);
$("log-worker").addEventListener("change", openLog);

// a tab named in the address (#setup, #status) is shown at once; else the first status
// event chooses: Setup for a crawl not started yet, Status otherwise
if (location.hash === "#setup" || location.hash === "#status") {
  tabChosen = true;
  showTab(location.hash.slice(1));
}
loadHistory();
connect();
openLog();
