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
        (d.limit_kmh ? ` · limit ${A.fmt(d.limit_kmh, 0)} km/h` : "") + " · shaded: ± σ of the measurement";
      await A.plot(document.getElementById("profile-chart"), d.figure);
      box.dataset.track = String(trackId);
    } catch (e) {
      document.getElementById("profile-title").textContent = "speed profile unavailable: " + e.message;
    }
  }
  document.querySelectorAll("tr.clickable").forEach((tr) => tr.addEventListener("click", () => {
    if (video && tr.dataset.t) { video.currentTime = parseFloat(tr.dataset.t); video.scrollIntoView({block: "nearest", behavior: "smooth"}); }
    showProfile(tr.dataset.track);
  }));
})();
