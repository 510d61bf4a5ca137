"""How the HTTP servers turn anything raised while serving a request into a status and a JSON body
`{"error": {"code", "message"}}`: `api_error`, the one mapping table. Messages name the problem, never echo
restricted text, and carry no stack trace."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from evidex.errors import AccessDenied, BackendUnavailable, EmbeddingError, EvidexError, StageError
from evidex.interfaces import tool


@dataclass
class ApiError(Exception):
    status: int
    code: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)

    def response(self) -> JSONResponse:
        return JSONResponse({"error": {"code": self.code, "message": self.message}}, status_code=self.status,
                            headers=self.headers)


_HTTP_CODES = {400: "invalid-request", 401: "unauthorized", 403: "forbidden", 404: "not-found",
               405: "method-not-allowed", 413: "body-too-large", 415: "unsupported-media-type",
               429: "rate-limited"}


def api_error(exc: BaseException) -> ApiError:
    """Map anything raised while serving a request to a status, a code and a message safe to show."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, tool.ToolInputError):
        return ApiError(400, "invalid-argument", str(exc))
    if isinstance(exc, RequestValidationError):
        return ApiError(400, "invalid-argument", validation_message(exc))
    if isinstance(exc, StarletteHTTPException):
        status = exc.status_code
        message = "request body too large" if status == 413 else str(exc.detail)
        return ApiError(status, _HTTP_CODES.get(status, "http-error"), message, dict(exc.headers or {}))
    if isinstance(exc, AccessDenied):
        return ApiError(403, "forbidden", "access denied")
    if isinstance(exc, (BackendUnavailable, EmbeddingError)):
        return ApiError(503, "unavailable", "the search backend is unavailable; the operator has the details")
    if isinstance(exc, StageError):  # its message may quote the underlying exception: name the stage only
        return ApiError(500, "stage-failed", f"search stage {exc.stage!r} failed; the operator has the details")
    if isinstance(exc, EvidexError):
        return ApiError(500, "internal-error", f"internal error ({type(exc).__name__})")
    return ApiError(500, "internal-error", "internal error")


def validation_message(exc: RequestValidationError, max_k: int = tool.MAX_K) -> str:
    """What is wrong with a request body, worded for the caller (`max_k`: this server's limit on k)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        try:  # the tool's own validator words the common mistakes best (and never echoes values)
            tool.parse_arguments(body, max_k=max_k)
        except tool.ToolInputError as err:
            return str(err)
    parts = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e.get("loc", ())[1:]) or "body"
        if e.get("type") == "json_invalid":
            parts.append("body: not valid JSON")
        elif loc == "body":
            parts.append("body: a JSON object with 'query' is required (Content-Type: application/json)")
        else:
            parts.append(f"{loc}: {e.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"
