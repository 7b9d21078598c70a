"""Bounded loopback load test of `airpatrol serve`: concurrent uploads of a real clip, dashboard viewers, live push
streams. Prints the figures; nothing leaves 127.0.0.1.

By default the detector is the test suite's fake (tests/edge/service/service_fakes.py: bright blobs, no neural
network), so the figures measure the service - HTTP, uploads, the job queue, the database, the dashboard, ego-motion
and tracking - not model inference; ``--detector real`` runs the shipped pipeline (YOLO + road U-Net, the service's
default) instead, inference included. Every request must be answered (2xx) or refused (429/503): a hang (timeout),
a 5xx or a lost job is counted and reported.

    python bench/load_test.py                       # uploads at N = 1, 4, 16; 50 viewers; 4 push streams
    python bench/load_test.py --uploads 1 4 --viewers 20 --streams 2 --seconds 10
    python bench/load_test.py --detector real --uploads 1 4 --viewers 20 --streams 2 --seconds 20
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.serving import device_token, login, start_serve, stop  # noqa: E402

FAKES = REPO / "tests" / "edge" / "service"
SHARED = Path(os.environ.get("AIRPATROL_SHARED", REPO.parent / "shared"))
CLIP = SHARED / "data" / "real_video" / "toll_plaza" / "247589_tiny.mp4"
ADMIN_PW = "load-test-admin-pw"
TIMEOUT = 60.0  # a request not answered within this is counted as hung


class Server:
    def __init__(self, folder: Path, job_workers: int, log: Path | None = None, detector: str = "fake"):
        config = {
            "database_url": f"sqlite:///{folder / 'airpatrol.db'}",
            "data_dir": str(folder / "data"),
            "pipeline": {"calibration": {"metres_per_pixel": 0.1}},
            "service": {
                "job_workers": job_workers,
                "bootstrap_admin": "admin",
                "job_poll_s": 0.2,
                **({"pipeline_factory": "service_fakes:make_pipeline"} if detector == "fake" else {}),
            },
        }
        env = {"AIRPATROL_SERVICE__BOOTSTRAP_ADMIN_PASSWORD": ADMIN_PW}
        self.proc, self.port = start_serve(folder, config, [REPO, FAKES], env, log)
        self.base = f"http://127.0.0.1:{self.port}"
        self.rss_max = 0.0
        self._stop = threading.Event()
        threading.Thread(target=self._watch_memory, daemon=True).start()

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def _watch_memory(self):
        while not self._stop.is_set() and self.proc.poll() is None:
            self.rss_max = max(self.rss_max, self.rss_mb())
            time.sleep(0.2)

    def stop(self):
        self._stop.set()
        stop(self.proc)


class Tally:
    def __init__(self):
        self.codes: dict[str, int] = {}
        self.latencies: list[float] = []
        self.lock = threading.Lock()

    def add(self, code: str, seconds: float | None = None):
        with self.lock:
            self.codes[code] = self.codes.get(code, 0) + 1
            if seconds is not None:
                self.latencies.append(seconds)

    def bad(self) -> int:
        return sum(n for c, n in self.codes.items() if not (c.startswith("2") or c in ("429", "503")))

    def pct(self, q: float) -> float:
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")


def call(tally: Tally, method: str, url: str, **kw) -> httpx.Response | None:
    t0 = time.perf_counter()
    try:
        r = httpx.request(method, url, timeout=TIMEOUT, **kw)
    except httpx.TimeoutException:
        tally.add("hung")
        return None
    except httpx.TransportError as exc:
        tally.add(type(exc).__name__)
        return None
    tally.add(str(r.status_code), time.perf_counter() - t0)
    return r


def setup_device(srv: Server) -> dict:
    token = device_token(srv.base, login(srv.base, "admin", ADMIN_PW), "LOAD-1", "edge_node")
    return {"Authorization": f"Bearer {token}"}


def one_upload(srv: Server, device: dict, data: bytes, digest: str, tally: Tally) -> int | None:
    r = call(
        tally,
        "POST",
        f"{srv.base}/api/uploads",
        headers=device,
        json={"kind": "video", "filename": "toll.mp4", "size": len(data), "sha256": digest},
    )
    if r is None or r.status_code != 201:
        return None
    url = r.json()["upload_url"]
    r = call(
        tally,
        "PATCH",
        f"{srv.base}{url}",
        content=data,
        headers={**device, "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"},
    )
    if r is None or r.status_code != 204:
        return None
    r = call(tally, "POST", f"{srv.base}{url}/complete", headers=device, json={})
    return r.json()["job"]["id"] if r is not None and r.status_code == 200 else None


def upload_round(srv: Server, device: dict, n: int, wait_s: float = 900.0) -> dict:
    data = CLIP.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    tally = Tally()
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(n) as pool:
        jobs = [j for j in pool.map(lambda _: one_upload(srv, device, data, digest, tally), range(n))]
    uploaded_s = time.perf_counter() - t0
    accepted = [j for j in jobs if j is not None]
    deadline = time.monotonic() + wait_s
    done: dict[int, dict] = {}
    while len(done) < len(accepted) and time.monotonic() < deadline:
        for j in accepted:
            if j not in done:
                r = call(tally, "GET", f"{srv.base}/api/jobs/{j}", headers=device)
                if r is not None and r.status_code == 200 and r.json()["status"] in ("complete", "failed", "cancelled"):
                    done[j] = r.json()
        time.sleep(0.5)
    all_s = time.perf_counter() - t0
    complete = [j for j in done.values() if j["status"] == "complete"]
    # "unfinished": still queued or running when the bench stopped waiting; "failed": the job ended without a result
    return {
        "n": n,
        "accepted": len(accepted),
        "refused": n - len(accepted),
        "complete": len(complete),
        "failed": len(done) - len(complete),
        "unfinished": len(accepted) - len(done),
        "upload_s": round(uploaded_s, 1),
        "all_jobs_done_s": round(all_s, 1),
        "upload_MB_s": round(n * len(data) / 1e6 / uploaded_s, 1),
        "bad_answers": tally.bad(),
        "codes": tally.codes,
        "rss_max_mb": round(srv.rss_max),
    }


def viewers(srv: Server, n: int, seconds: float) -> dict:
    """``n`` logged-in browsers reading the runs list, its JSON, the map and the device list as fast as answered.
    The logins (Argon2 hashing, ~0.5 s of CPU each) happen first and are timed on their own."""
    tally = Tally()
    clients = [httpx.Client(base_url=srv.base, timeout=TIMEOUT) for _ in range(n)]

    def login(c):
        page = c.get("/dashboard/login")
        token = page.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
        try:
            r = c.post(
                "/dashboard/login", data={"username": "admin", "password": ADMIN_PW, "csrf_token": token, "next": ""}
            )
        except httpx.TimeoutException:
            return "hung"
        if r.status_code >= 400:
            print("login", r.status_code, r.text[:300].replace("\n", " "), file=sys.stderr)
        return r.status_code

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(n) as pool:
        logins = list(pool.map(login, clients))
    login_s = time.perf_counter() - t0
    stop = time.monotonic() + seconds

    def viewer(c):
        paths = ["/dashboard/runs", "/dashboard/api/runs", "/dashboard/map", "/dashboard/api/devices"]
        i = 0
        while time.monotonic() < stop:
            t1 = time.perf_counter()
            try:
                r = c.get(paths[i % len(paths)])
                tally.add(str(r.status_code), time.perf_counter() - t1)
            except httpx.TimeoutException:
                tally.add("hung")
            except httpx.TransportError as exc:
                tally.add(type(exc).__name__)
            i += 1

    with cf.ThreadPoolExecutor(n) as pool:
        list(pool.map(viewer, clients))
    for c in clients:
        c.close()
    requests = sum(tally.codes.values())
    login_codes: dict[str, int] = {}
    for code in logins:
        login_codes[str(code)] = login_codes.get(str(code), 0) + 1
    return {
        "viewers": n,
        "logins": login_codes,
        "logins_s": round(login_s, 1),
        "requests": requests,
        "per_s": round(requests / seconds, 1),
        "p50_ms": round(tally.pct(0.5)),
        "p95_ms": round(tally.pct(0.95)),
        "bad_answers": tally.bad(),
        "codes": tally.codes,
        "rss_max_mb": round(srv.rss_max),
    }


def push_streams(srv: Server, device: dict, n: int, seconds: float) -> dict:
    import cv2
    from websockets.sync.client import connect

    cap = cv2.VideoCapture(str(CLIP))
    frames: list = []  # the clip's images (NumPy), read once
    while len(frames) < 100:
        ok, img = cap.read()
        if not ok:
            break
        frames.append(cv2.imencode(".jpg", img)[1].tobytes())
    results = []

    def stream(k):
        sid = httpx.post(f"{srv.base}/api/streams", headers=device, json={"kind": "push", "name": f"load-{k}"}).json()
        sent = acked = 0
        with connect(f"ws://127.0.0.1:{srv.port}{sid['push_url']}", additional_headers=device, open_timeout=60) as ws:
            ws.send(json.dumps({"type": "hello", "fps": 10}))
            t_end = time.monotonic() + seconds
            while time.monotonic() < t_end:
                ws.send(json.dumps({"type": "frame", "t": sent / 10}))
                ws.send(frames[sent % len(frames)])
                sent += 1
                time.sleep(0.1)  # 10 fps per stream
            ws.send(json.dumps({"type": "end"}))
            try:
                while True:
                    json.loads(ws.recv(timeout=60))
                    acked += 1
            except Exception:  # closed: run complete
                pass
        status = httpx.get(f"{srv.base}/api/streams/{sid['id']}", headers=device).json()
        results.append(
            {
                "sent": sent,
                "processed": status.get("processed"),
                "dropped": status.get("dropped"),
                "errors": status.get("errors"),
                "state": status.get("state"),
            }
        )

    with cf.ThreadPoolExecutor(n) as pool:
        list(pool.map(stream, range(n)))
    return {"streams": n, "per_stream": results, "rss_max_mb": round(srv.rss_max)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--uploads", type=int, nargs="*", default=[1, 4, 16], help="concurrent uploads per round (none: skip)"
    )
    ap.add_argument("--viewers", type=int, default=50)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--job-workers", type=int, default=1)
    ap.add_argument("--server-log", type=Path, help="write the server's log (JSON lines) here")
    ap.add_argument("--job-wait-s", type=float, default=900.0, help="how long a round waits for its jobs")
    ap.add_argument(
        "--detector",
        choices=["fake", "real"],
        default="fake",
        help="fake: the tests' bright-blob finder (service cost only); real: the shipped YOLO + road U-Net",
    )
    args = ap.parse_args()
    if not CLIP.is_file():
        raise SystemExit(f"{CLIP}: the real clip is needed (set AIRPATROL_SHARED)")
    with tempfile.TemporaryDirectory() as tmp:
        srv = Server(Path(tmp), args.job_workers, args.server_log, args.detector)
        try:
            device = setup_device(srv)
            print(
                f"server up ({args.detector} detector), RSS {srv.rss_mb():.0f} MB; clip {CLIP.name} {CLIP.stat().st_size / 1e6:.1f} MB"
            )
            for n in args.uploads:
                print("uploads", json.dumps(upload_round(srv, device, n, args.job_wait_s)), flush=True)
            if args.viewers:
                print("viewers", json.dumps(viewers(srv, args.viewers, args.seconds)), flush=True)
            if args.streams:
                print("push   ", json.dumps(push_streams(srv, device, args.streams, args.seconds)), flush=True)
            print(
                f"server RSS at the end {srv.rss_mb():.0f} MB, max {srv.rss_max:.0f} MB; alive: {srv.proc.poll() is None}"
            )
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
