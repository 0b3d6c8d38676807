"""The Runtime's side of Environments: where a workspace Session's commands run, and what they may reach.

- `workspace`: an enrolled Runtime's Environment, bound to `--workspace DIR` (self_hosted).
- `sandbox`: a hosted Runtime's Environments (openai_hosted), one bubblewrap sandbox each, and the network
  namespace a shared Runtime's native Harness runs in; the bwrap argv is built here and only here.
- `egress` and `bridge`: the sandboxes' network: the egress proxy (the public internet, nothing of the
  host) and the model provider's bridge (the operator's key stays outside).
- `exec_server`: the exec-server hub: an operator's Codex Runtime joining the stock `codex exec-server`'s
  WebSockets to its app-servers (self_hosted Codex Environments with nothing of ours installed).
- `loopserver`: the loopback server plumbing the listeners above share.
"""
