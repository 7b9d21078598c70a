/* Run page: the site's counting lines and zones on the replay map, drawn by clicking on it (operators), and this
   run's counts at each: vehicles by direction and class, mean speed, violations, and a chart per time bin. */
(function () {
  "use strict";
  const A = window.AIRPATROL;
  const box = document.getElementById("counting");
  const map = A.replayMap;
  if (!box || !map) return;
  const list = document.getElementById("counting-lines");
  const drawn = L.layerGroup().addTo(map);
  const sketch = L.layerGroup().addTo(map);
  const $ = (id) => document.getElementById(id);
  let mode = null, points = [];

  function showLines(data) {
    drawn.clearLayers();
    list.innerHTML = "";
    $("counting-site").textContent = data.site.startsWith("task:") ? "(kept for this run's task)" : "(kept for this run)";
    $("counting-empty").hidden = data.lines.length > 0;
    if (data.lines.length && !data.positions) {
      list.innerHTML = '<p class="muted">This run has no map positions (no telemetry or georeferenced calibration): nothing to count.</p>';
    }
    data.lines.forEach((line) => {
      const ll = line.coordinates.map((p) => [p[1], p[0]]);
      const style = {color: "#e8590c", weight: 3, dashArray: line.kind === "line" ? null : "6 4", className: "counting-shape"};
      const shape = line.kind === "line" ? L.polyline(ll, style) : L.polygon(ll, {...style, fillOpacity: 0.08});
      shape.bindTooltip(`${A.esc(line.name)}: ${line.total} vehicles`).addTo(drawn);
      if (line.kind === "line") L.circleMarker(ll[0], {radius: 4, color: "#e8590c", fillOpacity: 1}).bindTooltip("start").addTo(drawn);
      const el = document.createElement("div");
      el.className = "counting-line";
      el.dataset.lineId = line.id;
      el.dataset.total = String(line.total);
      const rows = line.rows.map((r) => `<tr data-direction="${A.esc(r.direction)}" data-class="${A.esc(r.class)}" data-vehicles="${r.vehicles}">` +
        `<td>${A.esc(r.direction)}</td><td>${A.esc(r.class)}</td><td class="num">${r.vehicles}</td>` +
        `<td class="num">${r.mean_speed_kmh === null ? "–" : A.fmt(r.mean_speed_kmh, 1) + " km/h"}</td><td class="num">${r.violations}</td></tr>`).join("");
      el.innerHTML = `<h4>${A.esc(line.name)} <span class="muted small">${line.kind === "line" ? "line" : "zone"} · ` +
        `${line.total} vehicles</span>${data.can_edit ? ' <button type="button" class="link-dark no-print" data-delete>delete</button>' : ""}</h4>` +
        `<div class="grid2"><div class="scroll-x"><table class="data"><thead><tr><th>Direction</th><th>Class</th><th class="num">Vehicles</th>` +
        `<th class="num">Mean speed</th><th class="num">Violations</th></tr></thead><tbody>` +
        (rows || '<tr><td colspan="5" class="muted">no vehicle in this run</td></tr>') + `</tbody></table></div>` +
        `<div class="chart small-chart"></div></div>`;
      list.appendChild(el);
      A.plot(el.querySelector(".chart"), line.figure).catch((e) => { el.querySelector(".chart").textContent = "chart failed: " + e.message; });
      const del = el.querySelector("[data-delete]");
      if (del) del.addEventListener("click", async () => {
        if (!window.confirm(`Delete "${line.name}" for every run of this site?`)) return;
        await A.postJSON(`${box.dataset.add}/${line.id}/delete`).catch((e) => window.alert(e.message));
        load();
      });
    });
    box.dataset.lines = String(data.lines.length);
    box.dataset.loaded = "1";
  }

  async function load() {
    box.dataset.loaded = "0";
    try { showLines(await A.getJSON(box.dataset.api)); } catch (e) {
      list.textContent = "counting lines unavailable: " + e.message;
      box.dataset.loaded = "error";
    }
  }

  // -- drawing: clicks on the map add points; a line ends at its second point, a zone with "Finish"
  const tools = $("counting-tools");
  function setMode(m) {
    mode = m; points = []; sketch.clearLayers();
    map.getContainer().classList.toggle("drawing", !!m);
    $("draw-finish").hidden = m !== "zone";
    $("draw-cancel").hidden = !m;
    $("draw-hint").textContent = m === "line" ? "click the line's start, then its end (its direction names the sides)"
      : m === "zone" ? "click the zone's corners, then Finish zone" : "";
  }
  async function save() {
    const body = {kind: mode, name: $("counting-name").value.trim() || (mode === "line" ? "line" : "zone"),
                  coordinates: points.map((p) => [p.lng, p.lat])};
    $("draw-hint").textContent = "saving…";
    try {
      await A.postJSON(box.dataset.add, body);
      $("counting-name").value = "";
      setMode(null);
      load();
    } catch (e) { $("draw-hint").textContent = "not saved: " + e.message; }
  }
  if (tools) {
    $("draw-line").addEventListener("click", () => setMode("line"));
    $("draw-zone").addEventListener("click", () => setMode("zone"));
    $("draw-cancel").addEventListener("click", () => setMode(null));
    $("draw-finish").addEventListener("click", () => { if (points.length >= 3) save(); else $("draw-hint").textContent = "a zone needs 3 corners or more"; });
    map.on("click", (e) => {
      if (!mode) return;
      points.push(e.latlng);
      sketch.clearLayers();
      points.forEach((p) => L.circleMarker(p, {radius: 4, color: "#e8590c"}).addTo(sketch));
      if (points.length > 1) (mode === "zone" ? L.polygon(points, {color: "#e8590c", weight: 2}) : L.polyline(points, {color: "#e8590c", weight: 2})).addTo(sketch);
      if (mode === "line" && points.length === 2) save();
    });
  }
  load();
})();
