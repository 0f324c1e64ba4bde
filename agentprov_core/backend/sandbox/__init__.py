"""Linux containment of the worker with bubblewrap: the profile (``profile``), the
host-side bridge to loopback ports (``bridge``) and the build-time probe (``probe``).

``_launch.py`` and ``_probe_child.py`` run *inside* the sandbox with the environment's
Python (3.12, no agentprov installed): they are passed as ``python -I -S -c SOURCE`` and
use the standard library only.
"""
