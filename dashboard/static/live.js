/* Live page: one card per active stream of the edge service. The picture is the service's MJPEG preview (boxes
   and speeds drawn by the service); numbers come from its WebSocket feed, with a slow poll of the stream list. */
(function () {
  "use strict";
  const A = window.AIRPATROL;
  const box = document.getElementById("streams");
  if (box.dataset.attached !== "1") return;
  const cards = {};

  function card(s) {
    const el = document.createElement("section");
    el.className = "card stream";
    el.dataset.stream = s.id;
    el.innerHTML = `<h2>${A.esc(s.name)} <span class="badge" data-k="state"></span></h2>
      <div class="view"><img alt="live preview of ${A.esc(s.name)}" src="/api/streams/${s.id}/preview.mjpg"></div>
      <div class="stats">
        <span>vehicles <b data-k="vehicles">–</b></span><span>moving <b data-k="moving">–</b></span>
        <span>fps <b data-k="fps">–</b></span><span>dropped <b data-k="dropped">–</b></span>
        <span>latency <b data-k="latency">–</b> ms</span></div>
      <div class="grid2"><div><h3>Current speeds</h3><ol class="feed" data-k="speeds"></ol></div>
        <div><h3>Violations${s.speed_limit_kmh ? " (limit " + A.fmt(s.speed_limit_kmh, 0) + " km/h)" : ""}</h3>
        <ol class="feed" data-k="violations"><li class="muted" style="list-style:none">none yet</li></ol></div></div>
      <p class="small muted" data-k="error"></p>`;
    box.appendChild(el);
    const empty = document.getElementById("live-empty");
    if (empty) empty.remove();
    const c = {el, ws: null, violations: 0};
    cards[s.id] = c;
    connect(s.id, c);
    return c;
  }

  const q = (c, k) => c.el.querySelector(`[data-k=${k}]`);

  function showStats(c, st) {
    if (!st) return;
    q(c, "fps").textContent = A.fmt(st.fps, 1);
    q(c, "dropped").textContent = st.dropped;
  }

  function showResult(c, msg) {
    const moving = msg.tracks.filter((t) => t.moving);
    q(c, "vehicles").textContent = msg.tracks.length;
    q(c, "moving").textContent = moving.length;
    q(c, "latency").textContent = A.fmt(msg.latency_ms, 0);
    showStats(c, msg.stats);
    q(c, "speeds").innerHTML = moving.filter((t) => t.speed_kmh !== null)
      .sort((a, b) => b.speed_kmh - a.speed_kmh).slice(0, 12)
      .map((t) => `<li><span class="swatch" style="background:${A.speedColour(t.flag ? null : t.speed_kmh)}"></span>` +
                  `${A.esc(t.class)} #${t.id}: ${A.fmt(t.speed_kmh, 0)} km/h${t.flag ? " (" + A.esc(t.flag) + ")" : ""}</li>`)
      .join("");
    (msg.violations || []).forEach((v) => {
      const list = q(c, "violations");
      if (!c.violations) list.innerHTML = "";
      c.violations++;
      const li = document.createElement("li");
      li.textContent = `#${v.track_id}: ${A.fmt(v.speed_kmh, 0)} km/h at t=${A.fmt(v.t, 1)} s`;
      list.prepend(li);
    });
  }

  function connect(id, c) {
    const proto = window.location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${window.location.host}/api/streams/${id}/feed`);
    c.ws = ws;
    ws.onmessage = (ev) => {
      const msg = JSON.parse(ev.data);
      if (msg.type === "result") showResult(c, msg);
      else if (msg.type === "status" && msg.state) q(c, "state").textContent = msg.state;
    };
    ws.onclose = (ev) => {
      c.ws = null;
      if (ev.reason) q(c, "error").textContent = "feed closed: " + ev.reason;
    };
  }

  async function refresh() {
    try {
      const data = await A.getJSON(box.dataset.api);
      const live = new Set();
      data.streams.forEach((s) => {
        live.add(String(s.id));
        const c = cards[s.id] || card(s);
        const st = q(c, "state");
        st.textContent = s.state; st.className = "badge " + (s.state === "live" ? "live" : "");
        if (!c.ws) {  // no feed: the polled numbers are all we have
          showStats(c, s);
          q(c, "vehicles").textContent = s.vehicles;
          q(c, "moving").textContent = s.moving;
          if (s.state === "live") connect(s.id, c);
        }
        q(c, "error").textContent = s.last_error || s.db_error || "";
      });
      Object.keys(cards).forEach((id) => { if (!live.has(id)) { cards[id].ws && cards[id].ws.close(); cards[id].el.remove(); delete cards[id]; } });
      box.dataset.streams = String(data.streams.length);
    } catch (e) { /* try again */ }
    setTimeout(refresh, 2000);
  }
  refresh();
})();
