"""Linux containment of the worker with bubblewrap: the profile (``profile``), its seccomp
filter (``seccomp``), the host-side bridge to loopback ports (``bridge``) and the macOS
profile text (``sbpl``). The build-time probe that tries them is ``backend.probe``.

``_launch.py`` here and ``backend/_probe_child.py`` run *inside* the sandbox with the environment's
Python (3.12, no agentprov installed): they are passed as ``python -I -S -c SOURCE`` and
use the standard library only.
"""
