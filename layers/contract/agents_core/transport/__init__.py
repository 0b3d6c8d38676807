"""Transport: how requests reach the domain and answers leave it, apart from what they mean.

- `http`: the buffered REST routes (Powertools' resolver): admission first, domain errors as responses.
- `asgi`: the streaming function's Starlette app (Lambda Web Adapter): the same admission and errors.
- `sse`: server-sent event frames and the polling loop that streams a Session's committed events.
- `request`: what every request is checked for first, whichever server answers it.
- `errors`: the one error response, for both servers.
- `headers`: header lookup and the one bearer parser (REST authorizer, WebSocket `$connect`).

Nothing here is imported by the package itself: each function imports only the adapter it serves, so
a cold start pays for its own server and no other (tests/unit/test_cold_start_imports.py).
"""
