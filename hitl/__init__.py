"""The product below its top level: settings, codec, catalog, worker, clients, console and HTTP API.

`workflows/` (the deterministic session), `activities/` (model, tools, MCP),
`worker.py` and `starter.py` stay at the top; this package holds the rest:
configuration (`settings`), the payload codec (`encryption`), decision keys,
the embedded dev server, the tool catalog, the worker (`hitl.worker`), the
command line (`hitl.cli`), the terminal (`console`) and the HTTP API (`api`).

Nothing is imported here: workflow code imports `hitl.catalog` inside the
sandbox, and importing the package must not pull the API or the terminal in.
"""
