"""AutoDojo's fork, pinned at ``aa458794``: its place in the fetch cache.

The fork is not public, so no URL can fetch it: a user provides it from a copy with
``agentprov backends build autodojo --source-repo URL`` (a mirror, a path or a bundle),
which fetches the pinned commit into ``$AGENTPROV_HOME/fetch/autodojo.git`` and builds the
backend from it (``backends/autodojo``, :mod:`agentprov_core.backend.upstream`); the attack
cache check (:mod:`agentprov_core.run.attackcache`) reads it there too.

Tests verify and build against a fixture fork instead (:mod:`agentprov_core.testing.autodojo_fork`):
:data:`PIN_OVERRIDE` names its commit, read only by
:func:`agentprov_core.backend.upstream.override`: for the attack cache through
:func:`pinned`, for the build through the backend project's ``pin_override``, so both use
the same commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the plugin reads the constants; the fetch cache is loaded when used
    from agentprov_core.backend import fetchcache

#: the fork's commit: the backend is built from it and attack caches are verified against it
PINNED_COMMIT = "aa458794"
#: the fetch cache's name for the fork (``$AGENTPROV_HOME/fetch/autodojo.git``)
FORK = "autodojo"
#: the fork is not public: no URL ``--allow-network`` could fetch it from
UPSTREAM = ""
#: why (``BackendProject.unpublished``)
UNPUBLISHED = "the AutoDojo fork is not public"
#: tests only: the commit (full id) of a fixture fork to verify against instead
PIN_OVERRIDE = "AGENTPROV_TEST_AUTODOJO_PIN"


def pinned() -> tuple[str, bool]:
    """The commit caches are verified against, and whether it is the test override (read
    as the backend project's ``pin_override`` is: the build names its environment from the
    same commit)."""
    from agentprov_core.backend import upstream

    commit, overridden = upstream.override(PINNED_COMMIT, PIN_OVERRIDE)
    assert commit is not None
    return commit, overridden


def fork_pin() -> fetchcache.Pin:
    from agentprov_core.backend import fetchcache

    return fetchcache.Pin(name=FORK, upstream=UPSTREAM, commit=pinned()[0])
