/* The map page: flights' GPS tracks, drones, vehicle trajectories coloured by speed, violations, task areas.
   Works without any base map: with no tile URL configured the layers are drawn on a plain background. */
(function () {
  "use strict";
  const A = window.AIRPATROL;
  const cfg = JSON.parse(document.getElementById("map-config").textContent);
  const el = document.getElementById("map");
  const status = document.getElementById("map-status");
  // without a base map nothing limits the zoom: a 100 m road section may fill the screen
  const maxZoom = cfg.tile_url ? cfg.max_zoom : 22;
  const map = L.map(el, {zoomControl: true, preferCanvas: false, zoomSnap: 0.25, maxZoom: maxZoom});
  document.getElementById("profile-close").addEventListener("click", () => {
    document.getElementById("profile").hidden = true;
  });
  L.control.scale({imperial: false}).addTo(map);
  const overlays = {};
  if (cfg.tile_url) {
    L.tileLayer(cfg.tile_url, {attribution: cfg.attribution, maxZoom: cfg.max_zoom}).addTo(map);
  } else {
    el.classList.add("no-tiles");
  }

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

    add("Task areas", L.geoJSON(data.tasks, {style: (f) => ({color: "#6c5ce7", weight: 2, fill: f.properties.kind === "area",
      fillOpacity: 0.05, dashArray: f.properties.kind === "road" ? "6 4" : null, className: "task-area"}),
      onEachFeature: (f, l) => l.bindTooltip(A.esc(f.properties.name))}));

    add("Flights (GPS)", L.geoJSON(data.flights, {
      style: {color: "#1f2d3d", weight: 2, opacity: 0.8, dashArray: "4 4", className: "flight-track"},
      pointToLayer: (f, ll) => L.circleMarker(ll, {radius: 4, className: "flight-track"}),
      onEachFeature: (f, l) => l.bindPopup(popupRows([
        ["flight", `<a href="${cfg.flight}${f.properties.flight_id}">${f.properties.flight_id}</a>`],
        ["device", A.esc(f.properties.device)], ["start", A.esc(f.properties.start_time || "unknown")],
        ["status", A.esc(f.properties.status)]]))}));

    const traj = L.featureGroup();
    data.trajectories.features.forEach((f) => trajectoryLayers(f).forEach((l) => l.addTo(traj)));
    add("Vehicle trajectories", traj);

    add("Violations", L.geoJSON(data.violations, {
      pointToLayer: (f, ll) => L.circleMarker(ll, {radius: 8, color: "#fff", weight: 2, fillColor: "#d63031",
                                                   fillOpacity: 0.95, className: "violation"}),
      onEachFeature: (f, l) => { const p = f.properties; l.bindPopup(popupRows([
        ["vehicle", `${A.esc(p.class)} #${p.track_no}`], ["speed", `${A.fmt(p.speed_kmh)} km/h`],
        ["limit", `${A.fmt(p.limit_kmh, 0)} km/h`],
        ["when", A.esc(p.occurred_at || "unknown") + (p.time_is_estimate ? " (estimate)" : "")],
        ["run", `<a href="${cfg.run}${p.run_id}">${p.run_id}</a>`]])); l.on("click", () => showProfile(p.track_id)); }}));

    add("Drones", L.geoJSON(data.drones, {
      pointToLayer: (f, ll) => L.circleMarker(ll, {radius: 7, color: "#000", weight: 2,
        fillColor: f.properties.live ? "#00b894" : "#b2bec3", fillOpacity: 1, className: "drone"}),
      onEachFeature: (f, l) => { const p = f.properties; l.bindTooltip(
        `${A.esc(p.name || p.serial)}${p.live ? " (live)" : ""}<br>last seen ${A.esc(p.last_seen || "never")}` +
        `<br>battery ${A.fmt(p.battery_pct, 0)} %`); }}));

    if (bounds.isValid()) map.fitBounds(bounds, {padding: [30, 30], maxZoom: maxZoom});
    else map.setView([20, 0], 2);
    Object.values(overlays).forEach((layer) => layer.addTo(map));
    L.control.layers(null, overlays, {collapsed: false}).addTo(map);
    const n = data.trajectories.features.length;
    el.dataset.trajectories = String(n);
    el.dataset.violations = String(data.violations.features.length);
    el.dataset.flights = String(data.flights.features.length);
    status.textContent = `${n} vehicle tracks from ${data.runs.length} run(s), ${data.violations.features.length} ` +
      `violation(s), ${data.flights.features.length} flight(s). Click a vehicle for its speed profile.`;
    el.dataset.loaded = "1";
  }

  A.getJSON(cfg.api + window.location.search)
    .then(draw)
    .catch((e) => { status.textContent = "map data failed: " + e.message; el.dataset.loaded = "error"; });
})();
