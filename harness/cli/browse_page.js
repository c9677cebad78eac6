"use strict";
// The page of `guidance-ttt browse` (harness/cli/browse.py fills in the data). Every text that
// came from a model or a candidate is put into the page with textContent, never as markup.
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  const N = D.nodes, P = D.programs, M = D.meta;
  const SVG = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);
  const sign = M.direction === "min" ? -1 : 1;
  const tree = $("tree"), detail = $("detail");
  const circles = [], edges = [];
  const children = N.map(() => []);
  N.forEach((n, i) => { if (n.parent !== null && n.parent !== undefined) children[n.parent].push(i); });
  let selected = null;

  // --- header ---------------------------------------------------------------------------------
  $("title").textContent = M.title;
  document.title = M.title + " · guidance-ttt browse";
  const labels = [M.mode && M.mode + " run", M.suite && "suite " + M.suite,
    (M.committed_step + 1) + " steps committed", M.groups + "×" + M.rollouts,
    N.length + " rollouts", M.in_flight ? M.in_flight + " in flight" : null,
    (M.direction === "max" ? "higher" : "lower") + " is better", "from " + M.source,
    "written " + M.generated + (M.refresh_s ? ", reloads every " + M.refresh_s + " s" : "")];
  $("meta").textContent = labels.filter(Boolean).join(" · ");

  // --- layout and colour ----------------------------------------------------------------------
  const steps = N.map((n) => n.step);
  const minStep = Math.min(...steps), maxStep = Math.max(...steps);
  const rowOf = new Array(N.length);
  const perStep = {};
  N.forEach((n, i) => { perStep[n.step] = (perStep[n.step] || 0); rowOf[i] = perStep[n.step]++; });
  const valid = N.filter((n) => n.status === "valid" && n.score !== null).map((n) => n.score);
  const lo = valid.length ? Math.min(...valid) : 0, hi = valid.length ? Math.max(...valid) : 1;
  const STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function colour(score) {
    let t = hi > lo ? (score - lo) / (hi - lo) : 1;
    if (sign < 0) t = 1 - t;
    const x = Math.max(0, Math.min(1, t)) * (STOPS.length - 1), k = Math.min(Math.floor(x), STOPS.length - 2);
    const f = x - k, a = STOPS[k], b = STOPS[k + 1];
    return "rgb(" + a.map((v, j) => Math.round(v + (b[j] - v) * f)).join(",") + ")";
  }
  const failed = (n) => n.status !== "valid" || n.score === null;

  function draw(zoom) {
    const colW = 46 * zoom, rowH = 6 * zoom, left = 40, top = 26 + 3 * zoom;
    const maxRows = Math.max(...Object.values(perStep));
    tree.setAttribute("width", left + (maxStep - minStep + 1) * colW + 20);
    tree.setAttribute("height", top + maxRows * rowH + 20);
    const x = (i) => left + (N[i].step - minStep) * colW, y = (i) => top + rowOf[i] * rowH;
    if (!circles.length) {
      const edgeLayer = document.createElementNS(SVG, "g"), nodeLayer = document.createElementNS(SVG, "g");
      const axis = document.createElementNS(SVG, "g");
      tree.append(axis, edgeLayer, nodeLayer);
      for (let s = minStep; s <= maxStep; s++) {
        const label = document.createElementNS(SVG, "text");
        label.setAttribute("class", "axis");
        label.dataset.step = s;
        label.textContent = s < 0 ? "seed" : String(s);
        axis.append(label);
      }
      N.forEach((n, i) => {
        if (n.parent !== null && n.parent !== undefined) {
          const e = document.createElementNS(SVG, "line");
          e.setAttribute("class", "edge" + (failed(n) ? " failed" : ""));
          e.dataset.i = i;
          edgeLayer.append(e);
          edges[i] = e;
        }
        const c = document.createElementNS(SVG, "circle");
        c.setAttribute("class", "node" + (failed(n) ? " failed" : "") + (n.in_flight ? " in-flight" : ""));
        if (!failed(n)) c.setAttribute("fill", colour(n.score));
        c.dataset.i = i;
        nodeLayer.append(c);
        circles[i] = c;
      });
    }
    tree.querySelectorAll("text.axis").forEach((t) => {
      t.setAttribute("x", left + (Number(t.dataset.step) - minStep) * colW - 8);
      t.setAttribute("y", 14);
    });
    const r = Math.max(1.6, Math.min(2.6 * zoom, rowH * 0.45));
    circles.forEach((c, i) => { c.setAttribute("cx", x(i)); c.setAttribute("cy", y(i)); c.setAttribute("r", r); });
    edges.forEach((e, i) => {
      if (!e) return;
      const p = N[i].parent;
      e.setAttribute("x1", x(p)); e.setAttribute("y1", y(p)); e.setAttribute("x2", x(i)); e.setAttribute("y2", y(i));
    });
  }

  // --- path to best ---------------------------------------------------------------------------
  const lineage = (i) => { const out = []; for (let k = i; k !== null && k !== undefined; k = N[k].parent) out.unshift(k); return out; };
  // --- filters --------------------------------------------------------------------------------
  const statuses = [...new Set(N.map((n) => n.status))].sort();
  const statusBox = $("status");
  for (const [value, text] of [["all", "all"], ["valid", "valid"], ["failures", "failures"], ...statuses.filter((s) => s !== "valid").map((s) => [s, s])]) {
    const o = document.createElement("option"); o.value = value; o.textContent = text; statusBox.append(o);
  }
  const lower = N.map((n) => n.guidance.toLowerCase());
  function number(id) { const v = $(id).value; return v === "" ? null : Number(v); }
  function apply() {
    const s0 = number("step-min"), s1 = number("step-max"), lo = number("score-min"), hi = number("score-max");
    const status = statusBox.value, q = $("search").value.trim().toLowerCase();
    const shown = N.map((n, i) => {
      if (s0 !== null && n.step < s0 && n.step >= 0) return false;
      if (s1 !== null && n.step > s1) return false;
      if (status === "valid" && failed(n)) return false;
      if (status === "failures" && !failed(n)) return false;
      if (status !== "all" && status !== "valid" && status !== "failures" && n.status !== status) return false;
      if ((lo !== null || hi !== null) && n.score === null) return false;
      if (lo !== null && n.score < lo) return false;
      if (hi !== null && n.score > hi) return false;
      if (q && !lower[i].includes(q)) return false;
      return true;
    });
    let count = 0;
    shown.forEach((v, i) => {
      circles[i].classList.toggle("hidden", !v);
      circles[i].classList.toggle("match", Boolean(q) && v);
      if (edges[i]) edges[i].classList.toggle("hidden", !v || !shown[N[i].parent]);
      if (v) count++;
    });
    $("count").textContent = "showing " + count + " of " + N.length + " nodes";
    try { sessionStorage.setItem("browse-filters:" + M.title, JSON.stringify(filterState())); } catch (e) { /* storage off */ }
  }
  const FILTERS = ["step-min", "step-max", "score-min", "score-max", "search"];
  const filterState = () => ({ ...Object.fromEntries(FILTERS.map((id) => [id, $(id).value])), status: statusBox.value, best: $("best-path").checked });
  function restoreFilters() {
    let saved = null;
    try { saved = JSON.parse(sessionStorage.getItem("browse-filters:" + M.title) || "null"); } catch (e) { saved = null; }
    if (!saved) return;
    FILTERS.forEach((id) => { if (typeof saved[id] === "string") $(id).value = saved[id]; });
    if (statuses.includes(saved.status) || ["all", "valid", "failures"].includes(saved.status)) statusBox.value = saved.status;
    $("best-path").checked = saved.best !== false;
  }

  // --- the selected node ----------------------------------------------------------------------
  function el(tag, text, cls) { const e = document.createElement(tag); if (text !== undefined && text !== null) e.textContent = text; if (cls) e.className = cls; return e; }
  function link(i, text) { const a = el("a", text); a.href = "#node=" + encodeURIComponent(N[i].id); return a; }
  const fmt = (v) => (v === null || v === undefined ? "–" : Number(v).toFixed(4));
  const where = (n) => (n.step < 0 ? "seed" : "step " + n.step + " · group " + n.g + " · rollout " + n.r);
  function section(title, body) { detail.append(el("h3", title)); detail.append(body); }

  function select(i) {
    if (selected !== null) {
      circles[selected].classList.remove("selected");
      if (edges[selected]) edges[selected].classList.remove("selected");
    }
    selected = i;
    circles[i].classList.add("selected");
    if (edges[i]) edges[i].classList.add("selected");
    const n = N[i], parent = n.parent !== null && n.parent !== undefined ? N[n.parent] : null;
    detail.replaceChildren();
    detail.append(el("h2", where(n)));
    const facts = el("dl");
    const fact = (k, v) => { facts.append(el("dt", k)); const d = el("dd"); if (v instanceof Node) d.append(v); else d.textContent = v; facts.append(d); };
    fact("status", el("span", n.status + (n.in_flight ? " (in flight, not committed)" : ""), "status" + (failed(n) ? " bad" : "")));
    fact("score", fmt(n.score));
    fact("reward", fmt(n.reward));
    if (parent) {
      const delta = n.score !== null && parent.score !== null ? n.score - parent.score : null;
      fact("parent score", fmt(parent.score) + (delta === null ? "" : " (" + (delta >= 0 ? "+" : "") + delta.toFixed(4) + (sign * delta > 0 ? ", better" : sign * delta < 0 ? ", worse" : "") + ")"));
    }
    fact("verdict", n.message);
    fact("Reef receipt", n.receipt || "–");
    fact("Reef step", n.step < 0 ? "– (seed)" : String(n.step));
    fact("entry id", n.id);
    detail.append(facts);
    if (n.cases) {
      const t = el("table", null, "cases");
      n.cases.forEach((ratio, k) => { const tr = el("tr"); tr.append(el("td", "case " + (k + 1)), el("td", Number(ratio).toFixed(4))); t.append(tr); });
      section("per-case ratios", t);
    }
    const puct = el("dl");
    if (n.puct) {
      const add = (k, v) => { puct.append(el("dt", k)); const d = el("dd"); if (v instanceof Node) d.append(v); else d.textContent = v; puct.append(d); };
      add("archive node", n.puct.node);
      add("visits", String(n.puct.visits));
      add("PUCT n", n.puct.n === null || n.puct.n === undefined ? "–" : String(n.puct.n));
      add("value", fmt(n.puct.value));
      add("best child value", fmt(n.puct.best_child_value));
    }
    if (n.best_child !== null && n.best_child !== undefined) {
      puct.append(el("dt", "best child"));
      const d = el("dd"); d.append(link(n.best_child, where(N[n.best_child]) + " (" + fmt(N[n.best_child].score) + ")")); puct.append(d);
    }
    section("PUCT", n.puct || n.best_child !== null ? puct : el("p", "not an archive node (a failed or filtered-out candidate)", "empty"));
    section("guidance", n.guidance ? el("pre", n.guidance, "guidance") : el("p", "no guidance (the seed)", "empty"));
    section("summary", el("pre", n.summary || "–"));
    if (n.answer) section("executor's raw answer", el("pre", n.answer, "answer"));
    const tabs = el("div", null, "tabs"), body = el("div");
    const none = () => el("p", "no program (" + n.status + ")", "empty");
    const showProgram = () => { body.replaceChildren(P[n.program] ? el("pre", P[n.program], "program") : none()); };
    const showDiff = () => { body.replaceChildren(P[n.program] ? diffView(parent ? P[parent.program] : "", P[n.program]) : none()); };
    const bProgram = el("button", "program"), bDiff = el("button", parent ? "diff against parent" : "diff (no parent)");
    bProgram.type = bDiff.type = "button";
    bProgram.id = "tab-program"; bDiff.id = "tab-diff";
    bProgram.onclick = () => { bProgram.className = "on"; bDiff.className = ""; showProgram(); };
    bDiff.onclick = () => { bDiff.className = "on"; bProgram.className = ""; showDiff(); };
    tabs.append(bProgram, bDiff);
    section("program", tabs);
    detail.append(body);
    (parent ? bDiff : bProgram).onclick();
    const chain = el("ol", null, "lineage");
    for (const k of lineage(i)) {
      const li = el("li");
      li.append(k === i ? el("strong", where(N[k]) + " (" + fmt(N[k].score) + ")") : link(k, where(N[k]) + " (" + fmt(N[k].score) + ")"));
      chain.append(li);
    }
    section("lineage", chain);
    const kids = el("ul");
    children[i].forEach((k) => { const li = el("li"); li.append(link(k, where(N[k]) + ": " + N[k].status + " (" + fmt(N[k].score) + ")")); kids.append(li); });
    section("children (" + children[i].length + ")", children[i].length ? kids : el("p", "none", "empty"));
  }

  // --- a line diff (Myers), parent → child ----------------------------------------------------
  function diffLines(a, b) {
    let start = 0, endA = a.length, endB = b.length;
    while (start < endA && start < endB && a[start] === b[start]) start++;
    while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) { endA--; endB--; }
    const A = a.slice(start, endA), B = b.slice(start, endB), n = A.length, m = B.length, max = n + m;
    let middle;
    if (max > 6000) {
      middle = [...A.map((t) => ["-", t]), ...B.map((t) => ["+", t])];
    } else {
      const v = new Int32Array(2 * max + 2), trace = [];
      let found = max === 0;
      for (let d = 0; d <= max && !found; d++) {
        trace.push(v.slice());
        for (let k = -d; k <= d; k += 2) {
          let x = k === -d || (k !== d && v[max + k - 1] < v[max + k + 1]) ? v[max + k + 1] : v[max + k - 1] + 1;
          let y = x - k;
          while (x < n && y < m && A[x] === B[y]) { x++; y++; }
          v[max + k] = x;
          if (x >= n && y >= m) { found = true; break; }
        }
      }
      middle = [];
      let x = n, y = m;
      for (let d = trace.length - 1; d >= 0 && (x > 0 || y > 0); d--) {
        const t = trace[d], k = x - y;
        const down = k === -d || (k !== d && t[max + k - 1] < t[max + k + 1]);
        const pk = down ? k + 1 : k - 1, px = t[max + pk], py = px - pk;
        while (x > px && y > py) { middle.push([" ", A[x - 1]]); x--; y--; }
        if (d > 0) { if (down) { middle.push(["+", B[y - 1]]); y--; } else { middle.push(["-", A[x - 1]]); x--; } }
      }
      middle.reverse();
    }
    return [...a.slice(0, start).map((t) => [" ", t]), ...middle, ...a.slice(endA).map((t) => [" ", t])];
  }
  function diffView(before, after) {
    const ops = diffLines(before.split("\n"), after.split("\n"));
    const pre = el("pre", null, "diff");
    const changed = ops.map((o) => o[0] !== " ");
    const near = (k) => { for (let j = Math.max(0, k - 3); j <= Math.min(ops.length - 1, k + 3); j++) if (changed[j]) return true; return false; };
    let added = 0, removed = 0, skipped = 0;
    ops.forEach(([op, text], k) => {
      if (op === "+") added++; else if (op === "-") removed++;
      if (op === " " && !near(k)) { skipped++; return; }
      if (skipped) { pre.append(el("span", "⋯ " + skipped + " unchanged lines", "gap")); skipped = 0; }
      pre.append(el("span", op + " " + text, op === "+" ? "add" : op === "-" ? "del" : "ctx"));
    });
    if (skipped) pre.append(el("span", "⋯ " + skipped + " unchanged lines", "gap"));
    const box = el("div");
    box.append(el("p", added || removed ? "+" + added + " −" + removed + " lines" : "identical to its parent", "empty"), pre);
    return box;
  }

  // --- events ---------------------------------------------------------------------------------
  const byId = new Map(N.map((n, i) => [n.id, i]));
  function fromHash() {
    const m = /node=([^&]+)/.exec(location.hash);
    const i = m ? byId.get(decodeURIComponent(m[1])) : undefined;
    if (i !== undefined) { select(i); circles[i].scrollIntoView({ block: "nearest", inline: "nearest" }); }
  }
  tree.addEventListener("click", (ev) => {
    const i = ev.target.dataset ? ev.target.dataset.i : undefined;
    if (i !== undefined && ev.target.tagName === "circle") location.hash = "node=" + encodeURIComponent(N[Number(i)].id);
  });
  tree.addEventListener("mouseover", (ev) => {
    const i = ev.target.dataset ? ev.target.dataset.i : undefined;
    if (i === undefined || ev.target.tagName !== "circle") return;
    const n = N[Number(i)];
    $("hover").textContent = where(n) + " · " + n.status + " · " + fmt(n.score);
  });
  window.addEventListener("hashchange", fromHash);
  for (const id of [...FILTERS, "status"]) $(id).addEventListener("input", apply);
  $("best-path").addEventListener("change", () => { document.body.classList.toggle("no-best-path", !$("best-path").checked); apply(); });
  $("zoom").addEventListener("input", () => draw(Number($("zoom").value)));
  $("reset").addEventListener("click", () => { FILTERS.forEach((id) => { $(id).value = ""; }); statusBox.value = "all"; apply(); });

  // The first zoom fits the tree to the pane (a small rehearsal is drawn large, a 30 × 128 run fits).
  const pane = $("tree-pane"), cols = maxStep - minStep + 1, rows = Math.max(...Object.values(perStep));
  const fit = Math.min((pane.clientWidth - 60) / (cols * 46), (pane.clientHeight - 50) / (rows * 6));
  $("zoom").value = String(Math.max(0.5, Math.min(8, Math.floor(fit * 4) / 4 || 1)));
  draw(Number($("zoom").value));
  $("legend-lo").textContent = fmt(sign > 0 ? lo : hi);
  $("legend-hi").textContent = fmt(sign > 0 ? hi : lo);
  if (M.best !== null && M.best !== undefined) {
    for (const k of lineage(M.best)) { circles[k].classList.add("best-path"); if (edges[k]) edges[k].classList.add("best-path"); }
  }
  restoreFilters();
  document.body.classList.toggle("no-best-path", !$("best-path").checked);
  apply();
  fromHash();
  if (M.refresh_s) setTimeout(() => location.reload(), M.refresh_s * 1000);
  document.body.dataset.ready = "1";
})();
