"""Imported once by the worker's forkserver, so that every forked cell starts warm.

Besides the benchmark, what the SDK imports lazily at a cell's first model call:
``client.chat.completions``, httpx2's transport (``httpcore2``, ``h11``) and ``truststore``
(the client's SSL context). Left to the cell, every forked process imports these 62 modules
again: about 75 ms a cell from the environment's bytecode, 0.25 s compiling from source
(``benchmarks/bench_campaign.py`` checks that a forked cell imports nothing more).

It also builds the client's TLS context once (``recording.warm_tls_context``): reading the
trust store costs about 40 ms, which every forked cell would otherwise pay again.
"""

import time

_t0 = time.time()

import agentdojo.agent_pipeline  # noqa: F401, E402
import agentdojo.attacks.attack_registry  # noqa: F401, E402
import agentdojo.benchmark  # noqa: F401, E402
import agentdojo.task_suite.load_suites  # noqa: F401, E402
import h11  # noqa: F401, E402
import httpcore2  # noqa: F401, E402
import openai  # noqa: F401, E402
import openai.resources.chat.chat  # noqa: F401, E402
import openai.resources.chat.completions.completions  # noqa: F401, E402
import truststore  # noqa: F401, E402

import agentprov_backend.capture  # noqa: F401, E402
import agentprov_backend.cells  # noqa: F401, E402
import agentprov_backend.recording  # noqa: F401, E402

agentprov_backend.recording.warm_tls_context()

from agentprov_backend import timing  # noqa: E402

timing.emit("forkserver.preload", _t0)
