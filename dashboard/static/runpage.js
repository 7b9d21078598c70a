/* The run page: sortable, searchable vehicle table; a click on a violation or vehicle seeks the video to it and
   shows its speed profile (± σ). */
(function () {
  "use strict";
  const A = window.AIRPATROL;
  const cfg = JSON.parse(document.getElementById("run-config").textContent);
  const video = document.getElementById("run-video");

  // -- sorting: click a header (again to reverse); numbers sort by their data-v value
  document.querySelectorAll("table.sortable").forEach((table) => {
    const heads = [...table.tHead.rows[0].cells];
    heads.forEach((th, col) => {
      if (th.dataset.sort === "none") return;
      th.classList.add("sort-head");
      th.tabIndex = 0;
      const sort = () => {
        const dir = th.dataset.dir === "asc" ? "desc" : "asc";
        heads.forEach((h) => { delete h.dataset.dir; h.removeAttribute("aria-sort"); });
        th.dataset.dir = dir;
        th.setAttribute("aria-sort", dir === "asc" ? "ascending" : "descending");
        const num = th.dataset.sort === "num", body = table.tBodies[0];
        const key = (tr) => { const c = tr.cells[col]; const v = c.dataset.v !== undefined ? c.dataset.v : c.textContent.trim();
          return num ? parseFloat(v) : v.toLowerCase(); };
        const rows = [...body.rows].sort((a, b) => { const x = key(a), y = key(b);
          return (x < y ? -1 : x > y ? 1 : 0) * (dir === "asc" ? 1 : -1); });
        rows.forEach((r) => body.appendChild(r));
      };
      th.addEventListener("click", sort);
      th.addEventListener("keydown", (e) => { if (e.key === "Enter") sort(); });
    });
  });

  // -- the page's buttons and links (handlers here, not in on*= attributes: the Content-Security-Policy forbids those)
  const printButton = document.getElementById("print-report");
  if (printButton) printButton.addEventListener("click", () => window.print());
  const filterForm = document.getElementById("vehicle-filter");
  if (filterForm) filterForm.addEventListener("submit", (e) => e.preventDefault());
  // a snapshot or clip opens in a new tab without also selecting its table row
  document.querySelectorAll("a.snapshot-link, a.clip-link").forEach((a) => a.addEventListener("click", (e) => e.stopPropagation()));

  // -- filtering the vehicle table
  const vt = document.getElementById("vehicle-table");
  if (vt) {
    const ids = ["v-search", "v-class", "v-min-speed", "v-violations"];
    const apply = () => {
      const text = document.getElementById("v-search").value.trim().toLowerCase().replace(/^#/, "");
      const cls = document.getElementById("v-class").value;
      const min = parseFloat(document.getElementById("v-min-speed").value);
      const onlyViol = document.getElementById("v-violations").checked;
      let shown = 0;
      [...vt.tBodies[0].rows].forEach((tr) => {
        const ok = (!text || tr.cells[0].textContent.toLowerCase().includes(text) || tr.dataset.class.toLowerCase().includes(text)) &&
          (!cls || tr.dataset.class === cls) && (!isFinite(min) || parseFloat(tr.dataset.max) >= min) &&
          (!onlyViol || tr.dataset.violation === "1");
        tr.hidden = !ok;
        shown += ok;
      });
      document.getElementById("vehicle-shown").textContent = `(${shown} of ${vt.tBodies[0].rows.length} shown)`;
      vt.dataset.shown = String(shown);
    };
    ids.forEach((id) => { const el = document.getElementById(id); el.addEventListener("input", apply); el.addEventListener("change", apply); });
  }

  // -- a row: seek the video, show the profile
  async function showProfile(trackId) {
    const box = document.getElementById("profile");
    document.getElementById("profile-title").textContent = "loading…";
    try {
      const d = await A.getJSON(cfg.profile + trackId + "/profile");
      document.getElementById("profile-title").textContent = `Speed profile: ${d.class} #${d.track_no}`;
      document.getElementById("profile-facts").textContent = `${d.moving ? "moving" : "parked"} · median ` +
        `${A.fmt(d.median_speed_kmh, 0)} km/h · max ${A.fmt(d.max_speed_kmh, 0)} km/h` +
        (d.limit_kmh ? ` · limit ${A.fmt(d.limit_kmh, 0)} km/h` : "") +
        (d.scale_source ? ` · scale: ${d.scale_source === "size_prior" ? "vehicle sizes (low confidence)" : d.scale_source}` : "") +
        " · shaded: ± σ of the measurement";
      await A.plot(document.getElementById("profile-chart"), d.figure);
      box.dataset.track = String(trackId);
    } catch (e) {
      document.getElementById("profile-title").textContent = "speed profile unavailable: " + e.message;
    }
  }
  // -- replay: the run's tracks on a map with a marker per vehicle at the current time, in step with the video
  const slider = document.getElementById("replay-t"), label = document.getElementById("replay-label");
  const rel = document.getElementById("replay-map");
  let setTime = () => {};
  if (rel && window.L) {
    const map = L.map(rel, {zoomSnap: 0.25, maxZoom: A.MAX_ZOOM});
    A.replayMap = map;
    L.control.scale({imperial: false}).addTo(map);
    map.createPane("imagery").style.zIndex = 350;
    const bases = A.baseLayers(map, cfg.basemaps);
    if (Object.keys(bases).length > 1) L.control.layers(bases, null, {collapsed: true}).addTo(map);
    const markers = L.layerGroup().addTo(map);
    let tracks = [];
    /* position and speed of a track at time t (linear between its vertices), null outside its time span */
    const at = (f, t) => {
      const ts = f.properties.times, c = f.geometry.coordinates, sp = f.properties.speeds_kmh || [];
      if (t < ts[0] || t > ts[ts.length - 1]) return null;
      let i = 1;
      while (i < ts.length - 1 && ts[i] < t) i++;
      const a = ts[i - 1], b = ts[i], w = b > a ? Math.min(1, Math.max(0, (t - a) / (b - a))) : 0;
      return {lat: c[i - 1][1] + w * (c[i][1] - c[i - 1][1]), lon: c[i - 1][0] + w * (c[i][0] - c[i - 1][0]),
              speed: sp[i] !== null && sp[i] !== undefined ? sp[i] : sp[i - 1]};
    };
    setTime = (t, from) => {
      slider.value = String(t);
      label.textContent = t.toFixed(1) + " s";
      markers.clearLayers();
      let n = 0;
      tracks.forEach((f) => {
        const p = at(f, t);
        if (!p) return;
        n++;
        L.circleMarker([p.lat, p.lon], {radius: 6, weight: 2, color: "#fff", fillColor: A.speedColour(p.speed),
                                        fillOpacity: 1, className: "replay-marker replay-" + f.properties.track_id})
          .bindTooltip(`${A.esc(f.properties.class)} #${f.properties.track_no} ${A.fmt(p.speed, 0)} km/h`)
          .on("click", () => showProfile(f.properties.track_id)).addTo(markers);
      });
      rel.dataset.markers = String(n);
      rel.dataset.t = t.toFixed(2);
      if (video && from !== "video" && Math.abs(video.currentTime - t) > 0.05) video.currentTime = t;
    };
    A.getJSON(cfg.map).then((data) => {
      tracks = data.trajectories.features.filter((f) => (f.properties.times || []).length > 1);
      (data.imagery || []).forEach((im) => L.imageOverlay(`${cfg.run}${im.run_id}/ortho.png`, im.bounds,
        {pane: "imagery", className: "ortho", interactive: false}).addTo(map));
      const lines = L.featureGroup(tracks.map((f) => L.polyline(f.geometry.coordinates.map((q) => [q[1], q[0]]),
        {color: "#1f2d3d", weight: 1, opacity: 0.35, interactive: false}))).addTo(map);
      if (data.view && data.view.bounds) map.fitBounds(L.latLngBounds(data.view.bounds).pad(0.05));
      else if (lines.getBounds().isValid()) map.fitBounds(lines.getBounds());
      else { rel.hidden = true; document.getElementById("replay").querySelector("h2 .muted").textContent =
        "no map positions in this run (no telemetry or georeferenced calibration)"; }
      setTime(parseFloat(slider.value) || 0, "video");
      rel.dataset.loaded = "1";
    }).catch((e) => { rel.textContent = "map data failed: " + e.message; rel.dataset.loaded = "error"; });
    slider.addEventListener("input", () => setTime(parseFloat(slider.value), "slider"));
    if (video) {
      video.addEventListener("timeupdate", () => setTime(video.currentTime, "video"));
      video.addEventListener("seeked", () => setTime(video.currentTime, "video"));
    }
  }

  document.querySelectorAll("tr.clickable").forEach((tr) => tr.addEventListener("click", () => {
    if (tr.dataset.t) setTime(parseFloat(tr.dataset.t), "row");
    if (video && tr.dataset.t) { video.currentTime = parseFloat(tr.dataset.t); video.scrollIntoView({block: "nearest", behavior: "smooth"}); }
    showProfile(tr.dataset.track);
  }));
})();
