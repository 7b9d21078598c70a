"""Send a recorded flight (video + optional flight log) through the service's resumable upload API and follow its job.

The file's SHA-256 goes with the upload and the server checks it at completion. Chunks go with ``PATCH`` at the
offset the server has; when the connection drops (or the server answers 5xx) the client asks ``HEAD`` for the offset
the server kept and goes on from there, with a growing pause, until ``max_retries`` attempts in a row have failed.
An interrupted command run again with the same file resumes the same upload (its id is remembered in a small state
file next to the user's data) instead of starting over.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from edge.client.api import ClientError, Endpoint, check

LOG_SUFFIXES = {".srt", ".csv", ".ulg", ".tlog", ".bin", ".gpx", ".txt"}
Progress = Callable[[str, int, int], None]  # (what, done, total)


@dataclass
class UploadOptions:
    chunk_bytes: int = 8 * 1024 * 1024
    max_retries: int = 8
    retry_initial_s: float = 0.5
    retry_max_s: float = 15.0
    state_file: Path | None = None  # remembers unfinished uploads (resume across runs)


def sha256_of(path: Path, progress: Progress | None = None) -> str:
    h, done, total = hashlib.sha256(), 0, path.stat().st_size
    with path.open("rb") as f:
        while chunk := f.read(1024 * 1024):
            h.update(chunk)
            done += len(chunk)
            if progress:
                progress(f"checksum {path.name}", done, total)
    return h.hexdigest()


class _State:
    """``{key: upload_id}`` of unfinished uploads; key = server + file identity (path, size, mtime, sha256)."""

    def __init__(self, path: Path | None):
        self.path = path

    def _load(self) -> dict:
        try:
            return json.loads(self.path.read_text()) if self.path and self.path.is_file() else {}
        except (OSError, ValueError):
            return {}

    def get(self, key: str) -> str | None:
        return self._load().get(key)

    def put(self, key: str, upload_id: str | None) -> None:
        if self.path is None:
            return
        data = self._load()
        if upload_id is None:
            data.pop(key, None)
        else:
            data[key] = upload_id
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.path)


class Uploader:
    def __init__(
        self, ep: Endpoint, options: UploadOptions, progress: Progress | None = None, say: Callable[[str], None] = print
    ):
        self.ep, self.opt, self.progress, self.say = ep, options, progress, say
        self.http = ep.client(timeout=60.0)
        self.state = _State(options.state_file)
        self.resumes = 0  # times a dropped transfer was resumed

    def close(self) -> None:
        self.http.close()

    def send(self, path: Path, kind: str) -> dict:
        """Upload one file completely; returns the upload (status ``receiving``, all bytes stored)."""
        size = path.stat().st_size
        if size == 0:
            raise ClientError(f"{path}: empty file")
        digest = sha256_of(path, self.progress)
        key = f"{self.ep.base}|{path.resolve()}|{size}|{path.stat().st_mtime_ns}|{digest}"
        upload = self._existing(self.state.get(key), size)
        if upload is None:
            upload = check(
                self._retry(
                    lambda: self.http.post(
                        "/api/uploads", json={"kind": kind, "filename": path.name, "size": size, "sha256": digest}
                    )
                ),
                f"{path}: create upload",
            )
            self.state.put(key, upload["id"])
        else:
            self.say(f"resuming upload {upload['id']} of {path.name} at {upload['offset']} / {size} bytes")
        upload["_key"], upload["sha256"] = key, digest
        self._transfer(path, upload, size)
        return upload

    def complete(self, upload: dict, params: dict) -> dict:
        url = f"/api/uploads/{upload['id']}/complete"
        out = check(
            self._retry(lambda: self.http.post(url, json=params, timeout=600)), f"{upload['filename']}: complete"
        )
        self.state.put(upload["_key"], None)
        return out

    # -- internals -------------------------------------------------------------------------------------------
    def _existing(self, upload_id: str | None, size: int) -> dict | None:
        if upload_id is None:
            return None
        r = self.http.get(f"/api/uploads/{upload_id}")
        if r.status_code != 200 or r.json().get("status") != "receiving" or r.json().get("size") != size:
            return None  # gone, finished or refused on the server: start a new one
        return r.json()

    def _offset(self, upload_id: str) -> int:
        r = self._retry(lambda: self.http.head(f"/api/uploads/{upload_id}"))
        check(r, "upload offset")
        return int(r.headers["Upload-Offset"])

    def _transfer(self, path: Path, upload: dict, size: int) -> None:
        offset, failures, pause = int(upload.get("offset") or 0), 0, self.opt.retry_initial_s
        url = f"/api/uploads/{upload['id']}"
        with path.open("rb") as f:
            while offset < size:
                if self.progress:
                    self.progress(f"upload {path.name}", offset, size)
                f.seek(offset)
                chunk = f.read(min(self.opt.chunk_bytes, size - offset))
                try:
                    r = self.http.patch(
                        url,
                        content=chunk,
                        headers={"Upload-Offset": str(offset), "Content-Type": "application/offset+octet-stream"},
                    )
                    if r.status_code < 500 and r.status_code != 409:
                        check(r, f"{path}: upload")
                        offset, failures, pause = int(r.headers["Upload-Offset"]), 0, self.opt.retry_initial_s
                        continue
                    reason = f"HTTP {r.status_code}"
                except httpx.TransportError as exc:
                    reason = f"{type(exc).__name__}: {exc}"[:120]
                failures += 1
                if failures > self.opt.max_retries:
                    raise ClientError(
                        f"{path}: upload failed {failures} times in a row ({reason}); run the same "
                        f"command again to resume from byte {offset}"
                    )
                time.sleep(pause)
                pause = min(pause * 2, self.opt.retry_max_s)
                offset = self._offset(upload["id"])  # what the server kept of the interrupted chunk
                self.resumes += 1
                self.say(f"connection lost ({reason}); resuming at byte {offset} of {size}")
        if self.progress:
            self.progress(f"upload {path.name}", size, size)

    def _retry(self, request: Callable[[], httpx.Response]) -> httpx.Response:
        """A small request, repeated on transport errors and 5xx (the server restarting, a flaky link)."""
        pause = self.opt.retry_initial_s
        for attempt in range(self.opt.max_retries + 1):
            try:
                r = request()
                if r.status_code < 500 or attempt == self.opt.max_retries:
                    return r
            except httpx.TransportError as exc:
                if attempt == self.opt.max_retries:
                    raise ClientError(f"{self.ep.base}: {type(exc).__name__}: {exc}") from None
            time.sleep(pause)
            pause = min(pause * 2, self.opt.retry_max_s)
        raise AssertionError("unreachable")


def follow_job(
    ep: Endpoint, job_id: int, progress: Progress | None = None, poll_s: float = 1.0, timeout_s: float | None = None
) -> dict:
    """Poll the job until it is complete, failed or cancelled; returns its last status."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with ep.client() as http:
        while True:
            try:
                job = check(http.get(f"/api/jobs/{job_id}"), f"job {job_id}")
            except httpx.TransportError:
                job = None  # the server restarting: the job is in its database, keep asking
            if job is not None:
                if progress:
                    total = job.get("frame_count") or 0
                    progress(f"job {job_id} {job['status']}", job.get("frames_done") or 0, total)
                if job["status"] in ("complete", "failed", "cancelled"):
                    return job
            if deadline is not None and time.monotonic() > deadline:
                raise ClientError(f"job {job_id}: still {job and job['status']} after {timeout_s:.0f} s")
            time.sleep(poll_s)
