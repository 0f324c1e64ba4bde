"""Imported once by the worker's forkserver, so that every forked cell starts warm."""

import agentdojo.agent_pipeline  # noqa: F401
import agentdojo.attacks.attack_registry  # noqa: F401
import agentdojo.benchmark  # noqa: F401
import agentdojo.task_suite.load_suites  # noqa: F401
import openai  # noqa: F401

import agentprov_backend.capture  # noqa: F401
import agentprov_backend.cells  # noqa: F401
import agentprov_backend.recording  # noqa: F401
