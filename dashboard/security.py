"""HTTP hardening of every response: security headers, and session cookies marked ``Secure`` whenever TLS is used.

The Content-Security-Policy allows scripts only from this server, and no inline script: the templates pass data to
the page as ``<script type="application/json">`` blocks, which browsers never execute. Inline ``style`` attributes
stay allowed (progress bars, Leaflet and plotly set them). Pages cannot be framed (clickjacking). FastAPI's own
``/docs`` and ``/redoc`` pages load Swagger UI from a CDN with an inline script, so they get everything but the CSP.

Behind a TLS-terminating reverse proxy, run uvicorn with ``--proxy-headers --forwarded-allow-ips=<proxy>`` so the
request scheme is ``https``; the cookies then get ``Secure`` and responses ``Strict-Transport-Security``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.middleware.sessions import SessionMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNFRAMED_DOCS = ("/docs", "/redoc", "/docs/oauth2-redirect")


def content_security_policy(tile_url: str | None = None) -> str:
    img = ["'self'", "data:", "blob:"]
    if tile_url:  # the optional base map's tile server
        parts = urlsplit(tile_url.replace("{s}", "a"))
        if parts.scheme in ("http", "https") and parts.netloc:
            host = parts.netloc.replace("a.", "*.", 1) if "{s}" in tile_url.split("/")[2] else parts.netloc
            img.append(f"{parts.scheme}://{host}")
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self' 'unsafe-inline'",
            f"img-src {' '.join(img)}",
            "media-src 'self' blob:",
            "connect-src 'self'",
            "font-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


class SecurityHeadersMiddleware:
    """Adds the headers to every HTTP response that does not set them itself."""

    def __init__(self, app: ASGIApp, csp: str):
        self.app, self.csp = app, csp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        docs = scope.get("path", "") in UNFRAMED_DOCS
        tls = scope.get("scheme") == "https"

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "same-origin")
                headers.setdefault("X-Frame-Options", "DENY")
                headers.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
                headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
                if not docs:
                    headers.setdefault("Content-Security-Policy", self.csp)
                if tls:
                    headers.setdefault("Strict-Transport-Security", "max-age=31536000")
            await send(message)

        await self.app(scope, receive, send_with_headers)


class TLSAwareSessionMiddleware:
    """Starlette's signed-cookie sessions (``HttpOnly``, ``SameSite``), ``Secure`` on every request that came over
    TLS, and on all of them with ``https_only``."""

    def __init__(self, app: ASGIApp, /, **kwargs: Any):
        https_only = kwargs.pop("https_only", False)
        self._tls = SessionMiddleware(app, https_only=True, **kwargs)
        self._plain = self._tls if https_only else SessionMiddleware(app, https_only=False, **kwargs)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tls = scope.get("scheme") in ("https", "wss")
        await (self._tls if tls else self._plain)(scope, receive, send)
