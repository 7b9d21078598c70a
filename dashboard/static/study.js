/* Study page: the movement diagram on the run's imagery (arrow width = vehicles), conflicts, lanes, and the site's
   approaches, which operators drag, rename and merge (saved in the database for the site, then the page reloads). */
(function () {
  "use strict";
  const A = window.AIRPATROL;
  const cfg = JSON.parse(document.getElementById("study-config").textContent);
  const el = document.getElementById("study-map");
  const editor = document.getElementById("approach-editor");
  const status = document.getElementById("approach-status");
  if (!el || !window.L) return;
  const canEdit = editor && editor.dataset.canEdit === "1";
  const COLOURS = {left: "#1971c2", through: "#2b8a3e", right: "#e8590c", u_turn: "#862e9c"};
  let current = [];

  const say = (text, bad) => { if (status) { status.textContent = text; status.className = "small " + (bad ? "error-text" : "muted"); } };
  async function save(list) {
    say("saving…");
    try {
      await A.postJSON(editor.dataset.save, {approaches: list});
      say("saved; recomputing…");
      window.location.reload();
    } catch (e) { say("not saved: " + e.message, true); throw e; }
  }

  const map = L.map(el, {zoomSnap: 0.25, maxZoom: A.MAX_ZOOM});
  A.studyMap = map;
  L.control.scale({imperial: false}).addTo(map);
  map.createPane("imagery").style.zIndex = 350;
  const bases = A.baseLayers(map, cfg.basemaps);
  if (Object.keys(bases).length > 1) L.control.layers(bases, null, {collapsed: true}).addTo(map);

  A.getJSON(el.dataset.api).then((d) => {
    current = d.approaches.map((a) => ({...a}));
    if (d.message) { el.classList.add("map-empty"); el.textContent = d.message; el.dataset.loaded = "empty"; return; }
    // the view first: Leaflet adds layers (and makes their elements) only once the map has a centre and zoom
    // on the junction (its approaches and movements), else on the imagery
    const view = L.latLngBounds([]);
    d.approaches.forEach((a) => view.extend([a.lat, a.lon]));
    d.movements.forEach((m) => m.coordinates.forEach((p) => view.extend([p[1], p[0]])));
    if (!view.isValid() && d.imagery) view.extend(L.latLngBounds(d.imagery.bounds));
    if (view.isValid()) map.fitBounds(view.pad(0.15)); else map.setView([0, 0], 2);
    const all = L.featureGroup().addTo(map);
    if (d.imagery) L.imageOverlay(`${cfg.run}${d.imagery.run_id}/ortho.png`, d.imagery.bounds,
      {pane: "imagery", className: "ortho", interactive: false}).addTo(map);
    d.lanes.forEach((l) => L.polyline(l.coordinates.map((p) => [p[1], p[0]]), {color: "#fff", weight: 1, dashArray: "4 4",
      opacity: 0.8, interactive: false, className: "study-lane"}).addTo(all));
    d.movements.forEach((m) => {
      const colour = COLOURS[m.movement] || "#495057";
      const label = `${A.esc(m.origin)}→${A.esc(m.destination)} ${A.esc(m.movement.replace("_", " "))}: ${m.vehicles} vehicles`;
      L.polyline(m.coordinates.map((p) => [p[1], p[0]]), {color: colour, weight: 2 + 14 * m.width, opacity: 0.8,
        lineCap: "butt", className: "study-arrow"}).bindTooltip(label).addTo(all);
      L.polygon(m.head.map((p) => [p[1], p[0]]), {color: colour, weight: 1, fillOpacity: 0.9, className: "study-arrow-head"})
        .bindTooltip(label).addTo(all);
    });
    d.conflicts.forEach((c) => {
      if (c.lat === null || c.lon === null) return;
      L.circleMarker([c.lat, c.lon], {radius: 7, color: "#c0392b", weight: 2, fillOpacity: 0.4, className: "study-conflict"})
        .bindTooltip(`conflict ${c.no}: ${c.kind.toUpperCase()} ${A.fmt(c.value_s, 2)} s at ${A.fmt(c.t, 1)} s, ` +
          `${A.esc(c.class_a)} #${c.track_a} / ${A.esc(c.class_b)} #${c.track_b}`).addTo(all);
    });
    d.approaches.forEach((a) => {
      L.circle([a.lat, a.lon], {radius: a.radius_m, color: "#1f2d3d", weight: 1, fillOpacity: 0.05, interactive: false}).addTo(all);
      const icon = L.divIcon({className: "approach-marker", html: `<span>${A.esc(a.key)}</span>`, iconSize: [26, 26]});
      const mk = L.marker([a.lat, a.lon], {icon: icon, draggable: canEdit, title: `${a.key}: ${a.name}`, keyboard: true})
        .bindTooltip(`${A.esc(a.key)}: ${A.esc(a.name)}${canEdit ? " (drag to move)" : ""}`).addTo(all);
      mk.getElement().dataset.key = a.key;
      if (canEdit) mk.on("dragend", () => {
        const p = mk.getLatLng();
        save(current.map((x) => (x.key === a.key ? {...x, lat: p.lat, lon: p.lng} : x))).catch(() => mk.setLatLng([a.lat, a.lon]));
      });
    });
    el.dataset.loaded = "1";
    el.dataset.movements = String(d.movements.length);
  }).catch((e) => { el.textContent = "study map failed: " + e.message; el.dataset.loaded = "error"; });

  if (!canEdit) return;
  const $ = (id) => document.getElementById(id);
  const rename = $("approach-rename");
  if (rename) rename.addEventListener("click", () => {
    const names = {};
    document.querySelectorAll("input.approach-name").forEach((i) => { names[i.dataset.key] = i.value.trim() || i.dataset.key; });
    save(current.map((x) => ({...x, name: names[x.key] || x.name}))).catch(() => {});
  });
  const merge = $("approach-merge");
  if (merge) merge.addEventListener("click", async () => {
    const from = $("merge-from").value, into = $("merge-into").value;
    if (from === into) { say("pick two different approaches", true); return; }
    say("merging…");
    try { await A.postJSON(cfg.merge, {keep: into, merge: from}); window.location.reload(); }
    catch (e) { say("not merged: " + e.message, true); }
  });
  const reset = $("approach-reset");
  if (reset) reset.addEventListener("click", async () => {
    if (!window.confirm("Forget the saved approaches of this site and find them from the trajectories again?")) return;
    try { await A.postJSON(reset.dataset.url); window.location.reload(); } catch (e) { say(e.message, true); }
  });
})();
