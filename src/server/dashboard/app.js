// kwatt's dashboard: a site, its jobs, a job, a node (doc/dashboard.md). Vanilla JS and uPlot;
// every figure comes from the server's /dashboard/api/ endpoints.
"use strict";

// The API's URLs are built from the page's origin and path, never from location.href: a page
// opened as http://user:pass@host/dashboard/ has credentials in its URL, and fetch() refuses a URL
// that holds them (relative URLs are resolved against that one).
const BASE = location.origin + location.pathname.replace(/[^/]*$/, "");
const API = BASE + "api";
// ~1,000 node names do not fit in a URL (the server refuses a request line over 8 KiB): a plot's
// nodes are asked for in pieces whose `nodes` parameter stays under this many characters.
const MAX_NODES_PARAM = 4000;
// A series' line breaks where no sample came for more than this many of its sample periods.
const GAP_PERIODS = 3;
// The node page's windows, in seconds.
const NODE_SPANS = [[300, "5 minutes"], [3600, "1 hour"], [6 * 3600, "6 hours"], [86400, "1 day"]];
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

// "1 node", "12 nodes".
function countOf(n, noun) {
  return n + " " + noun + (n === 1 ? "" : "s");
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

// An API URL: each path part encoded (a '#', '?' or '/' in a route part stays in its part).
function apiUrl(...parts) {
  return API + "/" + parts.map(p => encodeURIComponent(String(p))).join("/");
}
// A page's address: #/kind/part/part, each part encoded.
function route(...parts) {
  return "#/" + parts.map(p => encodeURIComponent(String(p))).join("/");
}

// A number typed in an address: the whole text, or an error naming it.
function strictNumber(text, name, { integer = false, min = -Infinity } = {}) {
  const ok = integer ? /^-?\d+$/ : /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;
  const x = Number(text);
  if (!ok.test(String(text)) || !Number.isFinite(x) || x < min) {
    throw new Error(name + " must be " + (integer ? "a whole number" : "a number") +
      (min > -Infinity ? " of at least " + min : "") + ", not '" + text + "'");
  }
  return x;
}

// An API answer; an error says what the server said (its message, not the URL asked: a plot's
// URL names a hundred nodes), the URL kept in the error's `url`.
async function getJson(url) {
  state.queries.push(url);
  let res;
  try {
    res = await fetch(url);
  } catch (e) {
    throw Object.assign(new Error("the server does not answer (" + (e.message || e) + ")"), { url: url });
  }
  if (!res.ok) {
    let message = res.status + " " + res.statusText;
    try { message = (await res.json()).message || message; } catch (e) { /* not JSON */ }
    throw Object.assign(new Error(message), { url: url, status: res.status });
  }
  return res.json();
}

function fmt(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  return Number(x).toLocaleString("en-US", { maximumFractionDigits: digits ?? 1 });
}
function duration(s) {
  s = Math.round(s);
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  return (d ? d + "d " : "") + (d || h ? h + "h " : "") + (d || h || m ? m + "m " : "") + r + "s";
}

// SI prefixes: 300000000 B/s is "300 MB/s". `decimals`: fixed digits after the point (for axis
// ticks, so that they read alike), else 3 significant digits.
const SI = ["p", "n", "µ", "m", "", "k", "M", "G", "T", "P", "E"];
function siExponent(x) {
  if (!x || !Number.isFinite(x)) return 0;
  return Math.max(-4, Math.min(6, Math.floor(Math.log10(Math.abs(x)) / 3)));
}
function si(x, unit, exponent, decimals) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  const e = exponent ?? siExponent(x);
  const v = x / Math.pow(1000, e);
  const text = decimals === undefined ? String(Number(v.toPrecision(3))) : v.toFixed(decimals);
  const suffix = SI[e + 4] + (unit || "");
  return text + (suffix ? " " + suffix : "");
}
// Axis ticks in one prefix (that of the largest), with as many decimals as their spacing needs.
function siTicks(splits, unit) {
  const top = Math.max(...splits.map(Math.abs));
  const e = siExponent(top);
  const step = splits.length > 1 ? Math.abs(splits[1] - splits[0]) / Math.pow(1000, e) : 1;
  let decimals = 0;  // as many as the spacing has: 0.25 is not written 0.3
  while (decimals < 6 && Math.abs(step * 10 ** decimals - Math.round(step * 10 ** decimals)) > 1e-6) decimals++;
  return splits.map(x => x === 0 ? "0" + (unit ? " " + unit : "") : si(x, unit, e, decimals));
}

// Times in Europe/Paris, as Kwollect writes them: ISO dates, 24 h clock. In the night the clocks go
// back, an hour of wall-clock times happens twice: those times carry their UTC offset.
const PARIS = new Intl.DateTimeFormat("en-GB", { timeZone: "Europe/Paris", hourCycle: "h23",
  year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
  second: "2-digit", timeZoneName: "longOffset" });
function parisParts(t) {
  const p = {};
  for (const { type, value } of PARIS.formatToParts(new Date(t * 1000))) p[type] = value;
  const offset = (p.timeZoneName || "").replace(/^GMT/, "") || "+00:00";
  return { date: p.year + "-" + p.month + "-" + p.day, time: p.hour + ":" + p.minute + ":" + p.second,
    offset: offset };
}
// Whether t's wall-clock time in Paris is also another instant's (an hour before or after).
function ambiguous(t) {
  const p = parisParts(t), wall = p.date + " " + p.time;
  for (const other of [t - 3600, t + 3600]) {
    const q = parisParts(other);
    if (q.date + " " + q.time === wall) return true;
  }
  return false;
}
function paris(t) {
  const p = parisParts(t);
  return p.date + " " + p.time + (ambiguous(t) ? " " + p.offset : "");
}
function when(t) { return t === null ? "–" : paris(t) + " (Paris)"; }

// The time axis' labels: the time (to the precision the tick spacing needs), and below it the date
// on the first tick and where the day changes, and the offset where the time is ambiguous. A label
// that would overlap the previous one is left out.
const AXIS_FONT = "12px system-ui, sans-serif";
const measure = document.createElement("canvas").getContext("2d");
function labelWidth(text) {
  measure.font = AXIS_FONT;
  return Math.max(...text.split("\n").map(line => measure.measureText(line).width));
}
function timeTicks(u, splits, axisIdx, space, incr) {
  let lastDate = null, lastRight = -Infinity;
  return splits.map(t => {
    const p = parisParts(t);
    let time = incr >= 86400 ? "" : incr >= 60 ? p.time.slice(0, 5) : p.time;
    if (incr < 1) time += "." + String(Math.round((t % 1 + 1) % 1 * 1000)).padStart(3, "0");
    const off = incr < 86400 && ambiguous(t) ? p.offset : "";
    const below = [];
    if (p.date !== lastDate || incr >= 86400) below.push(p.date);
    if (off) below.push(off);
    const label = time ? [time, ...below].join("\n") : below.join(" ");
    const x = u.valToPos(t, "x"), w = labelWidth(label);
    if (x - w / 2 < lastRight + 8) return "";
    lastRight = x + w / 2;
    lastDate = p.date;
    return label;
  });
}
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
  nav.append(el("a", { href: route("site", site), text: "site " + site }),
    el("a", { href: route("jobs", site), text: "jobs" }));
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

  // The URLs of one series request: one per piece of the nodes (doc/dashboard.md, Limits).
  urls(start, end, extra) {
    const o = this.opts;
    const pieces = [];
    let piece = [], length = 0;
    for (const node of o.nodes) {
      const size = encodeURIComponent(node).length + 3;
      if (piece.length && length + size > MAX_NODES_PARAM) {
        pieces.push(piece);
        piece = [];
        length = 0;
      }
      piece.push(node);
      length += size;
    }
    pieces.push(piece);
    return pieces.map(nodes => {
      const p = new URLSearchParams();
      p.set("nodes", nodes.join(","));
      p.set("metrics", o.metrics.join(","));
      p.set("start", start.toFixed(6));
      p.set("end", end.toFixed(6));
      if (o.rates) p.set("rates", "1");
      for (const [k, v] of Object.entries(extra)) p.set(k, v);
      return apiUrl("sites", o.site, "series") + "?" + p.toString();
    });
  }

  // The series of [start, end] (all pieces of the nodes, merged into one answer).
  async fetch(start, end, extra) {
    const urls = this.urls(start, end, extra);
    const answers = await Promise.all(urls.map(getJson));
    const d = answers[0];
    for (const more of answers.slice(1)) {
      d.series = d.series.concat(more.series);
      d.rows += more.rows;
    }
    d.series.sort((a, b) => a.device.localeCompare(b.device, "en", { numeric: true }) ||
      a.metric.localeCompare(b.metric));
    return { answer: d, url: urls[0], pieces: urls.length };
  }

  // Draws [start, end]; what went wrong is said in the plot's box (never only in the header).
  async load(start, end) {
    let got;
    try {
      got = await this.fetch(start, end, { width: String(this.width()) });
    } catch (e) {
      this.fail(e, start, end);
      return;
    }
    const { answer, url, pieces } = got;
    this.record.query = url;
    this.record.pieces = pieces;
    this.record.queries += 1;
    this.record.error = null;
    this.info.classList.remove("error");
    this.answer = answer;
    this.render();
  }

  // The plot could not be drawn: why, in its box (what was drawn before stays).
  fail(e, start, end) {
    const message = String(e.message || e);
    console.warn(message, e.url || "");
    this.record.error = message;
    this.record.queries += 1;
    this.info.classList.add("error");
    this.info.textContent = "Not drawn (" + paris(start) + " to " + paris(end) + "): " + message;
  }

  // Per series, in seconds, the longest run without a sample that is still drawn as a line: a few
  // of its sample periods. The period is the median, over its buckets with samples, of the step
  // over the bucket's count (several samples a bucket) or of the time to its next bucket with
  // samples (buckets finer than the samples).
  static gapSeconds(s, step) {
    const periods = [];
    let previous = -1;
    s.count.forEach((c, i) => {
      if (!c) return;
      if (c >= 2) periods.push(step / c);
      else if (previous >= 0) periods.push((i - previous) * step);
      previous = i;
    });
    if (!periods.length) return Infinity;
    periods.sort((a, b) => a - b);
    return Math.max(GAP_PERIODS * periods[Math.floor(periods.length / 2)], 1.5 * step);
  }

  // Columns for uPlot: x, then per series mean, min, max.
  render() {
    const d = this.answer;
    if (!d.series.length) {
      // No rows: a sentence, not an empty box.
      Object.assign(this.record, { series: [], points: 0, rows: 0, step: d.step, buckets: d.buckets,
        start: d.start, end: d.start + d.step * d.buckets, empty: true });
      if (this.uplot) this.uplot.destroy();
      this.uplot = null;
      this.record.uplot = null;
      this.info.textContent = "No rows of " + this.opts.metrics.join(", ") + " for " +
        (this.opts.nodes.length === 1 ? this.opts.nodes[0] : countOf(this.opts.nodes.length, "node")) +
        " from " + paris(d.start) + " to " + paris(d.start + d.step * d.buckets) +
        " (not measured then, or not kept in this store)" +
        (this.view ? " — double-click or ◀ ▶ to move" : "");
      if (this.view && !this.emptyReset) {
        this.emptyReset = true;
        this.box.addEventListener("dblclick", () => this.zoom(null, null));
      }
      return;
    }
    this.record.empty = false;
    const cols = [d.time];
    const series = [{}];
    const bands = [];
    const names = [];
    const gapSeconds = [0];
    const unit = this.opts.unit;
    // uPlot's gaps (canvas pixels around a run of nulls) kept only where the run lasts longer
    // than the series' few sample periods: in between, the line joins its samples.
    const gaps = (u, i, i0, i1, found) => {
      const perPixel = (u.scales.x.max - u.scales.x.min) / u.bbox.width;
      return found.filter(([a, b]) => (b - a) * perPixel > this.gapSecondsNow[i]);
    };
    d.series.forEach((s, i) => {
      const color = COLORS[i % COLORS.length];
      const shown = Object.entries(s.labels || {}).filter(([k]) => k !== "_device_orig");
      const label = s.device + (shown.length ? " " + shown.map(([k, v]) => k + "=" + v).join(",") : "") +
        (this.opts.metrics.length > 1 ? " " + s.metric : "");
      names.push(label);
      cols.push(s.mean, s.min, s.max);
      const base = series.length;
      const gap = SeriesPlot.gapSeconds(s, d.step);
      gapSeconds.push(gap, gap, gap);
      const value = (u, v) => si(v, unit);
      series.push({ label: label, stroke: color, width: 1.5, spanGaps: false, gaps: gaps, value: value },
        { label: label + " min", stroke: color + "55", width: 0.5, spanGaps: false, gaps: gaps, value: value },
        { label: label + " max", stroke: color + "55", width: 0.5, spanGaps: false, gaps: gaps, value: value });
      bands.push({ series: [base + 2, base + 1], fill: color + "22" });
    });
    let points = 0;
    for (const s of d.series) for (const c of s.count) if (c > 0) points++;
    Object.assign(this.record, { series: names, points: points, rows: d.rows, step: d.step,
      buckets: d.buckets, start: d.start, end: d.start + d.step * d.buckets });
    this.info.textContent = fmt(d.rows, 0) + " rows in " + d.series.length + " series, " +
      d.buckets + " buckets of " + si(d.step, "s") + " (min, max and mean per pixel)" +
      (this.view ? " — zoomed: drag to zoom further, ◀ ▶ to pan, double-click to reset"
                 : " — drag to zoom, ◀ ▶ to pan");
    this.gapSecondsNow = gapSeconds;
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
      axes: [
        // Room for three lines: time, date, UTC offset (the first tick of a night the clocks go back).
        { font: AXIS_FONT, space: 90, values: timeTicks, size: 72 },
        { font: AXIS_FONT, values: (u, splits) => siTicks(splits, unit),
          size: (u, values) => 14 + Math.max(40, ...(values || []).map(labelWidth)) },
      ],
      legend: { show: true, live: false },
      cursor: { drag: { x: true, y: false } },
      hooks: {
        draw: [u => self.drawPhases(u)],
        setCursor: [u => self.showTooltip(u)],
        setSeries: [(u, i, opts) => self.followSeries(u, i, opts)],
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
    // The legend names each series once: its min and max (the band) follow its mean.
    const rows = this.uplot.root.querySelectorAll(".u-legend .u-series");
    const shift = this.uplot.series.length - rows.length;  // 1 when the legend has no x row
    rows.forEach((row, i) => {
      if ((i + shift) % 3 !== 1) row.classList.add("band-edge");
    });
    this.tooltip = el("div", { class: "tooltip" });
    this.tooltip.hidden = true;
    this.uplot.over.append(this.tooltip);
    this.uplot.over.addEventListener("mouseleave", () => { this.tooltip.hidden = true; });
    this.uplot.over.addEventListener("dblclick", () => this.zoom(null, null));
  }

  // Hiding or showing a series from the legend hides or shows its band with it.
  followSeries(u, i, opts) {
    if (i % 3 !== 1 || opts.show === undefined) return;
    for (const j of [i + 1, i + 2]) {
      if (u.series[j].show !== opts.show) u.setSeries(j, { show: opts.show }, false);
    }
  }

  // At the cursor: the time and the series nearest to it (mean, and min to max over the pixel).
  showTooltip(u) {
    const tip = this.tooltip, d = this.answer;
    const idx = u.cursor.idx;
    if (!tip || !d || idx === null || idx === undefined || u.cursor.left < 0) {
      if (tip) tip.hidden = true;
      return;
    }
    const y = u.posToVal(u.cursor.top, "y");
    const near = [];
    d.series.forEach((s, k) => {
      if (!u.series[1 + 3 * k].show) return;
      // The nearest bucket with a value, a few pixels around the cursor.
      for (let r = 0; r <= 4; r++) {
        for (const j of [idx - r, idx + r]) {
          if (j < 0 || j >= s.mean.length || s.mean[j] === null) continue;
          near.push({ s: s, label: u.series[1 + 3 * k].label, j: j, distance: Math.abs(s.mean[j] - y) });
          r = 5;
          break;
        }
      }
    });
    if (!near.length) {
      tip.hidden = true;
      return;
    }
    near.sort((a, b) => a.distance - b.distance);
    const unit = this.opts.unit;
    const lines = [paris(d.time[idx])];
    for (const n of near.slice(0, 8)) {
      lines.push(n.label + ": " + si(n.s.mean[n.j], unit) +
        (n.s.min[n.j] !== n.s.max[n.j] ? " (" + si(n.s.min[n.j], unit) + " to " + si(n.s.max[n.j], unit) + ")" : ""));
    }
    if (near.length > 8) lines.push("and " + (near.length - 8) + " more series");
    tip.textContent = lines.join("\n");
    tip.hidden = false;
    const left = u.cursor.left + 14, top = u.cursor.top + 14;
    tip.style.left = (left + tip.offsetWidth > u.over.clientWidth ? u.cursor.left - 14 - tip.offsetWidth : left) + "px";
    tip.style.top = Math.min(top, Math.max(0, u.over.clientHeight - tip.offsetHeight)) + "px";
  }

  // The job's phases (when known) as marks: a line at each start, and its name inside the phase
  // (shortened with "…" to fit, left out when even that does not fit).
  drawPhases(u) {
    const phases = this.opts.phases || [];
    if (!phases.length) return;
    const ctx = u.ctx;
    const left = u.bbox.left, right = u.bbox.left + u.bbox.width;
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, u.bbox.top, u.bbox.width, u.bbox.height);
    ctx.clip();
    ctx.strokeStyle = "#88888888";
    ctx.fillStyle = "#555";
    ctx.font = (11 * devicePixelRatio) + "px sans-serif";
    ctx.textAlign = "left";
    ctx.textBaseline = "alphabetic";
    ctx.setLineDash([4, 4]);
    const pad = 3 * devicePixelRatio;
    phases.forEach((p, i) => {
      const x = u.valToPos(p.start, "x", true);
      const next = i + 1 < phases.length ? phases[i + 1].start : p.end;
      const xEnd = Math.min(right, u.valToPos(next, "x", true));
      if (xEnd <= left || x >= right) return;
      if (x >= left) {
        ctx.beginPath();
        ctx.moveTo(x, u.bbox.top);
        ctx.lineTo(x, u.bbox.top + u.bbox.height);
        ctx.stroke();
      }
      if (!p.name) return;
      const from = Math.max(x, left) + pad, room = xEnd - from - pad;
      let text = p.name;
      if (ctx.measureText(text).width > room) {
        let n = text.length - 1;
        while (n > 0 && ctx.measureText(text.slice(0, n) + "…").width > room) n--;
        if (n === 0) return;
        text = text.slice(0, n) + "…";
      }
      ctx.fillText(text, from, u.bbox.top + 12 * devicePixelRatio);
    });
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
    this.load(start, end);
  }

  // Live: the new rows since the last bucket, at the same step, appended.
  async tail(now) {
    this.opts.end = now;
    if (this.view || !this.answer) return;
    const d = this.answer;
    if (d.buckets > 2 * this.width()) return this.load(this.opts.start, now);
    const last = d.buckets - 1;
    const from = d.start + d.step * last;
    const { answer: t, url } = await this.fetch(from, now, { step: String(d.step) });
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

// An error of no one part of the page (a live update): in the header, the server's words only.
function showError(e) {
  console.warn(e);
  document.getElementById("status").textContent = String(e.message || e);
}

// ---------------------------------------------------------------- pages

// A table in a box that scrolls sideways when the window is narrower than the table.
function scrolling(table) { return el("div", { class: "table-box" }, table); }

async function sitesPage(main) {
  const data = await getJson(apiUrl("sites"));
  main.replaceChildren(el("h1", { text: "Sites" }));
  const t = el("table", {}, el("tr", {}, el("th", { text: "site" }), el("th", { text: "nodes" }),
    el("th", { text: "" })));
  for (const s of data.sites) {
    t.append(el("tr", {}, el("td", {}, el("a", { href: route("site", s.uid), text: s.uid })),
      el("td", { class: "num", text: s.nodes }),
      el("td", {}, el("a", { href: route("jobs", s.uid), text: "jobs" }))));
  }
  main.append(scrolling(t), el("p", { class: "muted", text: "The Kwollect API is at " + data.api }));
}

async function sitePage(main, site) {
  setNav(site);
  const data = await getJson(apiUrl("sites", site));
  main.replaceChildren(el("h1", { text: "Site " + data.uid }));
  const box = el("div", { class: "clusters" });
  let total = 0, measured = 0, nodes = 0;
  for (const c of data.clusters) {
    const t = el("table", { "data-cluster": c.uid }, el("tr", {}, el("th", { text: "node" }),
      el("th", { text: "power (W)" }), el("th", { text: "from" }), el("th", { text: "jobs" })));
    for (const n of c.nodes) {
      nodes++;
      if (n.power) {
        total += n.power.watts;
        measured++;
      }
      const jobs = el("td", {});
      for (const j of n.jobs) jobs.append(el("a", { href: route("job", site, j), class: "running", text: j }), " ");
      t.append(el("tr", { "data-node": n.uid },
        el("td", {}, el("a", { href: route("node", site, n.uid), text: n.uid })),
        el("td", { class: "num power", text: n.power ? fmt(n.power.watts, 1) : "–" }),
        el("td", { class: "muted", text: n.power ? n.power.metric : "no power data in the last minute" }),
        jobs));
    }
    box.append(el("div", {}, el("h2", { text: c.uid + " (" + c.nodes.length + " nodes, " + c.model + ")" }), scrolling(t)));
  }
  // A sum over no node is not 0 W: a store of past experiments has no latest power.
  const latest = measured === 0
    ? "no node has power data in the last minute (a store of past jobs: see their pages)"
    : si(total, "W") + (measured < nodes ? " (the " + measured + " of " + nodes +
      " nodes with power data in the last minute)" : "");
  main.append(el("p", { id: "site-total", text: "Latest power of the site: " + latest }), box);
}

async function jobsPage(main, site) {
  setNav(site);
  const data = await getJson(apiUrl("sites", site, "jobs"));
  main.replaceChildren(el("h1", { text: "Jobs of " + site }));
  const t = el("table", { id: "jobs" }, el("tr", {}, ...["job", "user", "state", "nodes", "start",
    "duration", "types", "energy"].map(h => el("th", { text: h }))));
  for (const j of data.jobs) {
    const energy = el("td", { class: "num energy", text: j.state === "waiting" ? "not started" : "…" });
    t.append(el("tr", { "data-job": j.uid },
      el("td", {}, el("a", { href: route("job", site, j.uid), text: j.uid })),
      el("td", { text: j.user }),
      el("td", { class: j.state === "running" ? "running" : "", text: j.state }),
      el("td", { title: j.nodes.join(" "), text: j.nodes.length + ": " + j.nodes.slice(0, 3).join(", ") + (j.nodes.length > 3 ? "…" : "") }),
      el("td", { text: when(j.start) }),
      el("td", { class: "num", text: duration(j.duration_s) }),
      el("td", { text: j.types.join(", ") }), energy));
    if (j.state !== "waiting") {
      getJson(apiUrl("sites", site, "jobs", j.uid, "energy"))
        .then(e => {
          const i = e.total.interval;
          energy.textContent = fmt(e.total.wh, 2) + (i ? " ± " + fmt(i.half_width_joules / 3600, 2) : "") +
            " Wh (" + fmt(100 * e.total.coverage, 1) + " %)";
        })
        .catch(e => {
          energy.textContent = "not computed";
          energy.classList.add("error");
          energy.title = String(e.message) + " (the job's page says more)";
        });
    }
  }
  main.append(scrolling(t));
}

function energyTable(report) {
  const t = el("table", { id: "energy" }, el("tr", {}, ...["node", "metric", "energy (J)", "± 95 % (J)", "Wh",
    "mean (W)", "peak (W)", "coverage", "gaps", "gap J"].map(h => el("th", { text: h }))));
  // The interval's terms on demand (doc/energy.md, "How far to trust it").
  const terms = i => i ? Object.entries(i.terms_joules).map(([k, v]) =>
    k.replace(/_/g, " ") + ": " + (v === null ? "unknown" : fmt(v, 1) + " J")).join(", ") : "";
  const row = (name, metric, f, cls) => el("tr", { class: cls || "" }, el("td", { text: name }),
    el("td", { text: metric }), el("td", { class: "num joules", text: f ? fmt(f.joules, 1) : "–" }),
    el("td", { class: "num interval", title: terms(f && f.interval),
      text: f && f.interval ? fmt(f.interval.half_width_joules, 1) : "–" }),
    el("td", { class: "num", text: f ? fmt(f.wh, 3) : "–" }),
    el("td", { class: "num", text: f ? fmt(f.mean_watts, 1) : "–" }),
    el("td", { class: "num", text: f ? fmt(f.peak_watts, 1) : "–" }),
    el("td", { class: "num", text: f ? fmt(100 * f.coverage, 2) + " %" : "–" }),
    el("td", { class: "num", text: f ? f.gaps : "–" }),
    el("td", { class: "num", text: f ? fmt(f.gap_joules, 1) : "–" }));
  for (const n of report.nodes) row && t.append(row(n.node, n.metric || n.reason || "none", n.window));
  t.append(row("total", "", report.total, "total"));
  const box = scrolling(t);
  if (report.nodes.length > 20) box.classList.add("tall");
  return box;
}

async function jobPage(main, site, id) {
  setNav(site);
  const job = await getJson(apiUrl("sites", site, "jobs", id));
  main.replaceChildren(el("h1", { text: "Job " + site + ":" + job.uid + " (" + job.state + ")" }));
  if (job.state === "waiting") {
    // Nothing to plot or count yet: a plot of its (empty) window would span years.
    const wait = job.start - job.now;
    main.append(el("p", { id: "not-started", text: "This job has not started: it starts at " +
      when(job.start) + ", in " + duration(wait) + ". Its plots and energy are here once it runs." }),
      el("p", { text: "user " + job.user + ", " + countOf(job.nodes.length, "node") + ": " + job.nodes.join(", ") }));
    return;
  }
  main.append(el("p", { text: "user " + job.user + ", " + countOf(job.nodes.length, "node") + ", from " +
    when(job.window.start) + " for " + duration(job.duration_s) + ", types: " +
    (job.types.join(", ") || "none") }));
  const q = "job_id=" + encodeURIComponent(job.uid);
  main.append(el("div", { class: "toolbar" },
    el("a", { id: "download-jsonl", href: apiUrl("sites", site, "rows") + "?format=jsonl&" + q, text: "rows as JSON Lines" }),
    el("a", { id: "download-csv", href: apiUrl("sites", site, "rows") + "?format=csv&" + q, text: "rows as CSV" }),
    el("span", {}, "archive it: ", el("code", { id: "backup-command", text: job.backup_command }))));
  const energyBox = el("div", {}, el("h2", { text: "Energy (as kwatt energy computes it)" }),
    el("p", { id: "energy-wait", class: "muted", text: "computed once the plots are drawn…" }));
  main.append(energyBox);
  const loadEnergy = async () => {
    let report;
    try {
      report = await getJson(apiUrl("sites", site, "jobs", id, "energy"));
    } catch (e) {
      // In its place, with the command that computes it without the dashboard's limits.
      console.warn(String(e.message || e), e.url || "");
      state.energyError = String(e.message || e);
      if (state.energy) {  // live: the last table stays, the error below it
        energyBox.append(el("p", { class: "error", text: "Not computed again: " + state.energyError }));
        return;
      }
      energyBox.replaceChildren(el("h2", { text: "Energy (as kwatt energy computes it)" }),
        el("p", { id: "energy-error", class: "error", text: "Not computed: " + state.energyError }),
        el("p", {}, "kwatt energy computes it: ", el("code", { text: job.energy_command })));
      return;
    }
    state.energy = report;
    state.energyError = null;
    const notes = "window " + report.start + " .. " + report.end + "; " + (report.notes || []).join("; ");
    // A note may name a thousand nodes: its start, the whole text on demand.
    energyBox.replaceChildren(el("h2", { text: "Energy (as kwatt energy computes it)" }), energyTable(report),
      notes.length <= 400 ? el("p", { class: "muted", text: notes })
        : el("details", { class: "muted" }, el("summary", { text: notes.slice(0, 300) + "…" }), notes));
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
    p.load(p.opts.start, p.opts.end);
  });
  main.insertBefore(el("div", { class: "toolbar" }, picker), plots);
  await Promise.all(made.map(p => p.load(start, end)));
  state.plotsDrawnMs = performance.now();  // since the navigation started: the first paint
  // The energy reads the whole job again: asked once the plots are drawn, so that it does not
  // take the server's cores from them.
  await loadEnergy();
  state.energyShownMs = performance.now();
  if (job.state === "running") {
    document.getElementById("status").textContent = "live";
    let energyTick = 0;
    state.timers.push(setInterval(async () => {
      try {
        const now = (await getJson(apiUrl("sites"))).now;
        await Promise.all(made.map(p => p.tail(now)));
        if (++energyTick % ENERGY_EVERY === 0) await loadEnergy();
      } catch (e) { showError(e); }
    }, LIVE_MS));
  }
}

async function nodePage(main, site, node, params) {
  setNav(site);
  const info = await getJson(apiUrl("sites", site, "nodes", node));
  const now = info.now;
  // The window: the last `window` seconds, or one of the node's jobs (`job`). By default the last
  // hour when the node has power now or runs a job, else its newest job that started: a store of
  // past experiments has nothing in the last hour.
  const started = info.jobs.filter(j => j.state !== "waiting");
  let span = null, job = null;
  if (params.has("job")) {
    const uid = strictNumber(params.get("job"), "job (in the address)", { integer: true });
    job = info.jobs.find(j => j.uid === uid);
    if (!job) throw new Error("node " + node + " ran no job " + uid);
  } else if (params.has("window")) {
    span = strictNumber(params.get("window"), "window (seconds, in the address)", { min: 1 });
  } else if (!info.power && started.length && !started.some(j => j.state === "running")) {
    job = started[0];
  } else {
    span = 3600;
  }
  const [start, end] = job ? [job.window.start, job.window.end] : [now - span, now];
  main.replaceChildren(el("h1", { text: "Node " + node + " (" + info.cluster + ")" }));
  const choose = el("select", { id: "window" });
  for (const [s, label] of NODE_SPANS) {
    const o = el("option", { value: "window=" + s, text: "last " + label });
    if (s === span) o.selected = true;
    choose.append(o);
  }
  if (span !== null && !NODE_SPANS.some(([s]) => s === span)) {
    choose.append(el("option", { value: "window=" + span, text: "last " + duration(span) }));
    choose.lastChild.selected = true;
  }
  for (const j of started) {
    const o = el("option", { value: "job=" + j.uid, text: "job " + j.uid + " (" + j.user + "), " +
      paris(j.window.start) + ", " + duration(j.window.end - j.window.start) });
    if (job && j.uid === job.uid) o.selected = true;
    choose.append(o);
  }
  choose.addEventListener("change", () => { location.hash = route("node", site, node) + "?" + choose.value; });
  const picker = el("select", { id: "metric-picker" }, el("option", { value: "", text: "add a metric…" }));
  for (const m of info.metrics) picker.append(el("option", { value: m, text: m }));
  main.append(el("div", { class: "toolbar" }, choose, picker));
  main.append(el("p", { class: "muted", text: "from " + when(start) + " to " + when(end) }));
  const plots = el("div", {});
  main.append(plots);
  const add = m => {
    if (state.plots[m]) return null;
    const p = new SeriesPlot(m, plots, { site: site, nodes: [node], metrics: [m], start: start,
      end: end, title: m + (m.endsWith("_total") ? " (per second)" : ""),
      unit: POWER_METRICS.includes(m) ? "W" : NETWORK_METRICS.includes(m) ? "B/s" : "",
      rates: m.endsWith("_total") });
    return p.load(p.opts.start, p.opts.end);
  };
  picker.addEventListener("change", () => { if (picker.value) add(picker.value); });
  const first = info.metrics.filter(m => POWER_METRICS.includes(m) || NETWORK_METRICS.includes(m));
  await Promise.all(first.map(add).filter(Boolean));
}

async function show() {
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

window.addEventListener("hashchange", show);
window.addEventListener("load", show);
