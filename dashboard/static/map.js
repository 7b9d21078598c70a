/* The map page: flights' GPS tracks, drones, vehicle trajectories coloured by speed, violations, task areas.
   Works without any base map: with no tile URL configured the layers are drawn on a plain background. */
(function () {
  "use strict";
  const A = window.AIRPATROL;
  const cfg = JSON.parse(document.getElementById("map-config").textContent);
  const el = document.getElementById("map");
  const status = document.getElementById("map-status");
  const maxZoom = A.MAX_ZOOM;
  const map = L.map(el, {zoomControl: true, preferCanvas: false, zoomSnap: 0.25, maxZoom: maxZoom});
  document.getElementById("profile-close").addEventListener("click", () => {
    document.getElementById("profile").hidden = true;
  });
  L.control.scale({imperial: false}).addTo(map);
  A.map = map;  // for the browser tests (and the console)

  // coordinates under the pointer (or the map centre on touch screens), as lat, lon with 6 decimals (~0.1 m)
  const Coords = L.Control.extend({options: {position: "bottomleft"}, onAdd: function () {
    const div = L.DomUtil.create("div", "coords-readout leaflet-control");
    div.id = "coords";
    return div;
  }});
  map.addControl(new Coords());
  const coordsEl = document.getElementById("coords");
  const showCoords = (ll) => { coordsEl.textContent = `${ll.lat.toFixed(6)}, ${ll.lng.toFixed(6)}`; };
  map.on("mousemove", (e) => showCoords(e.latlng));
  map.on("moveend", () => { if (!coordsEl.textContent || window.matchMedia("(hover: none)").matches) showCoords(map.getCenter()); });
  const overlays = {};
  // imagery lies under every vector layer (Leaflet's overlay pane is at z-index 400)
  map.createPane("imagery").style.zIndex = 350;
  const bases = A.baseLayers(map, cfg.basemaps);

  // legend
  const legend = document.getElementById("speed-legend");
  const labels = ["< 20"].concat(A.SPEED_EDGES.slice(0, -1).map((e, i) => e + "–" + A.SPEED_EDGES[i + 1]),
                                 ["≥ " + A.SPEED_EDGES[A.SPEED_EDGES.length - 1]]);
  legend.innerHTML = A.SPEED_COLOURS.map((c, i) => `<li><span class="swatch" style="background:${c}"></span>${labels[i]}</li>`)
    .join("") + `<li><span class="swatch" style="background:${A.UNKNOWN_COLOUR}"></span>unknown</li>`;

  function popupRows(rows) {
    return "<table class='popup'>" + rows.map(([k, v]) => `<tr><th>${A.esc(k)}</th><td>${v}</td></tr>`).join("") + "</table>";
  }

  /* One track -> polylines, one per run of consecutive segments in the same speed class (few SVG paths). */
  function trajectoryLayers(feature) {
    const p = feature.properties, coords = feature.geometry.coordinates, speeds = p.speeds_kmh || [];
    const parts = [];
    let run = [coords[0]], cls = null;
    for (let i = 1; i < coords.length; i++) {
      const c = A.speedClass(speeds[i] !== undefined && speeds[i] !== null ? speeds[i] : speeds[i - 1]);
      if (cls !== null && c !== cls) {
        parts.push([run, cls]);
        run = [coords[i - 1]];
      }
      cls = c;
      run.push(coords[i]);
    }
    parts.push([run, cls === null ? -1 : cls]);
    return parts.map(([pts, c]) => {
      const line = L.polyline(pts.map((q) => [q[1], q[0]]), {
        color: c < 0 ? A.UNKNOWN_COLOUR : A.SPEED_COLOURS[c], weight: p.moving ? 4 : 2, opacity: 0.95,
        className: "trajectory traj-" + p.track_id,
      });
      line.bindTooltip(`${A.esc(p.class)} #${p.track_no}: median ${A.fmt(p.median_speed_kmh, 0)} km/h, ` +
                       `max ${A.fmt(p.max_speed_kmh, 0)} km/h`, {sticky: true});
      line.on("click", () => showProfile(p.track_id));
      return line;
    });
  }

  async function showProfile(trackId) {
    const box = document.getElementById("profile");
    box.hidden = false;
    document.getElementById("profile-title").textContent = "loading…";
    try {
      const d = await A.getJSON(cfg.profile + trackId + "/profile");
      document.getElementById("profile-title").textContent = `${d.class} #${d.track_no}`;
      document.getElementById("profile-facts").innerHTML =
        `run <a href="${cfg.run}${d.run_id}">${d.run_id}</a> · ${d.moving ? "moving" : "parked"} · ` +
        `median ${A.fmt(d.median_speed_kmh, 0)} km/h · max ${A.fmt(d.max_speed_kmh, 0)} km/h` +
        (d.limit_kmh ? ` · limit ${A.fmt(d.limit_kmh, 0)} km/h` : "") +
        (d.scale_source ? ` · scale: ${d.scale_source === "size_prior" ? "vehicle sizes (low confidence)" : d.scale_source}` : "");
      await A.plot(document.getElementById("profile-chart"), d.figure);
    } catch (e) {
      document.getElementById("profile-title").textContent = "speed profile unavailable: " + e.message;
    }
  }

  function draw(data) {
    const bounds = L.latLngBounds([]);
    // layers are collected first and added once the view is set (Leaflet needs a centre and zoom to draw them)
    const add = (name, layer) => { overlays[name] = layer; if (layer.getBounds) {
      const b = layer.getBounds(); if (b.isValid()) bounds.extend(b); } };

    // orthophotos: each run's own video projected to the ground (made at import), under its tracks
    const imagery = L.layerGroup((data.imagery || []).map((im) => L.imageOverlay(`${cfg.run}${im.run_id}/ortho.png`,
      im.bounds, {pane: "imagery", className: "ortho", alt: `imagery of run ${im.run_id}`, interactive: false})));
    if ((data.imagery || []).length) {
      overlays["Imagery from the video"] = imagery;
      el.dataset.imagery = String(data.imagery.length);
    }

    add("Task areas", L.geoJSON(data.tasks, {style: (f) => ({color: "#6c5ce7", weight: 2, fill: f.properties.kind === "area",
      fillOpacity: 0.05, dashArray: f.properties.kind === "road" ? "6 4" : null, className: "task-area"}),
      onEachFeature: (f, l) => l.bindTooltip(A.esc(f.properties.name))}));

    add("Flights (GPS)", L.geoJSON(data.flights, {
      style: {color: "#1f2d3d", weight: 2, opacity: 0.8, dashArray: "4 4", className: "flight-track"},
      pointToLayer: (f, ll) => L.circleMarker(ll, {radius: 4, className: "flight-track"}),
      onEachFeature: (f, l) => l.bindPopup(popupRows([
        ["flight", `<a href="${cfg.flight}${f.properties.flight_id}">${A.esc(f.properties.label || f.properties.flight_id)}</a>`],
        ["device", A.esc(f.properties.device)], ["start", A.esc(f.properties.start_time ? f.properties.start_time +
          (f.properties.clock === "utc" ? " UTC" : " (drone's local clock)") : "unknown")],
        ["status", A.esc(f.properties.status)]]))}));

    // counting lines and zones of the shown runs' sites (drawn on a run page's replay map; counts there)
    if (data.counting_lines && data.counting_lines.features.length) {
      overlays["Counting lines"] = L.geoJSON(data.counting_lines, {
        style: (f) => ({color: "#e8590c", weight: 3, fillOpacity: 0.08, dashArray: f.properties.kind === "zone" ? "6 4" : null,
                        className: "counting-shape"}),
        onEachFeature: (f, l) => l.bindPopup(popupRows([[f.properties.kind, A.esc(f.properties.name)],
          ["counts", `<a href="${cfg.run}${f.properties.run_id}#counting">on the run page</a>`]]))});
      el.dataset.countingLines = String(data.counting_lines.features.length);
    }

    const traj = L.featureGroup();
    const violators = new Set(data.violations.features.map((f) => f.properties.track_id));
    const classes = [...new Set(data.trajectories.features.map((f) => f.properties.class))].sort();
    const classSel = document.getElementById("f-class");
    classSel.innerHTML = '<option value="">all</option>' +
      classes.map((c) => `<option>${A.esc(c)}</option>`).join("");
    function drawTrajectories() {
      const minSpeed = parseFloat(document.getElementById("f-min-speed").value);
      const onlyViol = document.getElementById("f-violations").checked, cls = classSel.value;
      const keep = (f) => {
        const p = f.properties;
        if (onlyViol && !violators.has(p.track_id)) return false;
        if (cls && p.class !== cls) return false;
        return !(isFinite(minSpeed) && !((p.max_speed_kmh || 0) >= minSpeed));
      };
      traj.clearLayers();
      const shown = data.trajectories.features.filter(keep);
      shown.forEach((f) => trajectoryLayers(f).forEach((l) => l.addTo(traj)));
      violationLayer.clearLayers();
      violationLayer.addData({type: "FeatureCollection", features: data.violations.features.filter((v) => {
        const t = data.trajectories.features.find((f) => f.properties.track_id === v.properties.track_id);
        return !t || keep(t); })});
      el.dataset.shown = String(shown.length);
    }
    ["f-min-speed", "f-violations", "f-class"].forEach((id) =>
      document.getElementById(id).addEventListener(id === "f-min-speed" ? "input" : "change", drawTrajectories));
    add("Vehicle trajectories", traj);

    const violationLayer = L.geoJSON(null, {
      pointToLayer: (f, ll) => L.circleMarker(ll, {radius: 8, color: "#fff", weight: 2, fillColor: A.speed.violation,
                                                   fillOpacity: 0.95, className: "violation"}),
      onEachFeature: (f, l) => { const p = f.properties; l.bindPopup(popupRows([
        ["vehicle", `${A.esc(p.class)} #${p.track_no}`], ["speed", `${A.fmt(p.speed_kmh)} km/h`],
        ["limit", `${A.fmt(p.limit_kmh, 0)} km/h`],
        ["when", A.esc(p.when)], ["run", `<a href="${cfg.run}${p.run_id}">${A.esc(p.run_label || p.run_id)}</a>`]]
        .concat(p.snapshot ? [["", `<a href="${cfg.run}${p.run_id}/evidence/${p.track_no}.jpg" target="_blank">` +
          `<img class="snapshot" alt="snapshot" src="${cfg.run}${p.run_id}/evidence/${p.track_no}.jpg"></a>`]] : [])
        .concat(p.clip ? [["", `<a href="${cfg.run}${p.run_id}/evidence/${p.track_no}.mp4" target="_blank" class="clip-link">clip of the violation</a>`]] : [])));
        l.on("click", () => showProfile(p.track_id)); }});
    add("Violations", violationLayer);
    drawTrajectories();

    add("Drones", L.geoJSON(data.drones, {
      pointToLayer: (f, ll) => L.circleMarker(ll, {radius: 7, color: "#000", weight: 2,
        fillColor: f.properties.live ? "#00b894" : "#b2bec3", fillOpacity: 1, className: "drone"}),
      onEachFeature: (f, l) => { const p = f.properties; l.bindTooltip(
        `${A.esc(p.name || p.serial)}${p.live ? " (live)" : ""}<br>last seen ${A.esc(p.last_seen || "never")}` +
        `<br>battery ${A.fmt(p.battery_pct, 0)} %`); }}));

    // open on the selection (the server says which: the run asked for, the flight, the filter, else the latest run)
    const view = data.view && data.view.bounds ? L.latLngBounds(data.view.bounds) : bounds;
    if (view.isValid()) map.fitBounds(view.pad(0.05), {padding: [20, 20], maxZoom: Math.min(maxZoom, 20)});
    else map.setView([20, 0], 2);
    showCoords(map.getCenter());
    Object.values(overlays).forEach((layer) => layer.addTo(map));
    L.control.layers(Object.keys(bases).length > 1 ? bases : null, overlays, {collapsed: window.matchMedia("(max-width: 700px)").matches}).addTo(map);
    const n = data.trajectories.features.length;
    const vehicles = data.runs.reduce((a, r) => a + (r.vehicles || 0), 0);
    el.dataset.trajectories = String(n);
    el.dataset.vehicles = String(vehicles);
    el.dataset.violations = String(data.violations.features.length);
    el.dataset.flights = String(data.flights.features.length);
    status.textContent = `Showing ${data.view ? data.view.what : "everything"}. ${vehicles} vehicle(s) in ` +
      `${data.runs.length} run(s)` + (n < vehicles ? ` (${n} with map positions)` : "") +
      `, ${data.violations.features.length} violation(s), ${data.flights.features.length} flight(s). ` +
      "Click a vehicle for its speed profile.";
    el.dataset.loaded = "1";
  }

  /* Live vehicles: the edge service's active streams' vehicles with a map position, polled every 3 s (only when
     the dashboard runs inside the service). */
  const liveLayer = L.layerGroup();
  if (cfg.live) overlays["Live vehicles"] = liveLayer;  // only inside the service
  async function pollLive() {
    if (!cfg.live) return;
    let data;
    try { data = await A.getJSON(cfg.live); } catch (e) { setTimeout(pollLive, 10000); return; }
    if (!data.attached) return;  // no service: nothing will ever be live
    liveLayer.clearLayers();
    let n = 0;
    data.streams.forEach((s) => (s.positions || []).forEach((t) => {
      n++;
      L.circleMarker([t.lat, t.lon], {radius: 7, weight: 2, color: "#000", fillOpacity: 1,
        fillColor: A.speedColour(t.flag ? null : t.speed_kmh), className: "live-vehicle"})
        .bindTooltip(`live: ${A.esc(s.name)} · ${A.esc(t.class)} #${t.id} ` +
          (t.speed_kmh === null || t.speed_kmh === undefined ? "" : `${A.fmt(t.speed_kmh, 0)} km/h`)).addTo(liveLayer);
    }));
    el.dataset.live = String(n);
    setTimeout(pollLive, 3000);
  }

  A.getJSON(cfg.api + window.location.search)
    .then((data) => { draw(data); pollLive(); })
    .catch((e) => { status.textContent = "map data failed: " + e.message; el.dataset.loaded = "error"; });
})();
