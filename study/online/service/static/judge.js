// The judging page (/judge): a prompt and two responses side by side, the model names hidden until
// the vote, four verdicts by buttons or keys 1 2 3 4 (s: skip), then the next battle at once. No
// library, no network beyond the server. Open it as /judge#token=JUDGE_TOKEN (kept for this tab).
//
// The JSON it expects (study/online/service/judge_routes.py; docs/service.md, "Judging page"). Every
// request sends `Authorization: Bearer JUDGE_TOKEN`; a refusal is {"detail": text, "reason": code}.
//
//   GET  api/v1/battle/next
//     200 {"done": false, "battle": id, "question_id": text, "category": text or null,
//          "prompt_html": html, "left_html": html, "right_html": html, "expires_at": unix seconds}
//         (the HTML is rendered from Markdown and sanitised by the server; names are not sent)
//     200 {"done": true, "detail": text}                       nothing left to judge
//     401 no_token · 403 unknown_judge · 409 no_response (the ranker asked for a model without a response)
//   POST api/v1/battle/vote   {"battle": id, "choice": "left" | "right" | "tie" | "bothbad" | "skip"}
//     200 {"recorded": true, "winner": "model_a" | "model_b" | "tie" | "tie (bothbad)",
//          "left_model": name, "right_model": name}           (model_a is the left model)
//     200 {"recorded": false, "left_model": name, "right_model": name}   after a skip
//     401 · 403 unknown_judge or other_judge · 404 unknown_battle · 410 expired · 422 choice
"use strict";
(() => {
  const API = "api/v1/";
  const KEYS = {"1": "left", "2": "right", "3": "tie", "4": "bothbad", "s": "skip", "S": "skip"};
  const SAID = {left: "left better", right: "right better", tie: "tie", bothbad: "both bad", skip: "skipped"};
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.get("token")) {
    sessionStorage.setItem("study-judge-token", hash.get("token"));
    history.replaceState(null, "", location.pathname + location.search);
  }
  let token = sessionStorage.getItem("study-judge-token");
  let current = null, busy = false;
  const $ = (id) => document.getElementById(id);
  const buttons = () => document.querySelectorAll(".choices button");
  window.studyJudge = {shown: [], votes: 0};  // what the browser test reads

  class Refused extends Error {
    constructor(status, body) { super(body.detail || String(status)); this.status = status; this.reason = body.reason; }
  }

  async function request(path, body) {
    const response = await fetch(API + path, {
      method: body ? "POST" : "GET", cache: "no-store",
      headers: Object.assign({Authorization: "Bearer " + token}, body ? {"Content-Type": "application/json"} : {}),
      body: body ? JSON.stringify(body) : undefined});
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Refused(response.status, data);
    return data;
  }

  function status(text, bad) {
    $("status").textContent = text;
    $("status").className = bad ? "bad" : "muted";
  }

  function askToken(message) {
    $("battle").hidden = true;
    $("token-form").hidden = false;
    $("token-error").textContent = message || "";
    status("a judge token is needed", Boolean(message));
    $("token-input").focus();
  }

  function show(battle) {
    current = battle;
    $("prompt").innerHTML = battle.prompt_html;  // sanitised by the server (study/online/service/render.py)
    $("left").innerHTML = battle.left_html;
    $("right").innerHTML = battle.right_html;
    $("left").scrollTop = $("right").scrollTop = 0;
    $("category").textContent = battle.category ? "· " + battle.category : "";
    $("left-name").textContent = $("right-name").textContent = "";
    $("battle").hidden = false;
    $("token-form").hidden = true;
    for (const b of buttons()) b.disabled = false;
    window.studyJudge.shown.push(battle.battle);
    status(`battle ${window.studyJudge.shown.length} · ${window.studyJudge.votes} votes so far`);
  }

  async function next() {
    busy = true;
    try {
      const battle = await request("battle/next");
      if (battle.done) {
        current = null;
        $("battle").hidden = true;
        $("done").hidden = false;
        $("done").textContent = battle.detail;
        status(`${window.studyJudge.votes} votes · thank you`);
        return;
      }
      show(battle);
    } catch (error) {
      failed(error);
    } finally {
      busy = false;
    }
  }

  function failed(error) {
    if (error instanceof Refused && (error.status === 401 || error.status === 403) && error.reason !== "other_judge") {
      askToken(error.status === 401 ? "" : error.message);
    } else {
      status(error.message || String(error), true);
    }
  }

  async function vote(choice) {
    if (busy || !current) return;
    busy = true;
    for (const b of buttons()) b.disabled = true;
    const battle = current;
    try {
      const answer = await request("battle/vote", {battle: battle.battle, choice});
      if (answer.recorded) window.studyJudge.votes += 1;
      $("revealed").textContent = `previous (${SAID[choice]}): left was ${answer.left_model}, right was ${answer.right_model}`;
    } catch (error) {
      if (!(error instanceof Refused && error.status === 410)) {
        busy = false;
        failed(error);
        return;
      }
      $("revealed").textContent = "that battle expired before your vote; here is another";
    }
    busy = false;
    await next();
  }

  document.querySelector(".choices").addEventListener("click", (event) => {
    const button = event.target.closest("button[data-choice]");
    if (button) vote(button.dataset.choice);
  });
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || event.target.tagName === "INPUT") return;
    const choice = KEYS[event.key];
    if (choice && current) {
      event.preventDefault();
      vote(choice);
    }
  });
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("token-input").value.trim();
    if (!token) return askToken("enter your judge token");
    sessionStorage.setItem("study-judge-token", token);
    next();
  });

  if (token) next(); else askToken();
})();
