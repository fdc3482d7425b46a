"""The one error a route raises to answer a client: a status and a message naming the field,
in OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`, which the `openai`
client turns into its typed exceptions and any other client can read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
               408: "request_timeout", 413: "request_too_large",
               415: "unsupported_media_type", 429: "rate_limit_exceeded",
               499: "client_closed_request", 500: "internal_error", 502: "upstream_error",
               503: "unavailable", 504: "timeout"}


class HttpError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None,
                 headers: Mapping[str, str] | None = None, type: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param
        self.type = type or ERROR_TYPES.get(status, "error")
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.status}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)
