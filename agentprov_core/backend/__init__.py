"""Backend environments and the worker in them, as T0 sees them: building one with uv
(``build``, ``lockcheck``, ``interpreters``, ``defassets``), its id, marker and identity
recomputed from its files (``environments``, ``marker``, ``identity``), starting and talking
to a worker (``workerclient``, ``session``: hello, catalogue, plan), how the worker is
contained (``containment``, ``sandbox/``, the build-time ``probe``) and how many may run at
once (``hostlimits``); where a contributed backend project is (``projects``). Never imports the worker library: the worker is another process.

May import: ``source``, ``plugins``, ``registries``, ``plan``, ``catalogue``,
``backendproject``, ``base``, ``errors``; never ``run``, ``cli`` or ``live``.
"""
