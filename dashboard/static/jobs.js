/* Runs page with the edge service attached: its batch jobs (polled from /api/jobs) and a resumable upload of a
   recorded flight (video + optional log) that queues a job (the service's /api/uploads protocol). */
(function () {
  "use strict";
  const A = window.AIRPATROL;
  const table = document.getElementById("job-table");

  async function pollJobs() {
    try {
      const jobs = await A.getJSON(table.dataset.api);
      const body = table.querySelector("tbody");
      jobs.forEach((j) => {
        let tr = body.querySelector(`tr[data-job="${j.id}"]`);
        if (!tr) {
          const none = body.querySelector("tr.none");
          if (none) none.remove();
          tr = document.createElement("tr");
          tr.dataset.job = j.id;
          tr.innerHTML = `<td>#${j.id}</td><td><span class="badge" data-k="status"></span></td><td><span class="progress">` +
            `<span data-k="bar"></span></span> <span class="small" data-k="frames"></span></td><td>${j.attempts} / ` +
            `${j.max_attempts}</td><td data-k="run"></td><td class="small">${A.esc(j.created_by)}</td>` +
            `<td class="small">${A.esc(j.created_at.slice(0, 19).replace("T", " "))}</td><td class="small" data-k="error"></td>`;
          body.prepend(tr);
        }
        const st = tr.querySelector("[data-k=status]");
        st.textContent = j.status; st.className = "badge " + j.status;
        tr.querySelector("[data-k=bar]").style.width = (100 * j.progress).toFixed(1) + "%";
        tr.querySelector("[data-k=frames]").textContent = j.frames_done + (j.frame_count ? " / " + j.frame_count : "");
        tr.querySelector("[data-k=run]").innerHTML = j.run_id ? `<a href="${A.url("/runs/" + j.run_id)}">#${j.run_id}</a>` : "";
        tr.querySelector("[data-k=error]").textContent = (j.error || "").slice(0, 120);
      });
    } catch (e) { /* the service may be restarting: try again */ }
    setTimeout(pollJobs, 2000);
  }
  setTimeout(pollJobs, 2000);

  async function jsonOrThrow(r) {
    if (r.ok) return r.status === 204 ? null : r.json();
    let detail = r.statusText;
    try { detail = (await r.json()).detail; } catch (e) { /* not JSON */ }
    throw new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
  }

  const CHUNK = 8 * 1024 * 1024;
  async function upload(file, kind, onBytes) {
    const up = await jsonOrThrow(await fetch("/api/uploads", {method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify({kind, filename: file.name, size: file.size})}));
    let offset = 0;
    while (offset < file.size) {
      const r = await fetch(up.upload_url, {method: "PATCH", credentials: "same-origin",
        headers: {"Upload-Offset": String(offset), "Content-Type": "application/offset+octet-stream"},
        body: file.slice(offset, offset + CHUNK)});
      if (r.status === 409 || r.status === 400) {  // out of step or interrupted: ask where to go on from
        const h = await fetch(up.upload_url, {method: "HEAD", credentials: "same-origin"});
        offset = Number(h.headers.get("Upload-Offset"));
        continue;
      }
      await jsonOrThrow(r);
      offset = Number(r.headers.get("Upload-Offset"));
      onBytes(offset);
    }
    return up;
  }

  const form = document.getElementById("job-upload");
  if (!form) return;
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const status = document.getElementById("job-upload-status");
    const bar = form.querySelector("[data-k=upload-bar]");
    const video = form.video.files[0], log = form.log.files[0];
    const total = video.size + (log ? log.size : 0);
    let base = 0;
    const progress = (n) => { bar.style.width = (100 * (base + n) / total).toFixed(1) + "%"; };
    form.querySelector("button").disabled = true;
    try {
      let logId = null;
      if (log) {
        status.textContent = "uploading the flight log…";
        const l = await upload(log, "flight_log", progress);
        await jsonOrThrow(await fetch(`/api/uploads/${l.id}/complete`, {method: "POST", credentials: "same-origin",
          headers: {"Content-Type": "application/json"}, body: JSON.stringify({enqueue: false})}));
        logId = l.id; base = log.size;
      }
      status.textContent = "uploading the video…";
      const v = await upload(video, "video", progress);
      const params = {enqueue: true, baseline: form.baseline.checked, log_upload_id: logId};
      if (form.speed_limit_kmh.value) params.speed_limit_kmh = Number(form.speed_limit_kmh.value);
      if (form.task_round_id.value) params.task_round_id = Number(form.task_round_id.value);
      const done = await jsonOrThrow(await fetch(`/api/uploads/${v.id}/complete`, {method: "POST",
        credentials: "same-origin", headers: {"Content-Type": "application/json"}, body: JSON.stringify(params)}));
      status.textContent = done.job ? `queued as job #${done.job.id}` : "uploaded";
    } catch (e) {
      status.textContent = "upload failed: " + e.message;
    } finally {
      form.querySelector("button").disabled = false;
    }
  });
})();
