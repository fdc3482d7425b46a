"""What stands in front of the routes, outermost first: the count of every response by status,
the Host allow-list (Starlette's TrustedHostMiddleware), the API key.

All pure ASGI, so streamed responses and disconnects pass through untouched."""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ragraph.serve.http_error import HttpError
from ragraph.serve.settings import ServeSettings

if TYPE_CHECKING:
    from ragraph.serve.state import ServerState

# Without the key: probes, and the page itself (its data comes from the guarded endpoints).
OPEN_PATHS = frozenset({"/", "/ok", "/health", "/readiness", "/page/page.js", "/page/page.css"})


def guards(settings: ServeSettings, state: ServerState) -> list[Middleware]:
    """The middleware stack, outermost first. A foreign Host is refused before the key is
    checked: a DNS-rebinding page learns nothing, not even that a key is needed."""
    stack = [Middleware(CountResponses, state=state)]
    if "*" not in settings.hosts:
        # Starlette's own check: it parses the Host header as the HTTP spec says (IPv6 in
        # brackets, ports) and answers 400 "Invalid host header" to any other name.
        stack.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(settings.hosts),
                                www_redirect=False))
    if settings.api_key:
        stack.append(Middleware(RequireKey, key=settings.api_key, state=state))
    return stack


class CountResponses:
    """Every HTTP response, by status, into the metrics (refusals before any route included)."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start" and self.state.metrics is not None:
                self.state.metrics.responded(message["status"])
            await send(message)

        await self.app(scope, receive, counted)


class RequireKey:
    """`Authorization: Bearer KEY` on every path but the probes and the page. The scheme is
    case-insensitive (RFC 9110 11.1: `bearer KEY` is the same credentials); the key is
    compared in constant time."""

    def __init__(self, app: ASGIApp, key: str, state: ServerState) -> None:
        self.app, self.key, self.state = app, key.encode(), state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, token = given.strip().partition(b" ")
            if not (scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(),
                                                                         self.key)):
                if self.state.metrics is not None:
                    self.state.metrics.reject(401)
                error = HttpError(401, "authorization: this server needs "
                                  "'Authorization: Bearer <key>' (--api-key)",
                                  headers={"WWW-Authenticate": "Bearer"})
                await error.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)
