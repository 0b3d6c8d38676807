"""Domain errors and the official error envelope.

`{"error": {"message", "type", "param", "code"}}` on every non-2xx. `type` is derived from the
status and code exactly as the contract notes say; handlers turn these exceptions into HTTP in one
place.
"""

from __future__ import annotations

from typing import Any


def error_type(status: int, code: str | None) -> str:
    if status >= 500:
        return "server_error"
    if status == 409:
        return "conflict_error"
    if status == 404:
        return "not_found_error"
    if code == "invalid_beta":
        return "invalid_beta"
    return "invalid_request_error"


class AgentsError(Exception):
    """A deterministic rejection with the official error fields."""

    status: int = 400
    default_code: str | None = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = ...):  # type: ignore[assignment]
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = self.default_code if code is ... else code

    @property
    def type(self) -> str:
        return error_type(self.status, self.code)

    def envelope(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"{type(self).__name__}({self.status}, {self.message!r}, param={self.param!r}, code={self.code!r})"


class InvalidRequest(AgentsError):
    """400: a protocol error (request shape) or an invalid input event."""


class UnsupportedConfiguration(AgentsError):
    """400: admission rejects the combination against the Harness declaration."""

    default_code = "unsupported_or_invalid_configuration"


class InvalidBeta(AgentsError):
    default_code = "invalid_beta"

    def __init__(self) -> None:
        super().__init__("To access the Agents API, set the 'OpenAI-Beta' header to 'agents=v1'.")


class Unauthorized(AgentsError):
    status = 401
    default_code = "invalid_api_key"


class NotFound(AgentsError):
    status = 404
    default_code = "not_found_error"

    def __init__(self, message: str = "Resource not found.", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)


class MethodNotAllowed(AgentsError):
    status = 405
    default_code = "method_not_allowed"


class Conflict(AgentsError):
    status = 409
    default_code = "conflict_error"


class IdempotencyConflict(Conflict):
    default_code = "idempotency_conflict"

    def __init__(self) -> None:
        super().__init__("This idempotency key was used with different input.")


class PayloadTooLarge(AgentsError):
    status = 413
    default_code = "payload_too_large"


class ServerError(AgentsError):
    """500: unexpected failure; the message is generic, details go to logs only."""

    status = 500
    default_code = "server_error"

    def __init__(self, message: str = "The server had an error while processing your request.") -> None:
        super().__init__(message)


class Unavailable(AgentsError):
    """429: DynamoDB stayed throttled or contended after our own retries; nothing was written and
    the request is safe to retry (the SDK retries 429 by itself)."""

    status = 429
    default_code = "rate_limit_exceeded"

    def __init__(self, message: str = "The service is busy right now; nothing was written. Retry the request.") -> None:
        super().__init__(message)
