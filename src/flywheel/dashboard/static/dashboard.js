// flywheel dashboard: curves, trajectories, actor timeline and alerts of the runs the server lists.
// Plain DOM and hand-written SVG; the data comes from the server's /api/ endpoints.
"use strict";

const $ = (selector) => document.querySelector(selector);
const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"];
const DEFAULT_METRICS = [
  "reward/mean", "eval/accuracy", "loss/kl_reference", "train/mismatch_kl", "train/entropy",
  "rollout/staleness_mean", "rollout/tokens_per_s", "hacking/any_rate",
];
const TOKEN_COLOURS = { adv: { pos: [0, 150, 60], neg: [215, 40, 40] }, gap: { pos: [40, 100, 230], neg: [230, 130, 0] } };
const PAGE = 10; // prompts shown at first, and per 'show more'

const state = {
  runs: [], selected: new Set(), colours: {}, metrics: {}, alerts: {}, loaded: false,
  picked: null, open: new Set(), xaxis: "step", smoothing: 0, filter: "",
  traj: { run: "", step: "", compare: "", mode: "adv", episodes: [], other: [], shown: PAGE },
  tl: { run: "", spans: [] },
};

// ---------- small helpers ----------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  node.append(...children.flat().filter((c) => c != null).map((c) => (c instanceof Node ? c : String(c))));
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  node.append(...children.flat().filter((c) => c != null).map((c) => (c instanceof Node ? c : String(c))));
  return node;
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.setAttribute("class", value);
    else if (value === true) node.setAttribute(key, "");
    else if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value);
  }
}

// metrics.jsonl and the API write non-finite numbers as "nan", "inf", "-inf"
function num(value) {
  if (typeof value === "number") return value;
  if (value === "nan") return NaN;
  if (value === "inf") return Infinity;
  if (value === "-inf") return -Infinity;
  return value == null ? null : Number(value);
}

function fmt(value, digits = 4) {
  if (value == null) return "–";
  if (!Number.isFinite(value)) return String(value);
  const size = Math.abs(value);
  if (size !== 0 && (size >= 1e6 || size < 1e-3)) return value.toExponential(2);
  return String(+value.toPrecision(digits));
}

function extent(values) {
  return values.length ? [Math.min(...values), Math.max(...values)] : [0, 1];
}

// about n round numbers covering [a, b]
function ticks(a, b, n) {
  const span = b - a;
  const magnitude = 10 ** Math.floor(Math.log10(span / n));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => span / s <= n);
  const out = [];
  for (let k = Math.ceil(a / step); k <= Math.floor(b / step + 1e-9); k++) out.push(+(k * step).toPrecision(12));
  return out;
}

function namespace(name) {
  return name.includes("/") ? name.split("/")[0] : "other";
}

// requests in flight are counted on <body data-pending> (0: the page shows what it fetched)
async function api(path, params = {}) {
  document.body.dataset.pending = +(document.body.dataset.pending || 0) + 1;
  try {
    const response = await fetch(`${path}?${new URLSearchParams(params)}`, { cache: "no-store" });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  } finally {
    document.body.dataset.pending -= 1;
  }
}

function setStatus(text) {
  $("#status").textContent = text;
}

function fillSelect(select, options, value) {
  select.replaceChildren(...options.map(([v, label]) => el("option", { value: v }, label)));
  select.value = options.some(([v]) => String(v) === String(value)) ? value : options.length ? options[0][0] : "";
}

// ---------- runs ----------

async function loadRuns() {
  state.runs = await api("/api/runs");
  for (const run of state.runs) {
    if (!(run.name in state.colours)) state.colours[run.name] = PALETTE[Object.keys(state.colours).length % PALETTE.length];
  }
  const names = new Set(state.runs.map((r) => r.name));
  if (!state.loaded) state.runs.forEach((r) => state.selected.add(r.name));
  for (const name of [...state.selected]) if (!names.has(name)) state.selected.delete(name);
  state.loaded = true;
  renderRuns();
}

function renderRuns() {
  $("#runs").replaceChildren(
    ...state.runs.map((run) =>
      el(
        "label",
        { class: "run", "data-run": run.name },
        el("input", {
          type: "checkbox",
          checked: state.selected.has(run.name),
          onchange: (event) => {
            if (event.target.checked) state.selected.add(run.name);
            else state.selected.delete(run.name);
            loadCurves().catch(report);
          },
        }),
        el("span", { class: "swatch", style: `background:${state.colours[run.name]}` }),
        run.name,
        el("small", {}, `last step ${run.last_step ?? "–"} · ${run.rollout_steps.length} rollout dumps · ${run.alerts} alerts`),
        el("button", { type: "button", class: "link", onclick: (event) => showConfig(event, run.name).catch(report) }, "config"),
      ),
    ),
  );
  const withDumps = state.runs.filter((r) => r.rollout_steps.length);
  fillSelect($("#traj-run"), (withDumps.length ? withDumps : state.runs).map((r) => [r.name, r.name]), state.traj.run);
  const withTimeline = state.runs.filter((r) => r.timeline);
  fillSelect($("#tl-run"), (withTimeline.length ? withTimeline : state.runs).map((r) => [r.name, r.name]), state.tl.run);
}

// the run's config.yaml under the run list (a second click hides it)
async function showConfig(event, run) {
  event.preventDefault(); // the button sits in the run's label: no checkbox toggle
  const box = $("#config");
  if (box.dataset.run === run && !box.hidden) {
    box.hidden = true;
    return;
  }
  const { text } = await api("/api/config", { run });
  box.replaceChildren(el("b", {}, `${run}/config.yaml`), el("pre", {}, text || "(no config.yaml)"));
  box.dataset.run = run;
  box.hidden = false;
}

// ---------- curves ----------

async function loadCurves() {
  const runs = [...state.selected];
  const [metrics, alerts] = await Promise.all([
    Promise.all(runs.map((run) => api("/api/metrics", { run }))),
    Promise.all(runs.map((run) => api("/api/alerts", { run }))),
  ]);
  state.metrics = Object.fromEntries(runs.map((run, i) => [run, metrics[i]]));
  state.alerts = Object.fromEntries(runs.map((run, i) => [run, alerts[i]]));
  renderPicker();
  renderCharts();
  renderAlerts();
}

function allNames() {
  return [...new Set(Object.values(state.metrics).flatMap((m) => m.names))].sort();
}

function renderPicker() {
  const names = allNames();
  if (state.picked === null && names.length) {
    state.picked = new Set(DEFAULT_METRICS.filter((n) => names.includes(n)));
    if (!state.picked.size) names.slice(0, 4).forEach((n) => state.picked.add(n));
    state.picked.forEach((n) => state.open.add(namespace(n)));
  }
  const picked = state.picked || new Set();
  const groups = {};
  for (const name of names.filter((n) => n.includes(state.filter))) (groups[namespace(name)] ||= []).push(name);
  const pick = (members, on) => {
    members.forEach((n) => (on ? picked.add(n) : picked.delete(n)));
    renderPicker();
    renderCharts();
  };
  $("#picker").replaceChildren(
    ...Object.entries(groups).map(([group, members]) => {
      const details = el(
        "details",
        { "data-group": group, open: state.open.has(group) || state.filter !== "" },
        el("summary", {}, `${group} (${members.filter((n) => picked.has(n)).length}/${members.length})`),
        el(
          "div",
          { class: "group-buttons" },
          el("button", { type: "button", onclick: () => pick(members, true) }, "all"),
          el("button", { type: "button", onclick: () => pick(members, false) }, "none"),
        ),
        ...members.map((name) =>
          el(
            "label",
            {},
            el("input", { type: "checkbox", "data-metric": name, checked: picked.has(name), onchange: (e) => pick([name], e.target.checked) }),
            ` ${name}`,
          ),
        ),
      );
      details.addEventListener("toggle", () => (details.open ? state.open.add(group) : state.open.delete(group)));
      return details;
    }),
  );
}

function xOf(row) {
  if (state.xaxis === "step") return row.step;
  const elapsed = num(row["timing/elapsed_s"]);
  return elapsed != null && Number.isFinite(elapsed) ? elapsed : row.step === 0 ? 0 : null; // step 0: the initial eval
}

function seriesOf(name) {
  return [...state.selected]
    .filter((run) => state.metrics[run])
    .map((run) => ({
      run,
      colour: state.colours[run],
      points: state.metrics[run].rows
        .filter((row) => name in row)
        .map((row) => ({ x: xOf(row), step: row.step, raw: row[name], y: num(row[name]) }))
        .filter((p) => p.x != null),
    }))
    .filter((s) => s.points.length);
}

function renderCharts() {
  const names = allNames().filter((n) => state.picked && state.picked.has(n));
  $("#charts").replaceChildren(...names.map((name) => chart(name, seriesOf(name))));
  if (!names.length) $("#charts").append(el("p", { class: "empty" }, "no metric picked"));
}

// exponential moving average over the finite values (TensorBoard's smoothing)
function smoothed(points, weight) {
  let last = null;
  return points.map((p) => {
    if (!Number.isFinite(p.y)) return p.y;
    last = last == null ? p.y : last * weight + p.y * (1 - weight);
    return last;
  });
}

function chart(name, series) {
  const W = 420, H = 220, M = { l: 58, r: 12, t: 10, b: 32 };
  const caption = el(
    "figcaption",
    {},
    el("b", {}, name),
    ...series.map((s) => {
      const last = s.points[s.points.length - 1];
      return el("span", { class: "last", "data-run": s.run, style: `color:${s.colour}`, title: `${s.run}: step ${last.step}` }, fmt(last.y));
    }),
  );
  const figure = el("figure", { class: "chart", "data-metric": name }, caption);
  if (!series.length) return figure;
  const finite = series.flatMap((s) => s.points.filter((p) => Number.isFinite(p.y)).map((p) => p.y));
  let [x0, x1] = extent(series.flatMap((s) => s.points.map((p) => p.x)));
  let [y0, y1] = extent(finite);
  if (x0 === x1) [x0, x1] = [x0 - 1, x1 + 1];
  if (y0 === y1) [y0, y1] = [y0 - (Math.abs(y0) * 0.1 || 1), y1 + (Math.abs(y1) * 0.1 || 1)];
  else [y0, y1] = [y0 - (y1 - y0) * 0.04, y1 + (y1 - y0) * 0.04]; // points off the frame
  const yTicks = ticks(y0, y1, 5);
  const X = (x) => M.l + ((x - x0) / (x1 - x0)) * (W - M.l - M.r);
  const Y = (y) => H - M.b - ((y - y0) / (y1 - y0)) * (H - M.t - M.b);
  const plot = svg("svg", { class: "plot", viewBox: `0 0 ${W} ${H}`, width: W, height: H });
  for (const t of yTicks) {
    plot.append(svg("line", { class: "grid", x1: M.l, x2: W - M.r, y1: Y(t), y2: Y(t) }));
    plot.append(svg("text", { class: "tick", x: M.l - 4, y: Y(t) + 3, "text-anchor": "end" }, fmt(t, 3)));
  }
  for (const t of ticks(x0, x1, 5)) {
    plot.append(svg("line", { class: "grid", x1: X(t), x2: X(t), y1: M.t, y2: H - M.b }));
    plot.append(svg("text", { class: "tick", x: X(t), y: H - M.b + 13, "text-anchor": "middle" }, fmt(t, 4)));
  }
  const xLabel = state.xaxis === "step" ? "step" : "seconds since start (timing/elapsed_s)";
  plot.append(svg("text", { class: "axis-label", x: (M.l + W - M.r) / 2, y: H - 3, "text-anchor": "middle" }, xLabel));
  for (const s of series) {
    for (const alert of state.alerts[s.run] || []) {
      const x = state.xaxis === "step" ? alert.step : num(alert.time_s);
      if (x == null || x < x0 || x > x1) continue;
      const text = `${s.run} · alert at step ${alert.step}: ${alert.kind}: ${alert.message}`;
      plot.append(svg("line", { class: "alert-mark", x1: X(x), x2: X(x), y1: M.t, y2: H - M.b }, svg("title", {}, text)));
      const [px, py] = [X(x), M.t];
      plot.append(svg("path", { class: "alert-flag", d: `M${px - 4},${py - 6}h8l-4,6z`, fill: s.colour }, svg("title", {}, text)));
    }
  }
  for (const s of series) {
    const group = svg("g", { class: "series", "data-run": s.run });
    const ys = smoothed(s.points, state.smoothing);
    let segment = [];
    const flush = () => {
      if (segment.length > 1) group.append(svg("polyline", { points: segment.join(" "), fill: "none", stroke: s.colour, "stroke-width": 1.6 }));
      segment = [];
    };
    s.points.forEach((p, i) => (Number.isFinite(p.y) ? segment.push(`${X(p.x).toFixed(1)},${Y(ys[i]).toFixed(1)}`) : flush()));
    flush();
    for (const p of s.points) {
      const where = state.xaxis === "step" ? "" : ` · ${fmt(p.x)} s`;
      const title = svg("title", {}, `${s.run} · step ${p.step}${where} · ${name} = ${p.raw}`);
      const data = { "data-run": s.run, "data-step": p.step, "data-x": p.x, "data-value": p.raw };
      if (Number.isFinite(p.y)) {
        const opacity = state.smoothing > 0 ? 0.35 : 1;
        group.append(svg("circle", { class: "pt", cx: X(p.x), cy: Y(p.y), r: 2.5, fill: s.colour, "fill-opacity": opacity, ...data }, title));
      } else {
        group.append(svg("text", { class: "pt nonfinite", x: X(p.x), y: M.t + 8, "text-anchor": "middle", fill: "#c62828", ...data }, "×", title));
      }
    }
    plot.append(group);
  }
  figure.append(plot);
  return figure;
}

// ---------- trajectories ----------

function trajRun() {
  return state.runs.find((r) => r.name === state.traj.run);
}

async function selectTrajRun() {
  state.traj.run = $("#traj-run").value;
  const steps = trajRun() ? trajRun().rollout_steps : [];
  const options = steps.map((s) => [s, `step ${s}`]);
  fillSelect($("#traj-step"), options, steps.includes(+state.traj.step) ? state.traj.step : steps[steps.length - 1]);
  fillSelect($("#traj-compare"), [["", "—"], ...options], state.traj.compare);
  await loadEpisodes();
}

async function loadEpisodes() {
  const { run } = state.traj;
  state.traj.step = $("#traj-step").value;
  state.traj.compare = $("#traj-compare").value;
  state.traj.shown = PAGE;
  const load = (step) => (run && step !== "" ? api("/api/rollouts", { run, step }) : Promise.resolve([]));
  [state.traj.episodes, state.traj.other] = await Promise.all([load(state.traj.step), load(state.traj.compare)]);
  const episodes = [...state.traj.episodes, ...state.traj.other];
  const envs = [...new Set(episodes.map((e) => e.env).filter((e) => e != null))].sort();
  fillSelect($("#f-env"), [["", "all"], ...envs.map((e) => [e, e])], $("#f-env").value);
  const flags = [...new Set(episodes.flatMap((e) => e.guard_flags || []))].sort();
  const guardOptions = [["", "all"], ["__any", "flagged by any guard"], ["__none", "not flagged"], ...flags.map((f) => [f, f])];
  fillSelect($("#f-guard"), guardOptions, $("#f-guard").value);
  renderEpisodes();
}

function passes(e) {
  const reward = num(e.reward);
  const rmin = $("#f-rmin").value, rmax = $("#f-rmax").value, env = $("#f-env").value, guard = $("#f-guard").value;
  const valid = $("#f-valid").value, text = $("#f-text").value.toLowerCase();
  const flags = e.guard_flags || [];
  if (rmin !== "" && !(reward >= +rmin)) return false;
  if (rmax !== "" && !(reward <= +rmax)) return false;
  if (env && e.env !== env) return false;
  if (guard === "__any" && !flags.length) return false;
  if (guard === "__none" && flags.length) return false;
  if (guard && !guard.startsWith("__") && !flags.includes(guard)) return false;
  if (valid === "valid" && e.valid === false) return false;
  if (valid === "invalid" && e.valid !== false) return false;
  if (text && !`${e.prompt ?? ""}\n${e.completion ?? ""}`.toLowerCase().includes(text)) return false;
  return true;
}

// the value a token is coloured by: its advantage, or trainer minus engine logprob
function tokenValue(e, i, mode) {
  if (mode === "adv") return e.advantages ? num(e.advantages[i]) : null;
  if (!e.trainer_logprobs || !e.engine_logprobs) return null;
  const trainer = num(e.trainer_logprobs[i]), engine = num(e.engine_logprobs[i]);
  return trainer == null || engine == null ? null : trainer - engine;
}

function trained(e, i) {
  return !e.loss_mask || num(e.loss_mask[i]) !== 0;
}

// the largest |value| of the trained tokens shown (both steps when comparing): full colour
function colourScale(episodes, mode) {
  let scale = 0;
  for (const e of episodes) {
    const n = (e.completion_ids || e.completion_tokens || []).length;
    for (let i = 0; i < n; i++) {
      const v = tokenValue(e, i, mode);
      if (trained(e, i) && v != null && Number.isFinite(v)) scale = Math.max(scale, Math.abs(v));
    }
  }
  return scale || 1;
}

function tokenColour(value, scale, mode) {
  if (value == null || !Number.isFinite(value)) return null;
  const [r, g, b] = value >= 0 ? TOKEN_COLOURS[mode].pos : TOKEN_COLOURS[mode].neg;
  return `rgba(${r}, ${g}, ${b}, ${Math.min(1, Math.abs(value) / scale).toFixed(3)})`;
}

function renderLegend(scale, mode) {
  const { pos, neg } = TOKEN_COLOURS[mode];
  const what = mode === "adv" ? "advantage" : "trainer − engine logprob";
  $("#token-legend").replaceChildren(
    el("span", {}, `${what}:`),
    el("span", {}, fmt(-scale)),
    el("span", { class: "bar", style: `background:linear-gradient(90deg, rgb(${neg}), rgba(${neg},0) 50%, rgba(${pos},0) 50%, rgb(${pos}))` }),
    el("span", { id: "token-scale", "data-scale": scale, "data-mode": mode }, `+${fmt(scale)}`),
    el("span", { class: "tok env" }, "not trained (environment tokens, loss mask 0)"),
  );
}

function tokenSpan(e, i, scale, mode) {
  const tokens = e.completion_tokens || (e.completion_ids || []).map((id) => `[${id}]`);
  const text = tokens[i];
  const shown = text === "" ? "∅" : text.replace(/\n/g, "↵\n");
  if (!trained(e, i)) {
    const environment = e.weight_versions && num(e.weight_versions[i]) === -1; // no engine sampled it
    const why = environment ? "environment token (not trained)" : "model token not trained (loss mask 0)";
    return el("span", { class: "tok env", "data-i": i, title: `#${i} ${JSON.stringify(text)} · ${why}` }, shown);
  }
  const adv = e.advantages ? e.advantages[i] : null;
  const engine = e.engine_logprobs ? e.engine_logprobs[i] : null;
  const trainer = e.trainer_logprobs ? e.trainer_logprobs[i] : null;
  const gap = tokenValue(e, i, "gap");
  const version = e.weight_versions ? e.weight_versions[i] : null;
  const title = `#${i} ${JSON.stringify(text)} · advantage ${adv} · engine logprob ${engine} · trainer logprob ${trainer} · gap ${gap} · weight version ${version}`;
  const colour = tokenColour(tokenValue(e, i, mode), scale, mode);
  return el("span", { class: "tok", "data-i": i, "data-adv": adv, "data-gap": gap, style: colour ? `background-color:${colour}` : null, title }, shown);
}

function subRewards(e) {
  if (!e.sub_rewards) return null;
  try {
    const parts = Object.entries(JSON.parse(e.sub_rewards)).map(([k, v]) => `${k} ${fmt(num(v))}`);
    return parts.length ? `sub-rewards: ${parts.join(", ")}` : null;
  } catch {
    return `sub-rewards: ${e.sub_rewards}`;
  }
}

function episodeRow(e, scale, mode) {
  const flags = e.guard_flags || [];
  const meta = [
    el("span", {}, `#${e.index ?? "?"}`),
    el("span", { class: "reward" }, `reward ${fmt(num(e.reward))}`),
    subRewards(e) ? el("span", {}, subRewards(e)) : null,
    flags.length ? el("span", { class: "flag" }, `guards: ${flags.join(", ")}`) : null,
    e.weight_version != null ? el("span", {}, `weights v${e.weight_version}`) : null,
    e.turns != null ? el("span", {}, `turns ${e.turns}`) : null,
    e.tool_calls != null ? el("span", {}, `tool calls ${e.tool_calls}`) : null,
    e.truncated ? el("span", {}, "truncated") : null,
    e.valid === false ? el("span", { class: "invalid" }, `invalid${e.error ? `: ${e.error}` : ""}`) : null,
  ];
  const n = (e.completion_tokens || e.completion_ids || []).length;
  const tokens = Array.from({ length: n }, (_, i) => tokenSpan(e, i, scale, mode));
  return el(
    "div",
    { class: "episode", "data-step": e.step, "data-position": e.position, "data-index": e.index, "data-reward": e.reward },
    el("div", { class: "meta" }, meta),
    el("div", { class: "completion" }, n ? tokens : (e.completion ?? "")),
  );
}

// the episodes of one prompt: the prompt once, then each completion
function groupCard(episodes, scale, mode, heading) {
  const first = episodes[0];
  const where = [heading, `position ${first.position ?? "?"}`, first.env].filter((x) => x != null).join(" · ");
  return el(
    "div",
    { class: "group", "data-step": first.step, "data-position": first.position },
    el("div", { class: "group-head" }, where),
    el("div", { class: "prompt" }, first.prompt ?? ""),
    episodes.map((e) => episodeRow(e, scale, mode)),
  );
}

// episodes grouped by stream position (one prompt's group), in first-seen order
function byPosition(episodes) {
  const groups = new Map();
  for (const e of episodes) {
    const key = e.position ?? e.prompt;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(e);
  }
  return [...groups.values()];
}

function renderEpisodes() {
  const { episodes, other, mode, compare, step } = state.traj;
  const scale = colourScale([...episodes, ...other], mode);
  renderLegend(scale, mode);
  const kept = episodes.filter(passes);
  const box = $("#episodes");
  let total;
  if (compare === "") {
    const groups = byPosition(kept);
    total = groups.length;
    box.replaceChildren(...groups.slice(0, state.traj.shown).map((g) => groupCard(g, scale, mode, null)));
  } else {
    const prompts = [...new Set(kept.map((e) => e.prompt))].filter((p) => other.some((e) => e.prompt === p));
    total = prompts.length;
    const side = (list, at) =>
      el("div", { class: "side", "data-step": at }, byPosition(list).map((g) => groupCard(g, scale, mode, `step ${at}`)));
    box.replaceChildren(
      ...prompts.slice(0, state.traj.shown).map((prompt) =>
        el("div", { class: "pair" }, side(kept.filter((e) => e.prompt === prompt), step), side(other.filter((e) => e.prompt === prompt), compare)),
      ),
    );
    if (!prompts.length) box.append(el("p", { class: "empty" }, `no prompt shown at step ${step} was dumped at step ${compare}`));
  }
  const rewards = kept.map((e) => num(e.reward)).filter(Number.isFinite);
  const mean = rewards.length ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null;
  const unit = compare === "" ? "prompts" : `prompts also at step ${compare} (the filters choose the left side; the right shows every episode of the same prompt)`;
  $("#traj-summary").textContent = `${kept.length} of ${episodes.length} episodes pass the filters (mean reward ${fmt(mean)}); showing ${Math.min(total, state.traj.shown)} of ${total} ${unit}`;
  $("#traj-more").hidden = total <= state.traj.shown;
}

// ---------- timeline ----------

async function loadTimeline() {
  state.tl.run = $("#tl-run").value;
  state.tl.spans = state.tl.run ? await api("/api/timeline", { run: state.tl.run }) : [];
  renderTimeline();
}

// stages: twenty distinct colours, then hues spread by the golden angle
const STAGE_PALETTE = [
  "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
  "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#393b79", "#dbdb8d", "#9edae5",
];

function stageColours(stages) {
  return Object.fromEntries(stages.map((stage, i) => [stage, STAGE_PALETTE[i] || `hsl(${(i * 137.5) % 360}, 65%, 50%)`]));
}

// lane of each span within its actor's row: overlapping spans (nested stages, concurrent requests) are
// stacked, at most MAX_LANES deep; returns the lane of every span and the lanes of every actor
const MAX_LANES = 6;
function lanes(spans, actors) {
  const lane = new Map(), count = Object.fromEntries(actors.map((a) => [a, 1]));
  const ends = Object.fromEntries(actors.map((a) => [a, []]));
  for (const s of [...spans].sort((a, b) => num(a.start_s) - num(b.start_s) || num(b.end_s) - num(a.end_s))) {
    const free = ends[s.actor].findIndex((end) => end <= num(s.start_s));
    const k = free >= 0 ? free : Math.min(ends[s.actor].length, MAX_LANES - 1);
    ends[s.actor][k] = Math.max(ends[s.actor][k] ?? -Infinity, num(s.end_s));
    lane.set(s, k);
    count[s.actor] = Math.max(count[s.actor], k + 1);
  }
  return { lane, count };
}

function renderTimeline() {
  const from = $("#tl-from").value, to = $("#tl-to").value;
  let spans = state.tl.spans;
  const lastStep = Math.max(0, ...spans.map((s) => s.step ?? 0));
  if (from === "" && to === "" && spans.length > 3000) spans = spans.filter((s) => s.step > lastStep - 10); // a long run: its last 10 steps
  spans = spans.filter((s) => (from === "" || s.step >= +from) && (to === "" || s.step <= +to));
  const actors = [...new Set(spans.map((s) => s.actor))].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
  const colours = stageColours([...new Set(spans.map((s) => s.stage))].sort());
  $("#tl-legend").replaceChildren(
    ...Object.entries(colours).map(([stage, colour]) => el("span", {}, el("span", { class: "swatch", style: `background:${colour}` }), stage)),
  );
  if (!spans.length) {
    $("#gantt").replaceChildren(el("p", { class: "empty" }, state.tl.run ? `no timeline spans in ${state.tl.run} (timeline.jsonl)` : "no run"));
    $("#stage-table").replaceChildren();
    return;
  }
  const t0 = Math.min(...spans.map((s) => num(s.start_s))), t1 = Math.max(...spans.map((s) => num(s.end_s)));
  const W = Math.max(700, $("#gantt").clientWidth - 10), L = 170, R = 12, LANE = 14, GAP = 6, TOP = 22;
  const { lane, count } = lanes(spans, actors);
  const rowTop = {};
  let y = TOP;
  for (const actor of actors) [rowTop[actor], y] = [y, y + count[actor] * LANE + GAP];
  const H = y + 4;
  const X = (t) => L + ((t - t0) / (t1 - t0 || 1)) * (W - L - R);
  const chart = svg("svg", { class: "gantt", viewBox: `0 0 ${W} ${H}`, width: W, height: H });
  for (const t of ticks(0, t1 - t0 || 1, 8)) {
    chart.append(svg("line", { class: "grid", x1: X(t0 + t), x2: X(t0 + t), y1: TOP - 4, y2: H }));
    chart.append(svg("text", { class: "tick", x: X(t0 + t), y: 12, "text-anchor": "middle" }, `${fmt(t)} s`));
  }
  for (const actor of actors) {
    chart.append(svg("line", { class: "grid", x1: 0, x2: W, y1: rowTop[actor] - GAP / 2, y2: rowTop[actor] - GAP / 2 }));
    chart.append(svg("text", { class: "label", x: 4, y: rowTop[actor] + 11 }, actor));
  }
  for (const s of spans) {
    const start = num(s.start_s), end = num(s.end_s);
    const title = `${s.actor} · ${s.stage} · step ${s.step} · ${fmt(start - t0)}–${fmt(end - t0)} s (${fmt(end - start)} s)`;
    const attrs = { class: "span", x: X(start), y: rowTop[s.actor] + lane.get(s) * LANE + 1, width: Math.max(1, X(end) - X(start)), height: LANE - 2, fill: colours[s.stage] };
    const data = { "data-actor": s.actor, "data-stage": s.stage, "data-step": s.step, "data-start": s.start_s, "data-end": s.end_s };
    chart.append(svg("rect", { ...attrs, ...data }, svg("title", {}, title)));
  }
  $("#gantt").replaceChildren(chart);
  renderStageTable(spans);
}

// seconds per stage, the slowest first
function renderStageTable(spans) {
  const stats = {};
  for (const s of spans) {
    const d = num(s.end_s) - num(s.start_s);
    const entry = (stats[s.stage] ||= { count: 0, total: 0, max: 0 });
    entry.count += 1;
    entry.total += d;
    entry.max = Math.max(entry.max, d);
  }
  const rows = Object.entries(stats).sort((a, b) => b[1].total - a[1].total);
  $("#stage-table").replaceChildren(
    el("tr", {}, ["stage", "spans", "total s", "mean s", "max s"].map((c) => el("th", {}, c))),
    ...rows.map(([stage, e]) => el("tr", { "data-stage": stage }, [stage, e.count, fmt(e.total), fmt(e.total / e.count), fmt(e.max)].map((c) => el("td", {}, c)))),
  );
}

// ---------- alerts ----------

function renderAlerts() {
  const rows = [...state.selected].flatMap((run) => (state.alerts[run] || []).map((a) => ({ run, ...a })));
  $("#alert-count").textContent = rows.length;
  $("#alert-table").replaceChildren(
    el("tr", {}, ["run", "step", "time s", "kind", "message"].map((c) => el("th", {}, c))),
    ...rows.map((a) =>
      el("tr", { class: "alert", "data-run": a.run, "data-step": a.step, "data-kind": a.kind }, [a.run, a.step, fmt(num(a.time_s)), a.kind, a.message].map((c) => el("td", {}, c))),
    ),
  );
  if (!rows.length) $("#alert-table").append(el("tr", {}, el("td", { colspan: 5, class: "empty" }, "no alerts")));
}

// ---------- wiring ----------

function report(error) {
  setStatus(`error: ${error.message}`);
  console.error(error);
}

async function refresh() {
  await loadRuns();
  await Promise.all([loadCurves(), loadTimeline()]);
  setStatus(`updated ${new Date().toLocaleTimeString()}`);
}

function wire() {
  const on = (selector, event, handler) => $(selector).addEventListener(event, (e) => Promise.resolve(handler(e)).catch(report));
  on("#refresh", "click", refresh);
  let timer = null;
  on("#live", "change", (e) => {
    clearInterval(timer);
    if (e.target.checked) timer = setInterval(() => refresh().catch(report), 5000);
  });
  document.querySelectorAll("input[name=xaxis]").forEach((r) => r.addEventListener("change", (e) => ((state.xaxis = e.target.value), renderCharts())));
  on("#smoothing", "input", (e) => {
    state.smoothing = +e.target.value;
    $("#smoothing-value").textContent = e.target.value;
    renderCharts();
  });
  on("#metric-filter", "input", (e) => ((state.filter = e.target.value), renderPicker()));
  on("#traj-run", "change", selectTrajRun);
  on("#traj-step", "change", loadEpisodes);
  on("#traj-compare", "change", loadEpisodes);
  document.querySelectorAll("input[name=colour]").forEach((r) => r.addEventListener("change", (e) => ((state.traj.mode = e.target.value), renderEpisodes())));
  for (const id of ["#f-rmin", "#f-rmax", "#f-text"]) on(id, "input", () => ((state.traj.shown = PAGE), renderEpisodes()));
  for (const id of ["#f-env", "#f-guard", "#f-valid"]) on(id, "change", () => ((state.traj.shown = PAGE), renderEpisodes()));
  on("#traj-more", "click", () => ((state.traj.shown += PAGE), renderEpisodes()));
  on("#tl-run", "change", loadTimeline);
  on("#tl-from", "input", renderTimeline);
  on("#tl-to", "input", renderTimeline);
}

async function start() {
  wire();
  await refresh();
  await selectTrajRun();
  document.body.dataset.ready = "true"; // the page has drawn its first data
}

start().catch(report);
