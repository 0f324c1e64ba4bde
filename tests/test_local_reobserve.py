"""A14's re-observation before every cell (R-11.15) is cheap and still sees every change:
one HTTP transport (one TLS context, kept-alive connections) for all observations of a
process, while each observation asks the server again."""

from __future__ import annotations

import pytest

from tests.test_local_models import Ep, FakeServer, llamacpp_routes


@pytest.mark.req("R-11.15")
def test_reobservations_share_one_transport_and_still_see_a_change(tmp_path, monkeypatch):
    import httpx

    from agentprov_core.live.local import identity as li

    monkeypatch.setenv("AGENTPROV_HOME", str(tmp_path / "home"))
    made: list[object] = []
    real_init = httpx.HTTPTransport.__init__

    def counting_init(self, *a, **k):
        made.append(self)
        real_init(self, *a, **k)

    monkeypatch.setattr(httpx.HTTPTransport, "__init__", counting_init)
    li._shared_transport.cache_clear()
    routes = llamacpp_routes(tmp_path)
    server = FakeServer(routes)
    try:
        ep = Ep("llamacpp", "llamacpp", server.base_url)
        ident = li.observe(ep, "m")
        for _ in range(3):
            same, changed, seen = li.reobserve(ident, ep)
            assert same and not changed and seen.digest == ident.digest
        asked = len(server.requests)
        routes[("GET", "/props")]["build_info"] = "b6001-other"  # another build, same port
        same, changed, _ = li.reobserve(ident, ep)
        assert not same and "server.version: b6000-abcdef0 -> b6001-other" in changed
        assert len(server.requests) > asked  # asked again, not answered from a cache
        assert len(made) == 1  # one transport for the five observations
    finally:
        server.close()
        li._shared_transport.cache_clear()


def test_the_observation_client_does_not_import_httpxs_command_line_client():
    """httpx imports its CLI (rich's console, pygments) when click and rich are installed;
    T0 blocks that one import, and httpx works without it."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from agentprov_core.live.local import identity\n"
            "t = identity._shared_transport()\n"
            "import httpx\n"
            "assert isinstance(httpx.Client(transport=t), httpx.Client)\n"
            "print(sorted(m for m in ('pygments', 'rich.console', 'httpx._main')"
            " if sys.modules.get(m) is not None))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_plain_http_server_builds_no_tls_context_and_https_still_verifies(tmp_path,
                                                                             monkeypatch):
    """The shared transport builds its TLS context at the first https request only; an
    https server whose certificate the trust store does not hold is refused, as before."""
    import ssl

    import trustme

    from agentprov_core.errors import AgentprovError
    from agentprov_core.live.local import identity as li

    monkeypatch.setenv("AGENTPROV_HOME", str(tmp_path / "home"))
    li._shared_transport.cache_clear()
    plain = FakeServer(llamacpp_routes(tmp_path))
    tls = FakeServer(llamacpp_routes(tmp_path))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    trustme.CA().issue_cert("127.0.0.1").configure_cert(ctx)
    tls.httpd.socket = ctx.wrap_socket(tls.httpd.socket, server_side=True)
    try:
        li.observe(Ep("llamacpp", "llamacpp", plain.base_url), "m")
        shared = li._shared_transport()
        assert shared._plain is not None and shared._tls is None
        with pytest.raises(AgentprovError) as e:
            li.served(Ep("llamacpp", "llamacpp", tls.base_url.replace("http:", "https:")))
        assert e.value.code == "run.local.unreachable"
        assert "CERTIFICATE_VERIFY_FAILED" in e.value.message or "certificate" in \
            e.value.message.lower()
        assert shared._tls is not None
    finally:
        plain.close()
        tls.close()
        li._shared_transport.cache_clear()
