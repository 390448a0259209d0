// kwatt's dashboard: a site, its jobs, a job, a node (doc/dashboard.md). Vanilla JS and uPlot;
// every figure comes from the server's /dashboard/api/ endpoints.
"use strict";

const API = "/dashboard/api";
const POWER_METRICS = ["wattmetre_power_watt", "pdu_outlet_power_watt", "bmc_node_power_watt",
  "bmc_psu_power_watt"];
const NETWORK_METRICS = ["network_ifacein_bytes_total", "network_ifaceout_bytes_total"];
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
  "#7f7f7f", "#bcbd22", "#17becf"];
const LIVE_MS = 1000;
const ENERGY_EVERY = 30;  // live: the energy table is computed again every 30 s

// What the pages did, for the browser tests and the curious: the plots and the queries sent.
const state = { plots: {}, queries: [], energy: null, timers: [], page: "" };
window.kwattDashboard = state;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

async function getJson(url) {
  state.queries.push(url);
  const res = await fetch(url);
  if (!res.ok) {
    let message = res.status + " " + res.statusText;
    try { message = (await res.json()).message || message; } catch (e) { /* not JSON */ }
    throw new Error(url + ": " + message);
  }
  return res.json();
}

function fmt(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  return Number(x).toLocaleString("en-US", { maximumFractionDigits: digits ?? 1 });
}
function duration(s) {
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  return (h ? h + "h " : "") + (h || m ? m + "m " : "") + r + "s";
}
// A time in Europe/Paris, as Kwollect writes times and the plots' axes show them.
const PARIS = new Intl.DateTimeFormat("sv-SE", { timeZone: "Europe/Paris", year: "numeric",
  month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" });
function when(t) { return t === null ? "–" : PARIS.format(new Date(t * 1000)) + " (Paris)"; }

function stopTimers() {
  for (const t of state.timers) clearInterval(t);
  state.timers = [];
  for (const p of Object.values(state.plots)) if (p.uplot) p.uplot.destroy();
  state.plots = {};
}

function setNav(site) {
  const nav = document.getElementById("nav");
  nav.replaceChildren();
  if (!site) return;
  nav.append(el("a", { href: "#/site/" + site, text: "site " + site }),
    el("a", { href: "#/jobs/" + site, text: "jobs" }));
}

// ---------------------------------------------------------------- plots

// A plot of downsampled series (per-pixel min, max and mean from /series), that re-queries when
// zoomed and, when `live`, appends what is new every second.
class SeriesPlot {
  constructor(name, container, opts) {
    this.name = name;
    this.opts = opts;  // {site, nodes, metrics, start, end, rates, title, unit, live}
    this.box = el("div", { class: "plot", "data-plot": name });
    this.info = el("div", { class: "info" });
    // Pan: half the view earlier or later, re-queried at the view's resolution.
    const earlier = el("button", { class: "pan", "data-pan": "earlier", title: "earlier", text: "◀" });
    const later = el("button", { class: "pan", "data-pan": "later", title: "later", text: "▶" });
    earlier.addEventListener("click", () => this.pan(-0.5));
    later.addEventListener("click", () => this.pan(0.5));
    this.box.append(el("div", { class: "title", text: opts.title }, " ", earlier, later), this.info);
    container.append(this.box);
    this.view = null;  // the zoomed window, null: the whole
    this.record = { series: [], points: 0, rows: 0, query: null, queries: 0, step: 0 };
    state.plots[name] = this.record;
  }

  width() { return Math.max(300, (this.box.clientWidth || 900) - 20); }

  url(start, end, extra) {
    const o = this.opts;
    const p = new URLSearchParams();
    p.set("nodes", o.nodes.join(","));
    p.set("metrics", o.metrics.join(","));
    p.set("start", start.toFixed(6));
    p.set("end", end.toFixed(6));
    if (o.rates) p.set("rates", "1");
    for (const [k, v] of Object.entries(extra)) p.set(k, v);
    return API + "/sites/" + o.site + "/series?" + p.toString();
  }

  async load(start, end) {
    const url = this.url(start, end, { width: String(this.width()) });
    const data = await getJson(url);
    this.record.query = url;
    this.record.queries += 1;
    this.answer = data;
    this.render();
  }

  // Columns for uPlot: x, then per series mean, min, max.
  render() {
    const d = this.answer;
    const cols = [d.time];
    const series = [{}];
    const bands = [];
    const names = [];
    d.series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      const shown = Object.entries(s.labels || {}).filter(([k]) => k !== "_device_orig");
      const label = s.device + (shown.length ? " " + shown.map(([k, v]) => k + "=" + v).join(",") : "") +
        (this.opts.metrics.length > 1 ? " " + s.metric : "");
      names.push(label);
      cols.push(s.mean, s.min, s.max);
      const base = series.length;
      series.push({ label: label, stroke: color, width: 1.5, spanGaps: true },
        { label: label + " min", stroke: color + "55", width: 0.5, spanGaps: true, show: true },
        { label: label + " max", stroke: color + "55", width: 0.5, spanGaps: true });
      bands.push({ series: [base + 2, base + 1], fill: color + "22" });
    });
    let points = 0;
    for (const s of d.series) for (const c of s.count) if (c > 0) points++;
    Object.assign(this.record, { series: names, points: points, rows: d.rows, step: d.step,
      buckets: d.buckets, start: d.start, end: d.start + d.step * d.buckets });
    this.info.textContent = fmt(d.rows, 0) + " rows in " + d.series.length + " series, " +
      d.buckets + " buckets of " + fmt(d.step, 3) + " s (min, max and mean per pixel)" +
      (this.view ? " — zoomed: drag to zoom further, ◀ ▶ to pan, double-click to reset"
                 : " — drag to zoom, ◀ ▶ to pan");
    if (this.uplot) {
      if (this.uplot.series.length === series.length) {
        this.uplot.setData(cols, false);
        this.uplot.setScale("x", { min: d.start, max: d.start + d.step * d.buckets });
        return;
      }
      this.uplot.destroy();
    }
    const self = this;
    const options = {
      width: this.width(), height: 260, series: series, bands: bands,
      scales: { x: { time: true } },
      // Times in Europe/Paris, as Kwollect writes them and as the page's text shows them.
      tzDate: ts => uPlot.tzDate(new Date(ts * 1000), "Europe/Paris"),
      axes: [{}, { label: this.opts.unit, size: 60 }],
      legend: { show: d.series.length <= 8, live: false },
      cursor: { drag: { x: true, y: false } },
      hooks: {
        draw: [u => self.drawPhases(u)],
        setSelect: [u => {
          if (u.select.width < 3) return;
          const a = u.posToVal(u.select.left, "x"), b = u.posToVal(u.select.left + u.select.width, "x");
          u.setSelect({ left: 0, width: 0 }, false);
          self.zoom(a, b);
        }],
      },
    };
    this.uplot = new uPlot(options, cols, this.box);
    this.record.uplot = this.uplot;
    this.uplot.over.addEventListener("dblclick", () => this.zoom(null, null));
  }

  // The job's phases (when known) as marks: a line at each start, and its name.
  drawPhases(u) {
    const phases = this.opts.phases || [];
    if (!phases.length) return;
    const ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = "#88888888";
    ctx.fillStyle = "#555";
    ctx.font = (11 * devicePixelRatio) + "px sans-serif";
    ctx.setLineDash([4, 4]);
    for (const p of phases) {
      const x = u.valToPos(p.start, "x", true);
      if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
      if (p.name) ctx.fillText(p.name, x + 3, u.bbox.top + 12 * devicePixelRatio);
    }
    ctx.restore();
  }

  // Moves the view by `fraction` of its width (negative: earlier), not past now.
  pan(fraction) {
    const [start, end] = this.view || [this.opts.start, this.opts.end];
    const width = end - start;
    let shift = fraction * width;
    const now = Date.now() / 1000;
    if (end + shift > now) shift = Math.max(0, now - end);
    if (shift === 0) return;
    this.zoom(start + shift, end + shift);
  }

  // A zoom re-queries at the resolution of the new view; null: back to the whole window.
  zoom(a, b) {
    this.view = a === null ? null : [a, b];
    const [start, end] = this.view || [this.opts.start, this.opts.end];
    this.load(start, end).catch(showError);
  }

  // Live: the new rows since the last bucket, at the same step, appended.
  async tail(now) {
    this.opts.end = now;
    if (this.view || !this.answer) return;
    const d = this.answer;
    if (d.buckets > 2 * this.width()) return this.load(this.opts.start, now);
    const last = d.buckets - 1;
    const from = d.start + d.step * last;
    const url = this.url(from, now, { step: String(d.step) });
    const t = await getJson(url);
    this.record.tail_query = url;
    this.record.tails = (this.record.tails || 0) + 1;
    const keep = last;
    d.time = d.time.slice(0, keep).concat(t.time);
    const bySeries = new Map(t.series.map(s => [s.device + s.metric + JSON.stringify(s.labels), s]));
    for (const s of d.series) {
      const n = bySeries.get(s.device + s.metric + JSON.stringify(s.labels));
      const empty = new Array(t.buckets).fill(null);
      for (const f of ["min", "max", "mean"]) s[f] = s[f].slice(0, keep).concat(n ? n[f] : empty);
      s.count = s.count.slice(0, keep).concat(n ? n.count : new Array(t.buckets).fill(0));
      if (n) s.rows += n.rows - 0;
    }
    if (t.series.length > d.series.length) return this.load(this.opts.start, now);
    d.buckets = d.time.length;
    d.rows = d.series.reduce((a, s) => a + s.count.reduce((x, y) => x + y, 0), 0);
    this.render();
  }
}

function showError(e) {
  console.warn(e);
  document.getElementById("status").textContent = String(e.message || e);
}

// ---------------------------------------------------------------- pages

async function sitesPage(main) {
  const data = await getJson(API + "/sites");
  main.replaceChildren(el("h1", { text: "Sites" }));
  const t = el("table", {}, el("tr", {}, el("th", { text: "site" }), el("th", { text: "nodes" }),
    el("th", { text: "" })));
  for (const s of data.sites) {
    t.append(el("tr", {}, el("td", {}, el("a", { href: "#/site/" + s.uid, text: s.uid })),
      el("td", { class: "num", text: s.nodes }),
      el("td", {}, el("a", { href: "#/jobs/" + s.uid, text: "jobs" }))));
  }
  main.append(t, el("p", { class: "muted", text: "The Kwollect API is at " + data.api }));
}

async function sitePage(main, site) {
  setNav(site);
  const data = await getJson(API + "/sites/" + site);
  main.replaceChildren(el("h1", { text: "Site " + data.uid }));
  const box = el("div", { class: "clusters" });
  let total = 0;
  for (const c of data.clusters) {
    const t = el("table", { "data-cluster": c.uid }, el("tr", {}, el("th", { text: "node" }),
      el("th", { text: "power (W)" }), el("th", { text: "from" }), el("th", { text: "jobs" })));
    for (const n of c.nodes) {
      if (n.power) total += n.power.watts;
      const jobs = el("td", {});
      for (const j of n.jobs) jobs.append(el("a", { href: "#/job/" + site + "/" + j, class: "running", text: j }), " ");
      t.append(el("tr", { "data-node": n.uid },
        el("td", {}, el("a", { href: "#/node/" + site + "/" + n.uid, text: n.uid })),
        el("td", { class: "num power", text: n.power ? fmt(n.power.watts, 1) : "–" }),
        el("td", { class: "muted", text: n.power ? n.power.metric : "no power data in the last minute" }),
        jobs));
    }
    box.append(el("div", {}, el("h2", { text: c.uid + " (" + c.nodes.length + " nodes, " + c.model + ")" }), t));
  }
  main.append(el("p", { id: "site-total", text: "Latest power of the site: " + fmt(total, 0) + " W" }), box);
}

async function jobsPage(main, site) {
  setNav(site);
  const data = await getJson(API + "/sites/" + site + "/jobs");
  main.replaceChildren(el("h1", { text: "Jobs of " + site }));
  const t = el("table", { id: "jobs" }, el("tr", {}, ...["job", "user", "state", "nodes", "start",
    "duration", "types", "energy"].map(h => el("th", { text: h }))));
  for (const j of data.jobs) {
    const energy = el("td", { class: "num energy", text: j.state === "waiting" ? "–" : "…" });
    t.append(el("tr", { "data-job": j.uid },
      el("td", {}, el("a", { href: "#/job/" + site + "/" + j.uid, text: j.uid })),
      el("td", { text: j.user }),
      el("td", { class: j.state === "running" ? "running" : "", text: j.state }),
      el("td", { title: j.nodes.join(" "), text: j.nodes.length + ": " + j.nodes.slice(0, 3).join(", ") + (j.nodes.length > 3 ? "…" : "") }),
      el("td", { text: when(j.start) }),
      el("td", { class: "num", text: duration(j.duration_s) }),
      el("td", { text: j.types.join(", ") }), energy));
    if (j.state !== "waiting") {
      getJson(API + "/sites/" + site + "/jobs/" + j.uid + "/energy")
        .then(e => { energy.textContent = fmt(e.total.wh, 2) + " Wh (" + fmt(100 * e.total.coverage, 1) + " %)"; })
        .catch(e => { energy.textContent = "–"; energy.title = String(e.message); });
    }
  }
  main.append(t);
}

function energyTable(report) {
  const t = el("table", { id: "energy" }, el("tr", {}, ...["node", "metric", "energy (J)", "Wh",
    "mean (W)", "peak (W)", "coverage", "gaps", "gap J"].map(h => el("th", { text: h }))));
  const row = (name, metric, f, cls) => el("tr", { class: cls || "" }, el("td", { text: name }),
    el("td", { text: metric }), el("td", { class: "num joules", text: f ? fmt(f.joules, 1) : "–" }),
    el("td", { class: "num", text: f ? fmt(f.wh, 3) : "–" }),
    el("td", { class: "num", text: f ? fmt(f.mean_watts, 1) : "–" }),
    el("td", { class: "num", text: f ? fmt(f.peak_watts, 1) : "–" }),
    el("td", { class: "num", text: f ? fmt(100 * f.coverage, 2) + " %" : "–" }),
    el("td", { class: "num", text: f ? f.gaps : "–" }),
    el("td", { class: "num", text: f ? fmt(f.gap_joules, 1) : "–" }));
  for (const n of report.nodes) row && t.append(row(n.node, n.metric || n.reason || "none", n.window));
  t.append(row("total", "", report.total, "total"));
  return t;
}

async function jobPage(main, site, id) {
  setNav(site);
  const job = await getJson(API + "/sites/" + site + "/jobs/" + id);
  main.replaceChildren(el("h1", { text: "Job " + site + ":" + job.uid + " (" + job.state + ")" }));
  main.append(el("p", { text: "user " + job.user + ", " + job.nodes.length + " nodes, from " +
    when(job.window.start) + " for " + duration(job.duration_s) + ", types: " +
    (job.types.join(", ") || "none") }));
  const q = "job_id=" + job.uid;
  main.append(el("div", { class: "toolbar" },
    el("a", { id: "download-jsonl", href: API + "/sites/" + site + "/rows?format=jsonl&" + q, text: "rows as JSON Lines" }),
    el("a", { id: "download-csv", href: API + "/sites/" + site + "/rows?format=csv&" + q, text: "rows as CSV" }),
    el("span", {}, "archive it: ", el("code", { id: "backup-command", text: job.backup_command }))));
  const energyBox = el("div", {}, el("h2", { text: "Energy (as kwatt energy computes it)" }), el("p", { text: "…" }));
  main.append(energyBox);
  const loadEnergy = async () => {
    const report = await getJson(API + "/sites/" + site + "/jobs/" + id + "/energy");
    state.energy = report;
    energyBox.replaceChildren(el("h2", { text: "Energy (as kwatt energy computes it)" }), energyTable(report),
      el("p", { class: "muted", text: "window " + report.start + " .. " + report.end + "; " +
        (report.notes || []).join("; ") }));
  };

  const all = new Set();
  for (const n of job.node_details) for (const m of n.metrics) all.add(m);
  const plots = el("div", {});
  main.append(plots);
  const start = job.window.start, end = job.window.end;
  const base = { site: site, nodes: job.nodes, start: start, end: end, phases: job.phases };
  const made = [];
  for (const m of POWER_METRICS) {
    if (!all.has(m)) continue;
    made.push(new SeriesPlot(m, plots, Object.assign({}, base, { metrics: [m], title: "Power: " + m, unit: "W" })));
  }
  const net = NETWORK_METRICS.filter(m => all.has(m));
  if (net.length) {
    made.push(new SeriesPlot("network", plots, Object.assign({}, base, { metrics: net, rates: true,
      title: "Network in and out (bytes/s): " + net.join(", "), unit: "B/s" })));
  }
  const picker = el("select", { id: "metric-picker" }, el("option", { value: "", text: "add a metric…" }));
  for (const m of [...all].sort()) picker.append(el("option", { value: m, text: m }));
  picker.addEventListener("change", () => {
    const m = picker.value;
    if (!m || state.plots[m]) return;
    const p = new SeriesPlot(m, plots, Object.assign({}, base, { metrics: [m],
      title: m + (m.endsWith("_total") ? " (per second)" : ""), unit: "",
      rates: m.endsWith("_total"), end: made.length ? made[0].opts.end : end }));
    made.push(p);
    p.load(p.opts.start, p.opts.end).catch(showError);
  });
  main.insertBefore(el("div", { class: "toolbar" }, picker), plots);
  await Promise.all(made.map(p => p.load(start, end))).catch(showError);
  state.plotsDrawnMs = performance.now();  // since the navigation started: the first paint
  // The energy reads the whole job again: asked once the plots are drawn, so that it does not
  // take the server's cores from them.
  await loadEnergy().catch(showError);
  state.energyShownMs = performance.now();
  if (job.state === "running") {
    document.getElementById("status").textContent = "live";
    let energyTick = 0;
    state.timers.push(setInterval(async () => {
      try {
        const now = (await getJson(API + "/sites")).now;
        await Promise.all(made.map(p => p.tail(now)));
        if (++energyTick % ENERGY_EVERY === 0) await loadEnergy();
      } catch (e) { showError(e); }
    }, LIVE_MS));
  }
}

async function nodePage(main, site, node, params) {
  setNav(site);
  const info = await getJson(API + "/sites/" + site + "/nodes/" + node);
  const span = Number(params.get("window") || 3600);
  const now = (await getJson(API + "/sites")).now;
  main.replaceChildren(el("h1", { text: "Node " + node + " (" + info.cluster + ")" }));
  const choose = el("select", { id: "window" });
  for (const [s, label] of [[300, "5 minutes"], [3600, "1 hour"], [6 * 3600, "6 hours"], [86400, "1 day"]]) {
    const o = el("option", { value: s, text: "last " + label });
    if (s === span) o.selected = true;
    choose.append(o);
  }
  choose.addEventListener("change", () => { location.hash = "#/node/" + site + "/" + node + "?window=" + choose.value; });
  const picker = el("select", { id: "metric-picker" }, el("option", { value: "", text: "add a metric…" }));
  for (const m of info.metrics) picker.append(el("option", { value: m, text: m }));
  main.append(el("div", { class: "toolbar" }, choose, picker));
  const plots = el("div", {});
  main.append(plots);
  const add = m => {
    if (state.plots[m]) return null;
    const p = new SeriesPlot(m, plots, { site: site, nodes: [node], metrics: [m], start: now - span,
      end: now, title: m + (m.endsWith("_total") ? " (per second)" : ""),
      unit: POWER_METRICS.includes(m) ? "W" : "", rates: m.endsWith("_total") });
    return p.load(p.opts.start, p.opts.end);
  };
  picker.addEventListener("change", () => { if (picker.value) (add(picker.value) || Promise.resolve()).catch(showError); });
  const first = info.metrics.filter(m => POWER_METRICS.includes(m) || NETWORK_METRICS.includes(m));
  await Promise.all(first.map(add).filter(Boolean)).catch(showError);
}

async function route() {
  stopTimers();
  document.getElementById("status").textContent = "";
  const main = document.getElementById("main");
  const [path, query] = (location.hash.replace(/^#/, "") || "/").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  state.page = parts[0] || "sites";
  state.ready = false;
  try {
    if (parts[0] === "site") await sitePage(main, parts[1]);
    else if (parts[0] === "jobs") await jobsPage(main, parts[1]);
    else if (parts[0] === "job") await jobPage(main, parts[1], parts[2]);
    else if (parts[0] === "node") await nodePage(main, parts[1], parts[2], params);
    else await sitesPage(main);
  } catch (e) {
    main.replaceChildren(el("p", { class: "error", text: String(e.message || e) }));
    console.warn(e);
  }
  state.ready = true;
}

window.addEventListener("hashchange", route);
window.addEventListener("load", route);
