// The live page of a ranker served by `python -m study.online serve` (no library, no network
// beyond the server). It polls the small `state` every second and, when something changed, fetches
// only what is new: the told rows after the last one it has, the ranking, the decision and the
// open tickets; the diagram at most every 5 s. Reads need a token only on a non-loopback server:
// open the page as .../#token=TOKEN (kept for this tab only).
"use strict";
(() => {
  const API = "api/v1/";
  const POLL_MS = 1000, DIAGRAM_MS = 5000, RECENT = 12, PENDING = 12, MAX_POINTS = 2000;
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("token")) {
    sessionStorage.setItem("study-online-token", hash.get("token"));
    history.replaceState(null, "", location.pathname + location.search);
  }
  let token = sessionStorage.getItem("study-online-token");
  const page = {config: null, seen: null, force: false, lastSeq: 0, points: [], recent: [], busy: false, again: false,
                diagramAt: 0, diagramFor: null, diagramWanted: null, diagramUrl: null, needToken: false};
  const $ = (id) => document.getElementById(id);
  window.studyPageLoadedAt = Date.now();  // the browser test checks that the page never reloads

  class TokenNeeded extends Error {
    constructor(status) {
      super(status === 403 ? "wrong token" : "token needed");
      this.status = status;
    }
  }

  async function get(path, params) {
    const url = new URL(API + path, location.href);
    for (const [k, v] of Object.entries(params || {})) url.searchParams.set(k, v);
    const response = await fetch(url, {headers: token ? {Authorization: "Bearer " + token} : {}, cache: "no-store"});
    if (response.status === 401 || response.status === 403) throw new TokenNeeded(response.status);
    if (!response.ok) throw new Error(`${path}: ${response.status}`);
    return response;
  }
  const json = async (path, params) => (await get(path, params)).json();

  function controls() {
    return {level: $("level").value, anytime: $("anytime").value, se: $("se").value, scale: $("scale").value};
  }

  function cell(row, text, className) {
    const td = document.createElement("td");
    td.textContent = text;
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function fixed(value, digits = 3) {
    return value === null || value === undefined ? "–" : value.toFixed(digits);
  }

  function ago(seconds) {
    seconds = Math.max(0, seconds);
    if (seconds < 90) return `${Math.round(seconds)} s`;
    if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
    return `${(seconds / 3600).toFixed(1)} h`;
  }

  function setStatus(text, bad) {
    const status = $("status");
    status.textContent = text;
    status.classList.toggle("bad", Boolean(bad));
  }

  function askForToken(status403) {
    if (page.needToken) return;
    page.needToken = true;
    const status = $("status");
    const wrong = status403 && Boolean(token);
    if (wrong) sessionStorage.removeItem("study-online-token");  // a refused token is not kept
    status.textContent = wrong ? "wrong token: the server refused it; check it and try again: "
                               : "this server's reads need its token: ";
    status.classList.toggle("bad", wrong);
    status.dataset.token = wrong ? "wrong" : "needed";
    const decision = $("decision");
    decision.textContent = "locked: enter the server's token (above) to see the leaderboard";
    decision.className = "decision locked";
    delete decision.dataset.decided;
    const input = document.createElement("input");
    input.type = "password";
    input.placeholder = "token";
    const button = document.createElement("button");
    button.textContent = "use";
    button.type = "button";
    input.addEventListener("keydown", (event) => { if (event.key === "Enter") button.click(); });
    button.onclick = () => {
      token = input.value.trim();
      delete status.dataset.token;
      status.textContent = "checking the token…";
      sessionStorage.setItem("study-online-token", token);
      page.needToken = false;
      page.force = true;
      tick();
    };
    status.append(input, button);
  }

  function renderMeta(config) {
    $("title").textContent = `${config.store}: ${config.n_items} items`;
    document.title = `${config.store} · study.online`;
    $("meta").textContent = `policy ${config.policy}, d = ${config.dim}, T = ${config.T}, T0 = ${config.T0}, ` +
      `M = ${config.M}, ${config.edges ? config.edges.length + " pairs" : "every pair"} · store ${config.store_id}`;
  }

  function renderCounts(state) {
    const c = state.counts;
    $("told-count").textContent = String(state.n_told);
    $("open-count").textContent = String(c.open);
    const dl = $("counts");
    dl.replaceChildren();
    for (const [name, value] of [["asked", c.asked], ["told", c.told], ["open", c.open], ["expired", c.expired],
                                 ["comparisons", c.comparisons], ["ties", c.ties]]) {
      const dt = document.createElement("dt");
      dt.textContent = name;
      const dd = document.createElement("dd");
      dd.textContent = value.toLocaleString("en");
      dd.id = "count-" + name;
      dl.append(dt, dd);
    }
  }

  function intervalBar(row, low, high) {
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", "0 0 160 14");
    svg.setAttribute("class", "bar");
    if (row.lower === null || high <= low) return svg;
    const x = (v) => 4 + 152 * (v - low) / (high - low);
    const line = document.createElementNS(svg.namespaceURI, "rect");
    line.setAttribute("x", x(row.lower));
    line.setAttribute("y", 5);
    line.setAttribute("width", Math.max(1, x(row.upper) - x(row.lower)));
    line.setAttribute("height", 4);
    line.setAttribute("rx", 2);
    const dot = document.createElementNS(svg.namespaceURI, "circle");
    dot.setAttribute("cx", x(row.score));
    dot.setAttribute("cy", 7);
    dot.setAttribute("r", 3.5);
    svg.append(line, dot);
    return svg;
  }

  function renderTable(ranking, params) {
    const items = new Map(ranking.items.map((s) => [s.item, s]));
    const bounds = ranking.rows.filter((r) => r.lower !== null);
    const low = Math.min(...bounds.map((r) => r.lower)), high = Math.max(...bounds.map((r) => r.upper));
    const body = $("leaderboard").tBodies[0];
    body.replaceChildren();
    const digits = ranking.scale === "elo" ? 0 : 3;
    for (const row of ranking.rows) {
      const tr = document.createElement("tr");
      const stats = items.get(row.item);
      cell(tr, String(row.rank_ub ?? row.rank), "rank-ub num");
      cell(tr, row.rank_lower === null || row.rank_lower === undefined ? "–"
               : row.rank_lower === row.rank_upper ? String(row.rank_lower) : `${row.rank_lower}–${row.rank_upper}`,
           "ranks num");
      const name = cell(tr, row.name, "name");
      if (row.preliminary) {
        const badge = document.createElement("span");
        badge.className = "prelim";
        badge.textContent = "preliminary";
        badge.title = `fewer than ${ranking.min_judgments} judgments`;
        name.append(" ", badge);
        tr.classList.add("preliminary");
      }
      if (row.retired) {  // never asked again; its judgments stay in the estimate, so its row stays
        const mark = document.createElement("span");
        mark.className = "retired-mark";
        mark.textContent = "retired";
        mark.title = "retired: never asked again; its judgments still count";
        name.append(" ", mark);
        tr.classList.add("retired");
      }
      cell(tr, fixed(row.score, digits), "num score");
      cell(tr, "").appendChild(intervalBar(row, low, high));
      cell(tr, fixed(row.lower, digits), "num");
      cell(tr, fixed(row.upper, digits), "num");
      cell(tr, stats.judgments.toLocaleString("en"), "num judgments");
      cell(tr, stats.win_rate === null ? "–" : (100 * stats.win_rate).toFixed(1) + "%", "num");
      body.appendChild(tr);
    }
    const level = Math.round(100 * ranking.level);
    const kind = ranking.anytime ? `${level}% confidence sequences (anytime-valid: valid however often you look)`
                                 : `${level}% CIs (fixed-time: valid at one look fixed in advance)`;
    const se = ranking.se_method === "model" ? "model-based SE (the paper's Φ11)" : "sandwich SE (robust to ties)";
    $("leaderboard").dataset.shown = JSON.stringify(params);  // what the table shows (the browser test reads it)
    const scale = ranking.scale === "elo"
      ? `${ranking.scale_text} (P(a beats b) = 1 / (1 + 10^((R_b − R_a)/400)))` : ranking.scale_text;
    const prelim = `preliminary: fewer than ${ranking.min_judgments} judgments.` +
      (ranking.rows.some((r) => r.retired) ? " retired: a model no longer asked; its judgments still count." : "");
    $("scale-note").textContent = scale;
    $("table-note").textContent = ranking.score === "debiased"
      ? `Rank (UB): 1 + the items whose lower bound exceeds this one's upper bound (the marginal intervals ` +
        `shown). ranks: ${ranking.rank_interval ? "the " + ranking.rank_interval.split(";")[0] + " (fixed-time)"
                                                 : "not computed"}. ` +
        `score: x′θᵈᵢ, the debiased estimate at the mean told context (the interval's centre and the order), ` +
        `on the scale above; interval: ${kind}, ${se}. judgments: comparisons told that involve the item; win rate: the ` +
        `share it won (a tie counts half); ${prelim}`
      : `no intervals yet: the told outcomes do not identify θ; score: x′θᵢ, the current estimate; ${scale}; ` +
        prelim;
  }

  function renderDecision(decision) {
    const p = $("decision");
    p.textContent = decision.words;
    p.className = "decision " + (decision.decided ? "decided" : "pending");
    p.dataset.decided = String(decision.decided);
  }

  function renderPending(tickets, now) {
    const body = $("pending").tBodies[0];
    body.replaceChildren();
    for (const t of tickets.slice(0, PENDING)) {
      const tr = document.createElement("tr");
      cell(tr, String(t.id));
      cell(tr, `${t.major_name} vs ${t.other_name}`);
      cell(tr, ago(now - t.asked_at), "num");
      body.appendChild(tr);
    }
    if (tickets.length > PENDING) {
      const tr = document.createElement("tr");
      cell(tr, `… and ${tickets.length - PENDING} more`).colSpan = 3;
      body.appendChild(tr);
    }
  }

  function outcomeText(r) {
    if (r.m === 1) return r.ties ? "tie" : `${r.wins ? r.other_name : r.major_name} won`;
    return `${r.other_name} ${r.wins} of ${r.m}` + (r.ties ? ` (${r.ties} tied)` : "");
  }

  function renderRecent(now) {
    const body = $("recent").tBodies[0];
    body.replaceChildren();
    for (const r of page.recent.slice().reverse()) {
      const tr = document.createElement("tr");
      cell(tr, String(r.seq));
      cell(tr, `${r.major_name} vs ${r.other_name}`);
      cell(tr, outcomeText(r));
      cell(tr, ago(now - r.told_at), "num");
      body.appendChild(tr);
    }
  }

  function renderTimeline() {
    const svg = $("timeline");
    svg.replaceChildren();
    const points = page.points;
    const ns = svg.namespaceURI, W = 420, H = 180, L = 46, R = 10, T = 12, B = 26;
    const text = (x, y, s, anchor) => {
      const t = document.createElementNS(ns, "text");
      t.setAttribute("x", x);
      t.setAttribute("y", y);
      t.setAttribute("text-anchor", anchor || "start");
      t.textContent = s;
      svg.appendChild(t);
    };
    const axis = document.createElementNS(ns, "path");
    axis.setAttribute("d", `M${L},${T} V${H - B} H${W - R}`);
    axis.setAttribute("class", "axis");
    svg.appendChild(axis);
    if (points.length < 2) {
      text(L + 8, H / 2, "waiting for judgments");
      return;
    }
    const t0 = points[0][0], t1 = points[points.length - 1][0], n = points[points.length - 1][1];
    const x = (t) => L + (W - L - R) * (t1 > t0 ? (t - t0) / (t1 - t0) : 1);
    const y = (s) => H - B - (H - B - T) * s / Math.max(n, 1);
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" "));
    line.setAttribute("class", "series");
    svg.appendChild(line);
    const clock = (t) => new Date(1000 * t).toLocaleTimeString("en-GB");
    text(L - 4, T + 4, n.toLocaleString("en"), "end");
    text(L - 4, H - B, "0", "end");
    text(L, H - 8, clock(t0));
    text(W - R, H - 8, clock(t1), "end");
  }

  async function newRows(told) {
    if (page.lastSeq === 0 && told > 4 * MAX_POINTS) {  // a long history: its timeline sampled, the last rows read
      page.points = (await json("timeline", {points: 200})).points;
      page.lastSeq = Math.max(0, told - RECENT);
    }
    while (page.lastSeq < told) {
      const batch = await json("told", {after: page.lastSeq, limit: 1000});
      for (const r of batch.rows) {
        page.points.push([r.told_at, r.seq]);
        page.recent.push(r);
      }
      page.recent = page.recent.slice(-RECENT);
      if (batch.rows.length) page.lastSeq = batch.rows[batch.rows.length - 1].seq;
      if (batch.next_after === null) break;
    }
    if (page.points.length > MAX_POINTS) page.points = page.points.filter((_, k) => k % 2 === 0 || k === page.points.length - 1);
  }

  async function refreshDiagram(state, forced) {
    const params = controls();
    const key = `${state.n_told}/${params.level}/${params.se}`;
    page.diagramWanted = key;
    if (state.n_told === 0 || page.config.n_items > 40 || key === page.diagramFor) return;
    if (Date.now() - page.diagramAt < DIAGRAM_MS && page.diagramFor !== null && !forced) return;
    page.diagramAt = Date.now();
    const blob = await (await get("diagram.svg", {level: params.level, se: params.se})).blob();
    const img = document.createElement("img");
    if (page.diagramUrl) URL.revokeObjectURL(page.diagramUrl);
    page.diagramUrl = URL.createObjectURL(blob);
    img.src = page.diagramUrl;
    img.alt = `ranking diagram after ${state.n_told} told outcomes`;
    $("diagram").replaceChildren(img);
    page.diagramFor = key;
  }

  // The admin view: with a pool served (config.judging) and the server's token held, the judge report
  // (GET judges/report) in a card. Fetched with fetch(), not get(): a refusal here hides the card and
  // never locks the page (a judge's token is not the page's token).
  const share = (v) => v === null || v === undefined ? "–" : (100 * v).toFixed(1) + "%";
  function renderJudges(report) {
    const body = $("judges").tBodies[0];
    body.replaceChildren();
    for (const j of report.judges || []) {
      const tr = document.createElement("tr");
      cell(tr, String(j.judge), "name");  // textContent: a judge's name is data, never markup
      cell(tr, j.votes.toLocaleString("en"), "num votes");
      cell(tr, fixed(j.median_seconds, 1), "num");
      cell(tr, share(j.tie_share), "num");
      cell(tr, share(j.bothbad_share), "num");
      cell(tr, share(j.left_share), "num");
      cell(tr, `${share(j.left_lower)}–${share(j.left_upper)}`);
      cell(tr, j.flagged ? "flagged: " + (j.reason || "") : "", j.flagged ? "bad" : "");
      body.appendChild(tr);
    }
    const pct = Math.round(100 * (report.level ?? 0.95)), o = report.overall || {}, a = report.agreement || {};
    $("judges-overall").textContent = report.overall
      ? `${(o.votes ?? 0).toLocaleString("en")} votes; position bias: left wins ${share(o.left_share)} of decisive ` +
        `votes (${pct}% CI ${share(o.left_lower)}–${share(o.left_upper)}); agreement on overlapped battles: ` +
        `Krippendorff's α ${fixed(a.alpha)} (${pct}% CI ${fixed(a.lower)} to ${fixed(a.upper)})`
      : report.detail || "no votes yet";
    $("judges-note").textContent = (report.notes || []).join("; ");
    $("judges-card").hidden = false;
  }

  async function refreshJudges() {
    if (!page.config || !page.config.judging || !token || page.judgesRefused) return;
    const response = await fetch(new URL(API + "judges/report", location.href),
                                 {headers: {Authorization: "Bearer " + token}, cache: "no-store"});
    if (response.status === 401 || response.status === 403) {
      page.judgesRefused = true;
      $("judges-card").hidden = true;
      return;
    }
    if (response.status === 409) {  // too few votes for the report's fit: said, not an error
      $("judges-overall").textContent = (await response.json()).detail;
      $("judges-card").hidden = false;
      return;
    }
    if (!response.ok) throw new Error(`judges/report: ${response.status}`);
    renderJudges(await response.json());
  }

  async function update(state, params) {
    const now = Date.now() / 1000;
    renderCounts(state);
    const [pending] = await Promise.all([json("pending"), newRows(state.n_told)]);
    renderPending(pending, now);
    renderRecent(now);
    renderTimeline();
    if (state.n_asked > 0) renderTable(await json("ranking", params), params);
    renderDecision(await json("decision", params));
    await refreshJudges();
  }

  async function tick() {
    if (page.needToken) return;
    if (page.busy) {  // a change (a selector) while a poll is under way: look again as soon as it ends
      page.again = true;
      return;
    }
    page.busy = true;
    page.again = false;
    const forced = page.force;
    page.force = false;
    try {
      if (!page.config) {
        page.config = await json("config");
        renderMeta(page.config);
      }
      const state = await json("state");
      if (state.store_id !== page.config.store_id) {  // another store behind this address: start afresh
        Object.assign(page, {config: null, seen: null, lastSeq: 0, points: [], recent: [], diagramFor: null});
        return;
      }
      // the key holds the selectors as read now: a table fetched for other selectors is never kept
      const params = controls();
      if (state.n_items !== page.config.n_items || state.n_retired !== page.config.retired.length) {
        page.config = await json("config");  // a model added or retired on the live store
        renderMeta(page.config);
      }
      const key = [state.n_told, state.n_asked, state.counts.open, state.counts.expired, state.n_items,
                   state.n_retired, JSON.stringify(params)].join("/");
      if (key !== page.seen || forced) {
        await update(state, params);
        page.seen = key;
      }
      await refreshDiagram(state, forced);
      setStatus(`live · ${state.n_told.toLocaleString("en")} told`);
      $("updated").textContent = "checked " + new Date().toLocaleTimeString("en-GB");
    } catch (error) {
      if (error instanceof TokenNeeded) askForToken(error.status === 403);
      else setStatus("the server is not answering; retrying every second", true);
    } finally {
      page.busy = false;
      if (page.again) setTimeout(tick, 0);
    }
  }

  $("controls").addEventListener("change", () => {
    page.force = true;
    tick();
  });
  setInterval(tick, POLL_MS);
  tick();
})();
