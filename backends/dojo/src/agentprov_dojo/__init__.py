"""agentprov_dojo: what every AgentDojo-shaped worker package shares.

AgentDojo 0.1.35 and the benchmarks built on it (forks that install the same ``agentdojo``
import package and registries) run their cells the same way: AgentDojo's own runner over
its stock LLM element, through the recording transport, with the plan's defence. A worker
package states its source's policy in a :class:`~agentprov_dojo.catalogue.SourceProfile`
and registers a :class:`~agentprov_dojo.source.DojoSource` under ``agentprov.worker``.

Runs inside a backend environment, beside ``agentprov_backend`` (installed there by
``agentprov backends build``); never imports ``agentprov_core``.
"""

__version__ = "0.1.0"
