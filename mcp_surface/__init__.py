"""Tool groups of the MCP server. Each module has ``register(mcp, call)``; ``call(fn)`` runs
``fn(brain)`` in a worker thread and turns a BrainError into an MCP tool error."""
