"""Registers the ``ray`` executor (``agentprov run --executor ray``)."""

from agentprov_core.api import ExecutorMeta, hookimpl


@hookimpl
def agentprov_executors():
    return [ExecutorMeta(name="ray", start="agentprov_ray.executor:RayExecutor",
                         check="agentprov_ray.executor:check",
                         summary="the cells on the nodes of a Ray cluster (--ray-address)")]
