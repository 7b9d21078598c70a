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
  // from tracking/speed_classes.py (the annotated video draws with the same palette)
  A.SPEED_EDGES = A.speed.edges;
  A.SPEED_COLOURS = A.speed.colours;
  A.UNKNOWN_COLOUR = A.speed.unknown;
  A.speedClass = function (v) {
    if (v === null || v === undefined || !isFinite(v)) return -1;
    let i = 0;
    while (i < A.SPEED_EDGES.length && v >= A.SPEED_EDGES[i]) i++;
    return i;
  };
  A.speedColour = (v) => { const c = A.speedClass(v); return c < 0 ? A.UNKNOWN_COLOUR : A.SPEED_COLOURS[c]; };

  /* Base maps of a Leaflet map: the operator's offline basemap (served by the app), the online tiles, a plain
     background. The first available one is shown; returns them for a layer switcher. Tiles are enlarged past their
     deepest zoom (a 100 m road section may fill the screen). */
  A.MAX_ZOOM = 22;
  A.baseLayers = function (map, basemaps) {
    const bases = {}, b = basemaps || {};
    if (b.offline) bases["Offline map"] = L.tileLayer(b.offline.url, {attribution: b.offline.attribution,
      minZoom: 0, maxNativeZoom: b.offline.max_zoom, maxZoom: A.MAX_ZOOM, className: "basemap-offline"});
    if (b.online) bases["Online map"] = L.tileLayer(b.online.url, {attribution: b.online.attribution,
      maxNativeZoom: b.online.max_zoom, maxZoom: A.MAX_ZOOM, className: "basemap-online"});
    bases["Plain background"] = L.layerGroup();
    const first = Object.keys(bases)[0];
    bases[first].addTo(map);
    if (first === "Plain background") map.getContainer().classList.add("no-tiles");
    map.on("baselayerchange", (e) => map.getContainer().classList.toggle("no-tiles", e.name === "Plain background"));
    return bases;
  };

  A.fmt = (v, nd) => (v === null || v === undefined) ? "–" : Number(v).toFixed(nd === undefined ? 1 : nd);
  A.esc = (s) => String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g,
    (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));

  document.addEventListener("DOMContentLoaded", () => {
    // narrow screens: the nav folds behind a menu button; the map's filter panel starts closed
    const toggle = document.getElementById("menu-toggle"), bar = document.querySelector(".topbar");
    if (toggle) toggle.addEventListener("click", () => {
      const open = bar.classList.toggle("open");
      toggle.setAttribute("aria-expanded", String(open));
    });
    const panel = document.getElementById("map-panel");
    if (panel && window.matchMedia("(max-width: 700px)").matches) panel.open = false;
    document.querySelectorAll("[data-figure]").forEach((el) => {
      const src = document.getElementById(el.dataset.figure);
      if (src) A.plot(el, JSON.parse(src.textContent)).catch((e) => { el.textContent = "chart failed: " + e.message; });
    });
    document.querySelectorAll("form[data-confirm]").forEach((f) => f.addEventListener("submit", (ev) => {
      if (!window.confirm(f.dataset.confirm)) ev.preventDefault();
    }));
  });
})();
