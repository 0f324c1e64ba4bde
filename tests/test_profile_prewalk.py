"""The bwrap profile's walk of the read-only trees for ``.env`` files can start in the
background before the worker's start (``profile.prewalk``): the worker's argv then masks the
same files, and each tree is walked once."""

from __future__ import annotations

from agentprov_core.backend.sandbox import profile


def test_a_prewalk_is_what_the_worker_start_uses(tmp_path, monkeypatch):
    prefix = tmp_path / "py"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "lib" / ".env").parent.mkdir(parents=True)
    (prefix / "lib" / ".env").write_text("A=1")
    env = tmp_path / "env"
    (env / "lib" / "pkg").mkdir(parents=True)
    (env / "pyvenv.cfg").write_text(f"home = {prefix / 'bin'}\n")
    (env / "lib" / "pkg" / ".env.local").write_text("B=2")
    staging, home, tmp = (tmp_path / n for n in ("staging", "home", "tmp"))
    for d in (staging, home, tmp):
        d.mkdir()
    walked: list[str] = []
    real = profile._walk_dotenv

    def counting(root: str) -> list[str]:
        walked.append(root)
        return real(root)

    monkeypatch.setattr(profile, "_walk_dotenv", counting)
    monkeypatch.setattr(profile, "_prewalks", {})
    monkeypatch.setattr(profile, "_prewalked", {})
    profile._dotenv_in_tree.cache_clear()
    try:
        profile.prewalk(env)
        argv = profile.realise(["python"], env_dir=env, staging=staging, home=home, tmp=tmp,
                               routes={}, bwrap="bwrap")
    finally:
        profile._dotenv_in_tree.cache_clear()
    profile.close_fds(argv)
    masked = {argv[i + 2] for i, a in enumerate(argv)
              if a == "--ro-bind" and argv[i + 1] == "/dev/null"
              and not argv[i + 2].startswith("/proc/")}  # the kernel's files, masked too
    assert masked == {str(prefix / "lib" / ".env"), str(env / "lib" / "pkg" / ".env.local")}
    assert sorted(w for w in walked if w in (str(env), str(prefix))) == sorted(
        [str(env), str(prefix)])  # each read-only tree once
