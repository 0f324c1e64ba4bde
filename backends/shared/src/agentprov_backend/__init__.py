"""agentprov_backend: the worker-side library of agentprov.

It runs inside a backend environment (a separate uv project on Python 3.12 with the pinned
benchmark code) and never imports agentprov_core. It needs the standard library and agentprov_capture (the
capture/0.1 format, packages/capture).
"""

__version__ = "0.1.0"
