"""The web explorer: a surface beside mcp_surface/, for a person rather than an agent.

- app.py: the Starlette app, its security layer (loopback Host, CSP, cross-site refusal,
  sessions) and the runner that reads as the session's caller, as a tool call does.
- pages.py, actions.py, login.py: the routes; data.py: what each page reads from the
  services the tools call.
- auth.py: one-time login links, sessions, CSRF tokens; host.py: serving it from the owner
  of the data dir; run.py: ``brain ui``.

brain/ never imports this package (it stays free of web frameworks).
"""
