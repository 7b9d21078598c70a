"""The service's address and the device token, and one HTTP client that uses them."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx


class ClientError(ValueError):
    """Something the user can fix (no token, bad URL, refused request); the message says what."""


@dataclass(frozen=True)
class Endpoint:
    base: str  # http(s)://host:port, no trailing slash
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def ws_base(self) -> str:
        return "ws" + self.base[len("http") :]

    def client(self, timeout: float = 30.0) -> httpx.Client:
        return httpx.Client(base_url=self.base, headers=self.headers, timeout=timeout)


def endpoint(server: str | None, token: str | None, config_file=None) -> Endpoint:
    """Server URL and device token: the command line, else ``AIRPATROL_SERVER_URL`` / ``AIRPATROL_DEVICE_TOKEN``
    (or ``server_url`` / ``device_token`` in the ``airpatrol`` config file)."""
    from edge.config import load_settings

    settings = load_settings(config_file)
    server = server or settings.server_url
    if not server:
        raise ClientError("no server: give --server URL or set AIRPATROL_SERVER_URL")
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ClientError(f"--server {server}: expected http(s)://host[:port]")
    secret = token or (settings.device_token.get_secret_value() if settings.device_token else None)
    if not secret:
        raise ClientError(
            "no device token: set AIRPATROL_DEVICE_TOKEN (an admin creates one with "
            "POST /api/devices/SERIAL/tokens) or device_token in the config file"
        )
    return Endpoint(server.rstrip("/"), secret)


def check(r: httpx.Response, what: str) -> dict:
    """The JSON body of a successful response, or ClientError with the server's reason."""
    if r.status_code >= 400:
        try:
            detail = r.json().get("detail")
        except ValueError:
            detail = r.text[:200]
        if r.status_code == 401:
            detail = f"{detail} (check the device token)"
        raise ClientError(f"{what}: HTTP {r.status_code}: {detail}")
    return r.json() if r.content else {}
