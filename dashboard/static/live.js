/* Live page: one card per active stream of the edge service. The picture is the service's MJPEG preview (boxes
   and speeds drawn by the service); numbers come from its WebSocket feed, with a slow poll of the stream list.
   Operators add, calibrate and stop streams through the service's own API (/api/streams: the dashboard never
   imports the service). Vehicles with a map position are drawn on the live map; each stream keeps an events
   timeline (state changes, violations, outages, calibration). */
(function () {
  "use strict";
  const A = window.AIRPATROL;
  const box = document.getElementById("streams");
  if (box.dataset.attached !== "1") return;
  const canEdit = box.dataset.canEdit === "1";
  const cfg = JSON.parse(document.getElementById("live-config").textContent);
  const cards = {};
  const MAX_EVENTS = 50;

  // -- the live map: one layer of markers per stream, redrawn at every result
  const mapEl = document.getElementById("live-map");
  let map = null, fitted = false;
  if (mapEl && window.L) {
    map = L.map(mapEl, {zoomSnap: 0.25, maxZoom: A.MAX_ZOOM}).setView([20, 0], 2);
    L.control.scale({imperial: false}).addTo(map);
    const bases = A.baseLayers(map, cfg.basemaps);
    if (Object.keys(bases).length > 1) L.control.layers(bases, null, {collapsed: true}).addTo(map);
    A.liveMap = map;
  }
  function drawVehicles(c, tracks) {
    if (!map) return;
    c.layer.clearLayers();
    const placed = tracks.filter((t) => t.lat !== null && t.lat !== undefined && t.lon !== null && t.lon !== undefined);
    placed.forEach((t) => L.circleMarker([t.lat, t.lon], {radius: 6, weight: 2, color: "#fff", fillOpacity: 1,
      fillColor: A.speedColour(t.flag ? null : t.speed_kmh), className: "live-vehicle"})
      .bindTooltip(`${A.esc(c.name)}: ${A.esc(t.class)} #${t.id} ${t.speed_kmh === null ? "" : A.fmt(t.speed_kmh, 0) + " km/h"}`)
      .addTo(c.layer));
    c.placed = placed.length;
    const all = Object.values(cards).reduce((n, x) => n + (x.placed || 0), 0);
    mapEl.dataset.vehicles = String(all);
    if (placed.length && !fitted) {
      map.fitBounds(L.latLngBounds(placed.map((t) => [t.lat, t.lon])).pad(0.5), {maxZoom: 19});
      fitted = true;
    }
    document.getElementById("live-map-note").textContent = all ? `${all} vehicles placed` :
      "no vehicle with a map position: a stream needs telemetry or a georeferenced calibration for that";
  }

  // -- events timeline of a stream (newest first)
  function event(c, kind, text) {
    const list = q(c, "events");
    if (!c.events) list.innerHTML = "";
    c.events = (c.events || 0) + 1;
    const li = document.createElement("li");
    li.className = "event-" + kind;
    li.dataset.kind = kind;
    li.innerHTML = `<time>${new Date().toLocaleTimeString()}</time> ${A.esc(text)}`;
    list.prepend(li);
    while (list.children.length > MAX_EVENTS) list.lastChild.remove();
  }

  function card(s) {
    const el = document.createElement("section");
    el.className = "card stream";
    el.dataset.stream = s.id;
    el.innerHTML = `<h2>${A.esc(s.name)} <span class="badge" data-k="state"></span></h2>
      ${canEdit ? `<p class="row no-print stream-tools"><button type="button" class="secondary" data-act="calibrate">Calibrate</button>
        <button type="button" class="danger" data-act="stop">Stop</button></p>
      <form class="row calibrate-form" hidden><label>Scale <input name="mpp" type="number" min="0.001" max="100" step="any" style="width:7em"> m per pixel</label>
        <label>or frame corners <input name="corners" size="28" placeholder="lon,lat; lon,lat; lon,lat; lon,lat (TL TR BR BL)"></label>
        <button type="submit">Apply</button><span class="small muted">the current run ends; the stream goes on in a new run with this scale</span></form>` : ""}
      <div class="view"><img alt="live preview of ${A.esc(s.name)}" src="/api/streams/${s.id}/preview.mjpg"></div>
      <div class="stats">
        <span>vehicles <b data-k="vehicles">–</b></span><span>moving <b data-k="moving">–</b></span>
        <span>fps <b data-k="fps">–</b></span><span>dropped <b data-k="dropped">–</b></span>
        <span>latency <b data-k="latency">–</b> ms</span></div>
      <p class="small" data-k="scale"></p>
      <div class="grid2"><div><h3>Current speeds</h3><ol class="feed" data-k="speeds"></ol></div>
        <div><h3>Violations${s.speed_limit_kmh ? " (limit " + A.fmt(s.speed_limit_kmh, 0) + " km/h)" : ""}</h3>
        <ol class="feed" data-k="violations"><li class="muted" style="list-style:none">none yet</li></ol></div></div>
      <h3>Events</h3><ol class="feed events" data-k="events"><li class="muted" style="list-style:none">none yet</li></ol>
      <p class="small muted" data-k="error"></p>`;
    box.appendChild(el);
    const empty = document.getElementById("live-empty");
    if (empty) empty.remove();
    const c = {el, ws: null, violations: 0, name: s.name, state: null, gaps: 0, runId: s.run_id,
               layer: map ? L.layerGroup().addTo(map) : null};
    cards[s.id] = c;
    if (canEdit) tools(s.id, c);
    event(c, "added", `stream ${s.name} (${s.kind}${s.source ? ": " + s.source : ""})` +
          (s.calibration ? `, scale ${s.calibration}` : ""));
    connect(s.id, c);
    return c;
  }

  const q = (c, k) => c.el.querySelector(`[data-k=${k}]`);

  function tools(id, c) {
    const form = c.el.querySelector(".calibrate-form");
    c.el.querySelector("[data-act=calibrate]").addEventListener("click", () => { form.hidden = !form.hidden; });
    c.el.querySelector("[data-act=stop]").addEventListener("click", async () => {
      if (!window.confirm(`Stop ${c.name}? Its run is completed with what was processed.`)) return;
      try {
        await service("DELETE", `/api/streams/${id}`);
        event(c, "stopped", "stopped by you");
        remove(id);
      } catch (e) { q(c, "error").textContent = "not stopped: " + e.message; }
    });
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const mpp = parseFloat(form.mpp.value), corners = form.corners.value.trim();
      const body = {};
      if (corners) {
        body.corners_lonlat = corners.split(";").map((p) => p.split(",").map((v) => parseFloat(v)));
      } else if (isFinite(mpp)) body.metres_per_pixel = mpp;
      try {
        const s = await service("POST", `/api/streams/${id}/calibration`, body);
        form.hidden = true;
        event(c, "calibrated", `calibrated: ${s.calibration}; new run`);
        showScale(c, null, s.calibration);
        if (c.ws) c.ws.close();
      } catch (e) { q(c, "error").textContent = "not calibrated: " + e.message; }
    });
  }

  async function service(method, url, body) {
    const r = await fetch(url, {method, credentials: "same-origin", headers: {"Content-Type": "application/json"},
                                body: body === undefined ? undefined : JSON.stringify(body)});
    const text = await r.text();
    let data = null;
    try { data = JSON.parse(text); } catch (e) { /* not JSON */ }
    if (!r.ok) {
      const d = data && data.detail;
      throw new Error(typeof d === "string" ? d : Array.isArray(d) ? d.map((x) => `${(x.loc || []).slice(1).join(".")}: ${x.msg}`).join("; ") : `${r.status} ${text.slice(0, 200)}`);
    }
    return data;
  }

  function remove(id) {
    const c = cards[id];
    if (!c) return;
    if (c.ws) c.ws.close();
    if (c.layer) c.layer.remove();
    c.el.remove();
    delete cards[id];
    box.dataset.streams = String(Object.keys(cards).length);
  }

  function showStats(c, st) {
    if (!st) return;
    q(c, "fps").textContent = A.fmt(st.fps, 1);
    q(c, "dropped").textContent = st.dropped;
  }

  const SCALES = {telemetry: "flight telemetry", calibration: "calibration", size_prior: "the vehicles' own sizes (low confidence)"};
  function showScale(c, msg, calibration) {
    if (calibration !== undefined) c.calibration = calibration;
    const src = msg && msg.scale_source;
    const mpp = msg && msg.metres_per_pixel;
    const el = q(c, "scale");
    el.dataset.source = src || "";
    el.textContent = src ? `scale: ${SCALES[src] || src}${c.calibration && src === "calibration" ? " (" + c.calibration + ")" : ""}` +
        (mpp ? `, ${A.fmt(mpp, 3)} m per pixel` : "")
      : c.calibration ? `scale: ${c.calibration} (from the next frame)` : "scale: none yet";
  }

  function showResult(c, msg) {
    const moving = msg.tracks.filter((t) => t.moving);
    const measured = moving.filter((t) => t.speed_kmh !== null);
    q(c, "vehicles").textContent = msg.tracks.length;
    q(c, "moving").textContent = moving.length;
    q(c, "latency").textContent = A.fmt(msg.latency_ms, 0);
    showStats(c, msg.stats);
    showScale(c, msg);
    const speeds = q(c, "speeds");
    speeds.innerHTML = measured.sort((a, b) => b.speed_kmh - a.speed_kmh).slice(0, 12)
      .map((t) => `<li><span class="swatch" style="background:${A.speedColour(t.flag ? null : t.speed_kmh)}"></span>` +
                  `${A.esc(t.class)} #${t.id}: ${A.fmt(t.speed_kmh, 0)} km/h${t.flag ? " (" + A.esc(t.flag) + ")" : ""}</li>`)
      .join("");
    if (!measured.length && moving.length) {  // say why, instead of an empty list
      speeds.innerHTML = `<li class="muted" style="list-style:none" data-why="no-speed">${moving.length} moving, no speed yet: ` +
        (msg.scale_source ? "a speed needs about 1 s of track" : "no scale (no telemetry, no calibration, vehicle sizes not " +
         "settled yet)" + (canEdit ? ": use Calibrate" : "")) + "</li>";
    }
    (msg.violations || []).forEach((v) => {
      const list = q(c, "violations");
      if (!c.violations) list.innerHTML = "";
      c.violations++;
      const li = document.createElement("li");
      li.textContent = `#${v.track_id}: ${A.fmt(v.speed_kmh, 0)} km/h at t=${A.fmt(v.t, 1)} s`;
      list.prepend(li);
      event(c, "violation", `violation: #${v.track_id} at ${A.fmt(v.speed_kmh, 0)} km/h (limit ${A.fmt(v.limit_kmh, 0)}), t=${A.fmt(v.t, 1)} s`);
    });
    drawVehicles(c, msg.tracks);
  }

  function setState(c, state, detail) {
    if (!state || state === c.state) return;
    c.state = state;
    const st = q(c, "state");
    st.textContent = state; st.className = "badge " + (state === "live" ? "live" : "");
    event(c, "state", state + (detail ? ": " + detail : ""));
  }

  function connect(id, c) {
    const proto = window.location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${window.location.host}/api/streams/${id}/feed`);
    c.ws = ws;
    ws.onmessage = (ev) => {
      const msg = JSON.parse(ev.data);
      if (msg.type === "result") showResult(c, msg);
      else if (msg.type === "status") setState(c, msg.state, msg.detail);
    };
    ws.onclose = (ev) => {
      if (c.ws === ws) c.ws = null;
      if (ev.reason && cards[id]) q(c, "error").textContent = "feed closed: " + ev.reason;
    };
  }

  async function refresh() {
    try {
      const data = await A.getJSON(box.dataset.api);
      const live = new Set();
      data.streams.forEach((s) => {
        live.add(String(s.id));
        const c = cards[s.id] || card(s);
        setState(c, s.state);
        if (s.run_id && c.runId && s.run_id !== c.runId) event(c, "run", `run ${s.run_id} started`);
        c.runId = s.run_id || c.runId;
        (s.gaps || []).slice(c.gaps).forEach((g) => event(c, "gap", `source outage at t=${A.fmt(g.t, 1)} s for ${A.fmt(g.seconds, 1)} s`));
        c.gaps = (s.gaps || []).length;
        if (c.calibration === undefined) showScale(c, s.scale_source ? s : null, s.calibration || null);
        if (!c.ws) {  // no feed: the polled numbers are all we have
          showStats(c, s);
          q(c, "vehicles").textContent = s.vehicles;
          q(c, "moving").textContent = s.moving;
          if (s.state === "live") connect(s.id, c);
        }
        q(c, "error").textContent = s.last_error || s.db_error || "";
      });
      Object.keys(cards).forEach((id) => { if (!live.has(id)) remove(id); });
      box.dataset.streams = String(data.streams.length);
    } catch (e) { /* try again */ }
    setTimeout(refresh, 2000);
  }

  // -- adding a stream
  const form = document.getElementById("add-stream-form");
  if (form) {
    const kind = document.getElementById("add-kind");
    const showUrl = () => { document.getElementById("add-url-label").hidden = kind.value !== "pull"; };
    kind.addEventListener("change", showUrl);
    showUrl();
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const out = document.getElementById("add-result");
      const body = {kind: kind.value, name: form.elements.namedItem("name").value.trim() || null};
      if (kind.value === "pull") body.url = form.url.value.trim();
      const limit = parseFloat(form.speed_limit_kmh.value), mpp = parseFloat(form.metres_per_pixel.value);
      if (isFinite(limit)) body.speed_limit_kmh = limit;
      if (isFinite(mpp)) body.calibration = {metres_per_pixel: mpp};
      out.textContent = "adding…";
      try {
        const s = await service("POST", "/api/streams", body);
        out.textContent = `stream ${s.name} added` + (s.push_url ? `: push to ${s.push_url} (airpatrol stream VIDEO --name ${s.name})` : "");
        form.reset();
        showUrl();
        if (!cards[s.id]) card(s);
      } catch (e) { out.textContent = "not added: " + e.message; }
    });
  }
  refresh();
})();
