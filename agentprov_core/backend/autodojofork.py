"""AutoDojo's fork, pinned at ``aa458794``: its place in the fetch cache.

The fork is not public, so no URL can fetch it: a user provides it from a copy with
``agentprov backends build autodojo --source-repo URL`` (a mirror, a path or a bundle),
which fetches the pinned commit into ``$AGENTPROV_HOME/fetch/autodojo.git``; the attack
cache check (:mod:`agentprov_core.run.attackcache`) then reads it there.

Tests verify and build against a fixture fork instead (:mod:`agentprov_core.testing.autodojo_fork`):
:data:`PIN_OVERRIDE` names its commit, read only by
:func:`agentprov_core.backend.upstream.override`: for the attack cache through
:func:`pinned`, for the build through the backend project's ``pin_override``, so both use
the same commit.
"""

from __future__ import annotations

from agentprov_core.backend import fetchcache
from agentprov_core.errors import AgentprovError

#: the fork's commit the attack caches are verified against
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
    return fetchcache.Pin(name=FORK, upstream=UPSTREAM, commit=pinned()[0])


def refuse_uncached_build(backend: str, *, source_repo: str | None,
                          allow_network: bool) -> None:
    """``backends build autodojo`` needs the fork's pinned commit in the fetch cache:
    fetched from ``--source-repo``, else ``cli.environment.source_not_cached`` (exit 3);
    the fork is not public, so no upstream can be fetched from."""
    if backend != FORK:
        return
    from agentprov_core.backend import upstream

    pin = fork_pin()
    if source_repo is None:
        repo = fetchcache.repo_path(FORK)
        if (repo / "HEAD").is_file() and fetchcache.resolve(repo, pin.commit) is not None:
            return
        raise AgentprovError("cli.environment.source_not_cached", name=FORK,
                             commit=pin.commit, path=repo,
                             upstream=upstream.not_public(UNPUBLISHED))
    fetchcache.ensure(pin, source_repo=source_repo, allow_network=allow_network)


