"""Per-device upload limits: unfinished uploads held at once, uploads started per window, bytes announced per
window. Beyond a limit: 429 with a Retry-After that says when the next one is accepted; other devices are not
affected; the counts live in the database (a second app on it refuses too) and deleting uploads does not reset
them."""

from __future__ import annotations

from datetime import timedelta

from service_helpers import running_app
from sqlalchemy import update

from db.models import utcnow
from edge.service.models import UploadRow


def _new(client, who: str, size: int = 2048, name: str = "f.mp4"):
    return client.post(
        "/api/uploads", headers=client.creds[who], json={"kind": "video", "filename": name, "size": size}
    )


def test_unfinished_uploads_per_device(settings_factory):
    with running_app(settings_factory(open_uploads_per_device=2)) as c:
        first, second = _new(c, "DRONE-1"), _new(c, "DRONE-1")
        assert first.status_code == second.status_code == 201
        third = _new(c, "DRONE-1")
        assert third.status_code == 429, third.text
        assert "2 unfinished uploads" in third.json()["detail"] and int(third.headers["Retry-After"]) > 0
        assert _new(c, "DRONE-2").status_code == 201  # another device has its own count
        # finishing one (here: deleting it) frees a place
        assert c.delete(first.json()["upload_url"], headers=c.creds["DRONE-1"]).status_code == 204
        assert c.get(first.json()["upload_url"], headers=c.creds["DRONE-1"]).status_code == 404
        assert _new(c, "DRONE-1").status_code == 201


def test_uploads_per_window_with_retry_after(settings_factory):
    settings = settings_factory(uploads_per_window=3, upload_window_s=600)
    with running_app(settings) as c:
        made = [_new(c, "DRONE-1") for _ in range(3)]
        assert [r.status_code for r in made] == [201] * 3
        for r in made:  # deleted uploads still count: create/delete in a loop gets round nothing
            c.delete(r.json()["upload_url"], headers=c.creds["DRONE-1"])
        refused = _new(c, "DRONE-1")
        assert refused.status_code == 429
        assert "DRONE-1: 3 uploads started in the last 10 min (limit 3)" in refused.json()["detail"]
        assert 590 <= int(refused.headers["Retry-After"]) <= 600  # when the oldest leaves the 10 min window
        assert _new(c, "DRONE-2").status_code == 201
        # the oldest upload is now 9 minutes old: it leaves the window in about a minute
        with c.app.state.ctx.sessions() as s, s.begin():
            s.execute(
                update(UploadRow)
                .where(UploadRow.id == made[0].json()["id"])
                .values(created_at=utcnow() - timedelta(minutes=9))
            )
        again = _new(c, "DRONE-1")
        assert again.status_code == 429 and 50 <= int(again.headers["Retry-After"]) <= 61
        with c.app.state.ctx.sessions() as s, s.begin():
            s.execute(
                update(UploadRow)
                .where(UploadRow.id == made[0].json()["id"])
                .values(created_at=utcnow() - timedelta(minutes=11))
            )
        assert _new(c, "DRONE-1").status_code == 201  # out of the window: accepted again

    # the count is in the database: a restarted (or second) service refuses as well
    with running_app(settings) as c:
        assert _new(c, "DRONE-1").status_code == 429


def test_bytes_per_window(settings_factory):
    with running_app(settings_factory(upload_bytes_per_window=10_000)) as c:
        assert _new(c, "DRONE-1", size=6000).status_code == 201
        over = _new(c, "DRONE-1", size=5000)
        assert over.status_code == 429 and "6000 bytes announced" in over.json()["detail"]
        assert int(over.headers["Retry-After"]) > 3000  # the first upload must leave the 1 h window
        assert _new(c, "DRONE-1", size=4000).status_code == 201  # what still fits is accepted
        never = _new(c, "DRONE-2", size=20_000)
        assert never.status_code == 413  # larger than a whole window's allowance: waiting would not help
