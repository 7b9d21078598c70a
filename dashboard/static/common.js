/* Shared helpers of every dashboard page: JSON fetches with the CSRF header, lazy plotly, speed colours. */
(function () {
  "use strict";
  // Page settings come as JSON data, not as an inline script: the Content-Security-Policy allows no inline script.
  const A = window.AIRPATROL = JSON.parse(document.getElementById("airpatrol-config").textContent);
  A.url = (path) => A.prefix + path;

  A.getJSON = async function (url) {
    const r = await fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}});
    if (!r.ok) throw new Error(r.status + " " + (await r.text()).slice(0, 200));
    return r.json();
  };

  A.postJSON = async function (url, body) {
    const r = await fetch(url, {method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": A.csrf}, body: JSON.stringify(body || {})});
    if (!r.ok) throw new Error(r.status + " " + (await r.text()).slice(0, 200));
    return r.json();
  };

  const scripts = {};
  A.loadScript = function (src) {
    if (!scripts[src]) {
      scripts[src] = new Promise((resolve, reject) => {
        const s = document.createElement("script");
        s.src = src; s.onload = resolve; s.onerror = () => reject(new Error("cannot load " + src));
        document.head.appendChild(s);
      });
    }
    return scripts[src];
  };

  /* plotly.min.js (4 MB, served from the plotly package) is only fetched by pages that draw a chart. */
  A.plot = async function (el, figureText) {
    await A.loadScript(A.url("/static/plotly.min.js"));
    const fig = typeof figureText === "string" ? JSON.parse(figureText) : figureText;
    await window.Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});
    el.dataset.plotted = "1";
  };

  /* Speed classes (km/h) and their colours: blue (slow) to dark red (fast); grey when unknown. */
  A.SPEED_EDGES = [20, 40, 60, 80, 100, 120];
  A.SPEED_COLOURS = ["#3b4cc0", "#2c9fd1", "#1fb58f", "#a5c31b", "#f2a31b", "#e5521b", "#b40426"];
  A.UNKNOWN_COLOUR = "#8a8f98";
  A.speedClass = function (v) {
    if (v === null || v === undefined || !isFinite(v)) return -1;
    let i = 0;
    while (i < A.SPEED_EDGES.length && v >= A.SPEED_EDGES[i]) i++;
    return i;
  };
  A.speedColour = (v) => { const c = A.speedClass(v); return c < 0 ? A.UNKNOWN_COLOUR : A.SPEED_COLOURS[c]; };

  A.fmt = (v, nd) => (v === null || v === undefined) ? "–" : Number(v).toFixed(nd === undefined ? 1 : nd);
  A.esc = (s) => String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
    (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("[data-figure]").forEach((el) => {
      const src = document.getElementById(el.dataset.figure);
      if (src) A.plot(el, JSON.parse(src.textContent)).catch((e) => { el.textContent = "chart failed: " + e.message; });
    });
    document.querySelectorAll("form[data-confirm]").forEach((f) => f.addEventListener("submit", (ev) => {
      if (!window.confirm(f.dataset.confirm)) ev.preventDefault();
    }));
  });
})();
