/* Runs list: while a run is queued or running, poll its status and progress every 2 s. */
(function () {
  "use strict";
  const A = window.AIRPATROL;
  const table = document.getElementById("run-table");
  const active = (s) => s === "queued" || s === "running";
  async function poll() {
    const rows = [...table.querySelectorAll("tr[data-run]")];
    if (!rows.some((tr) => active(tr.querySelector("[data-k=status]").textContent))) return;
    try {
      const data = await A.getJSON(table.dataset.api);
      const byId = Object.fromEntries(data.runs.map((r) => [String(r.run_id), r]));
      rows.forEach((tr) => {
        const r = byId[tr.dataset.run];
        if (!r) return;
        const st = tr.querySelector("[data-k=status]");
        st.textContent = r.status; st.className = "badge " + r.status;
        tr.querySelector("[data-k=bar]").style.width = (100 * r.progress).toFixed(1) + "%";
        tr.querySelector("[data-k=frames]").textContent = r.frames_done + (r.frame_count ? " / " + r.frame_count : "");
        tr.querySelector("[data-k=tracks]").textContent = r.tracks === null ? "" : r.tracks;
        tr.querySelector("[data-k=violations]").textContent = r.violations === null ? "" : r.violations;
        tr.querySelector("[data-k=finished]").textContent = r.finished_at ? r.finished_at.slice(0, 19) : "";
      });
    } catch (e) { /* keep the last values; try again */ }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 2000);
})();
