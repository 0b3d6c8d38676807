"""Runtimes: tokens, connections, capability declarations, claiming Turns, and observations.

A Runtime connects over the WebSocket API with a Runtime token (hashed, separate from API keys),
says `runtime.hello` with one complete capability declaration per Harness, receives Turn work
(`turn.start`, `turn.input`, `turn.tool_result`, `turn.cancel`) and reports observations, each with
`(turn_id, seq)`; duplicates are ignored. "An advertisement alone never enables an operation":
admission already checked the Harness declaration, dispatch checks the Runtime's capabilities.

One module per concern: `connections` (tokens, `$connect`, hello, who may serve what),
`dispatch` (claiming Turns, `turn.start`), `observations` (the `turn.*` messages), `settlement`.
"""
