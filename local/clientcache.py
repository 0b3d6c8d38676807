"""One botocore client per (session, service, region, endpoint, credentials, configuration) in this process.

A Lambda execution environment makes its clients once and keeps them; the local stack runs every function in one
process and the in-process test stack is rebuilt for each test, so without this each stack, each reset cache and
each Task state moto's Step Functions runs (`boto_client_for`) makes its clients again: about 8 ms of CPU apiece,
an eighth of an in-process test's CPU. Botocore clients are thread-safe, and moto's stubber is registered on every
client made after moto's import, so a client made under one `mock_aws` serves the next one.

Installed by the local stack (`python -m local`) and the test suite (tests/conftest.py), not by the benchmarks:
they count requests by registering handlers on their clients, which a shared client would hand to every caller.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

_lock = threading.Lock()
_clients: dict[tuple, tuple[Any, Any]] = {}  # key -> (session, client): the session kept, so its id stays its own
LIMIT = 512  # a caller making a session per call would otherwise grow this without end
_installed = False


def _key(session: Any, args: tuple, kwargs: dict[str, Any]) -> tuple | None:
    names = ("service_name", "region_name", "api_version", "use_ssl", "verify", "endpoint_url",
             "aws_access_key_id", "aws_secret_access_key", "aws_session_token", "config", "aws_account_id")
    if len(args) > len(names):
        return None
    given = dict(zip(names, args, strict=False)) | kwargs
    config = given.pop("config", None)
    options = None if config is None else getattr(config, "_user_provided_options", None)
    if config is not None and options is None:
        return None  # a configuration we cannot compare: a client of its own
    try:
        key = (id(session), tuple(sorted((k, repr(v)) for k, v in given.items())),
               tuple(sorted((k, repr(v)) for k, v in (options or {}).items())))
        hash(key)
    except TypeError:
        return None
    return key


def install() -> None:
    global _installed
    if _installed:
        return
    from botocore.session import Session

    create = Session.create_client

    @functools.wraps(create)
    def create_client(self: Any, *args: Any, **kwargs: Any) -> Any:
        key = _key(self, args, kwargs)
        if key is None:
            return create(self, *args, **kwargs)
        found = _clients.get(key)
        if found is None:
            with _lock:
                found = _clients.get(key)
                if found is None:
                    if len(_clients) >= LIMIT:
                        _clients.clear()
                    found = _clients[key] = (self, create(self, *args, **kwargs))
        return found[1]

    Session.create_client = create_client  # type: ignore[method-assign]
    _installed = True


def clear() -> None:
    """Forget every client (local/iam.py, when it starts checking: a client made before it would go unchecked)."""
    with _lock:
        _clients.clear()
