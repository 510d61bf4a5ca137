// The evidex web inspector. Vanilla JS, no dependencies, nothing loaded from elsewhere.
// Every piece of data reaches the page through textContent or a checked attribute: never innerHTML.
"use strict";

(function () {
  const KEY_STORAGE = "evidex.apiKey";
  const $ = (id) => document.getElementById(id);

  // el("div", {class: "x", "data-testid": "y"}, "text" | Node, ...) -> Node
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined) node.setAttribute(name, String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  // A link only for http(s) URLs; anything else (javascript:, data:) is shown as plain text.
  function safeLink(url, label) {
    try {
      const parsed = new URL(url, window.location.href);
      if (parsed.protocol === "http:" || parsed.protocol === "https:") {
        return el("a", {href: parsed.href, target: "_blank", rel: "noopener noreferrer"}, label || url);
      }
    } catch (e) { /* not a URL */ }
    return el("span", {}, label || url || "");
  }

  function setStatus(text, kind) {
    const status = $("status");
    status.textContent = text;
    status.className = kind || "";
  }

  function fmtMs(ms) {
    return (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2)) + " ms";
  }

  // ---- sections ---------------------------------------------------------------------------------------
  function renderDecision(result) {
    const box = $("decision");
    clear(box);
    const rec = result.decision.recommendation;
    const sig = result.signals;
    const req = result.request;
    box.append(el("h2", {}, "Decision"));
    const head = el("div", {class: "decision-head"},
      el("span", {id: "action", class: "action action-" + rec.action}, rec.action),
      el("span", {id: "reason", class: "reason"}, rec.reason));
    box.append(head);
    const facts = el("dl", {class: "facts"});
    const fact = (term, value, id) => {
      if (value === null || value === undefined || value === "") return;
      facts.append(el("dt", {}, term), el("dd", id ? {id} : {}, value));
    };
    fact("owner of the next step", rec.owner, "owner");
    fact("stop condition", result.decision.stop_condition, "stop-condition");
    // A stop names the families a person must unblock; a re-query, the aspects to search again.
    fact(rec.action === "stop" ? "blocked families" : "re-query focus",
      rec.focus && rec.focus.length ? rec.focus.join(", ") : null, "focus");
    fact("grade", result.decision.grade);
    const conf = Number(sig.confidence);
    const meter = el("span", {class: "meter", title: "confidence"},
      el("span", {class: "meter-fill", style: null}));
    meter.firstChild.style.width = Math.max(0, Math.min(1, conf)) * 100 + "%";
    const confidence = el("span", {id: "confidence"}, conf.toFixed(2));
    facts.append(el("dt", {}, "confidence"), el("dd", {}, meter, " ", confidence));
    // Aspects and families alike: a family found but rejected is not covered, whatever the aspects say.
    const planned = sig.coverage.aspects_covered.length + sig.coverage.aspects_missing.length
      + (sig.coverage.aspects_not_in_index || []).length + result.families.length;
    fact("coverage", planned ? Number(sig.coverage.ratio).toFixed(2) : "n/a (nothing planned)");
    const principal = req.principal ? req.principal.name + " [" + req.principal.labels.join(", ") + "]" : "-";
    fact("principal", principal, "principal");
    fact("retrieved at", req.retrieved_at);
    fact("index snapshot", result.index.snapshot_id);
    box.append(facts);
  }

  function chip(text, status, testid) {
    return el("span", {class: "chip chip-" + status, "data-status": status, "data-testid": testid || null},
      text, el("span", {class: "chip-status"}, status));
  }

  function renderFamilies(result) {
    const box = $("families");
    clear(box);
    if (!result.families.length) box.append(el("span", {class: "hint"}, "no required families in this plan"));
    for (const fam of result.families) {
      const c = chip(fam.name, fam.status, "family");
      if (fam.reasons && fam.reasons.length) c.title = fam.reasons.join(", ");
      box.append(c);
    }
    const aspects = $("aspects");
    clear(aspects);
    for (const a of result.signals.coverage.aspects_covered) aspects.append(chip(a, "covered", "aspect"));
    for (const a of result.signals.coverage.aspects_missing) aspects.append(chip(a, "missing", "aspect"));
    for (const a of result.signals.coverage.aspects_not_in_index || []) aspects.append(chip(a, "not-in-index", "aspect"));
    if (!aspects.firstChild) aspects.append(el("span", {class: "hint"}, "no aspects"));
  }

  function provenanceList(p, chunk) {
    const list = el("dl", {class: "provenance"});
    const add = (term, value) => list.append(el("dt", {}, term), el("dd", {}, value === null || value === undefined ? "-" : value));
    add("version", p.source_version);
    add("published", p.published_at);
    add("expires", p.expires_at);
    add("tier", p.authority_tier);
    add("status", chunk.status);
    add("family", chunk.evidence_family);
    add("grade", chunk.grade);
    add("score", chunk.score === null ? null : Number(chunk.score).toFixed(3));
    return list;
  }

  function renderEvidence(result) {
    const box = $("evidence");
    clear(box);
    let chunks = 0;
    for (const group of result.evidence) {
      const card = el("article", {class: "card", "data-testid": "evidence-card"},
        el("h3", {}, group.title || group.source),
        el("div", {class: "source"}, group.source, " · ", group.citation_uri ? safeLink(group.citation_uri) : "no citation URI"));
      for (const c of group.chunks) {
        chunks += 1;
        const meets = c.meets && c.meets.length ? el("span", {class: "meets"}, "meets: " + c.meets.join(", ")) : null;
        const chunk = el("section", {class: "chunk", "data-record-id": c.record_id},
          el("div", {class: "chunk-head"},
            el("span", {class: "heading"}, c.heading || "(no heading)"), " ",
            c.citation ? safeLink(c.citation, "cite #" + c.citation_anchor) : el("span", {class: "warn"}, "no exact citation"),
            " ", meets),
          provenanceList(c.provenance || {}, c),
          el("pre", {class: "text"}, c.text || ""));
        if (c.verifications && c.verifications.length) {
          chunk.append(el("div", {class: "verified"}, "human-verified: " +
            c.verifications.map((v) => v.claim + " (" + v.verified_by + ", " + v.verified_at + ")").join("; ")));
        }
        card.append(chunk);
      }
      box.append(card);
    }
    if (!result.evidence.length) box.append(el("p", {class: "hint"}, "No admissible evidence."));
    $("evidence-count").textContent = chunks + " chunk" + (chunks === 1 ? "" : "s") + " from " +
      result.evidence.length + " source" + (result.evidence.length === 1 ? "" : "s");
  }

  function renderRejected(result) {
    const counts = $("rejected-counts");
    clear(counts);
    const body = $("rejected").querySelector("tbody");
    clear(body);
    const rejected = result.rejected || {rejected: [], rejected_counts: {}};
    for (const [reason, n] of Object.entries(rejected.rejected_counts || {})) {
      if (n > 0) counts.append(el("span", {class: "chip chip-rejected"}, reason + ": " + n));
    }
    if (!counts.firstChild) counts.append(el("span", {class: "hint"}, "nothing rejected"));
    for (const r of rejected.rejected || []) {
      const details = [];
      for (const [k, v] of Object.entries(r)) {
        if (k !== "record_id" && k !== "reason" && v !== null && typeof v !== "object") details.push(k + ": " + v);
      }
      body.append(el("tr", {"data-testid": "rejected-row"},
        el("td", {class: "mono"}, r.record_id), el("td", {}, r.reason), el("td", {}, details.join(" · "))));
    }
  }

  function renderTiming(result) {
    const box = $("timing");
    clear(box);
    const latency = (result.cost && result.cost.latency_ms) || {};
    const stages = Object.entries(latency).filter(([name]) => name !== "total");
    const max = Math.max(0.001, ...stages.map(([, ms]) => Number(ms)));
    for (const [name, ms] of stages) {
      const fill = el("span", {class: "bar-fill"});
      fill.style.width = Math.max(0.5, (Number(ms) / max) * 100) + "%";
      box.append(el("div", {class: "bar", "data-stage": name, "data-testid": "timing-bar"},
        el("span", {class: "bar-label"}, name), el("span", {class: "bar-track"}, fill),
        el("span", {class: "bar-value"}, fmtMs(Number(ms)))));
    }
    $("timing-total").textContent = latency.total !== undefined ? "total " + fmtMs(Number(latency.total)) : "";
  }

  function renderTrace(result) {
    const body = $("trace").querySelector("tbody");
    clear(body);
    for (const st of result.trace || []) {
      body.append(el("tr", {}, el("td", {}, st.stage), el("td", {}, st.in), el("td", {}, st.out),
        el("td", {class: "mono"}, st.decisions ? JSON.stringify(st.decisions) : "")));
    }
    $("metadata").textContent = JSON.stringify(result.retrieval_metadata, null, 2);
  }

  function render(result) {
    renderDecision(result);
    renderFamilies(result);
    renderEvidence(result);
    renderRejected(result);
    renderTiming(result);
    renderTrace(result);
    $("result").hidden = false;
  }

  // ---- the request ------------------------------------------------------------------------------------
  async function search(event) {
    event.preventDefault();
    const key = $("api-key").value.trim();
    if (!key) { setStatus("Enter an API key.", "error"); return; }
    sessionStorage.setItem(KEY_STORAGE, key);
    const body = {query: $("query").value};
    const focus = $("aspect-focus").value.trim();
    if (focus) body.aspect_focus = focus;
    const k = parseInt($("k").value, 10);
    if (!Number.isNaN(k)) body.k = k;
    $("submit").disabled = true;
    setStatus("Searching…", "busy");
    try {
      const response = await fetch("/v1/search_with_reasoning", {
        method: "POST",
        headers: {"Content-Type": "application/json", "X-API-Key": key},
        body: JSON.stringify(body),
        credentials: "omit",
        cache: "no-store",
      });
      let data = null;
      try { data = await response.json(); } catch (e) { data = null; }
      if (!response.ok) {
        const message = data && data.error ? data.error.message : response.statusText;
        const retry = response.headers.get("Retry-After");
        setStatus("Error " + response.status + ": " + message + (retry ? " (retry after " + retry + " s)" : ""), "error");
        return;
      }
      render(data);
      setStatus("Done in " + fmtMs(Number(data.cost.latency_ms.total)) + ".", "ok");
    } catch (e) {
      setStatus("Request failed: " + e.message, "error");
    } finally {
      $("submit").disabled = false;
    }
  }

  // The server's own limit on k (`serve --max-k`): a default of 10 above it had failed every first search.
  async function applyServerLimits() {
    try {
      const response = await fetch("/v1/tool?format=mcp", {credentials: "omit", cache: "no-store"});
      const k = (await response.json()).inputSchema.properties.k;
      $("k").max = String(k.maximum);
      if (parseInt($("k").value, 10) > k.maximum) $("k").value = String(k.default);
    } catch (e) { /* the form keeps its static limits; the server still checks */ }
  }

  document.addEventListener("DOMContentLoaded", () => {
    applyServerLimits();
    const saved = sessionStorage.getItem(KEY_STORAGE);
    if (saved) $("api-key").value = saved;
    $("search-form").addEventListener("submit", search);
    $("forget-key").addEventListener("click", () => {
      sessionStorage.removeItem(KEY_STORAGE);
      $("api-key").value = "";
      setStatus("Key forgotten.", "ok");
    });
  });
})();
