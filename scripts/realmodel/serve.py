"""Start llama.cpp's `llama-server` on loopback, wait until it is healthy, stop it cleanly.

From Python (the binary and the model default to the cached ones of llama_server.py and
model.py, built or assembled on first use):

    from serve import LlamaServer
    with LlamaServer(port=8080) as srv:
        print(srv.base_url)          # http://127.0.0.1:8080/v1
        ...                          # the server is stopped on exit, whatever happened

From the command line:

    python scripts/realmodel/serve.py                 # serve until Ctrl-C
    python scripts/realmodel/serve.py --check         # start, wait for /health, print /props, stop
    python scripts/realmodel/serve.py --port 8081 --model PATH.gguf --binary PATH

The server is started as

    llama-server -m MODEL --alias ID --host 127.0.0.1 --port PORT --jinja -c 16384 -n 512 -np 1 \
                 --no-webui -t N --seed 1129 [--chat-template-file TEMPLATE]

`--jinja` (this build's default, given explicitly) renders the GGUF's own chat template
through llama.cpp's tool-call handling, which turns the `tools` of an OpenAI-style request
into the prompt and a reply into `tool_calls` when the template supports tools (the template
this model package ships is a 208-character ChatML one whose /props `chat_template_caps`
say `supports_tools: false`: the model gets no tool schemas and answers in text; with
`--tool-template` the server renders this repository's templates/gemma3-tools.jinja instead,
Gemma's turn format with the tools, one call per turn, see llama_server.tool_template());
`--alias` fixes the id `/v1/models` lists; one slot of a 16k context (`parallel=N` serves
N slots, `-np N`, in continuous batching) (AgentDojo's banking
prompts with the tool schemas run to several thousand tokens); at most 512 generated tokens
per request unless the request says otherwise (`-n`: AgentDojo's element sends no
`max_tokens`, and when this base model answers in text it rarely stops at an end marker, so
an uncapped completion runs until the context is full; a tool-call reply ends at its call,
after 150 to 200 tokens of which the model's echo of its instructions is most). Variables `LLAMA_ARG_*`,
which llama-server reads as defaults for its flags, are removed from its environment so the
command line is the whole configuration. Its log goes to
`$AGENTPROV_HOME/cache/llama-server/logs/serve-<port>.log`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_server  # noqa: E402
import model as model_pkg  # noqa: E402

HOST = "127.0.0.1"
DEFAULT_PORT = 8080  # the port of registry/endpoints.toml's `llamacpp` base_url
DEFAULT_CTX = 16384
# the server's default cap on generated tokens per request: AgentDojo's OpenAI-style element
# sends no max_tokens, and a text reply of this base model rarely stops on an end marker, so
# without a cap one completion runs until the context is full (minutes on 2 cores); a
# tool-call reply ends at its call, and 256 cut some calls short
DEFAULT_N_PREDICT = 512
# the sampling seed of every request that names none (AgentDojo's element names none): with
# one slot, the same request gets the same reply, so a run can be repeated; the identity
# record holds it (server_identity.generation_defaults.seed)
DEFAULT_SEED = 1129


def log(msg: str) -> None:
    print(f"[serve] {msg}", file=sys.stderr, flush=True)


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    try:
        with opener.open(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


class LlamaServer:
    def __init__(self, binary: str | Path | None = None, model: str | Path | None = None,
                 port: int = DEFAULT_PORT, alias: str = model_pkg.MODEL_ID,
                 ctx_size: int = DEFAULT_CTX, n_predict: int = DEFAULT_N_PREDICT,
                 seed: int = DEFAULT_SEED,
                 chat_template_file: str | Path | None = None, threads: int | None = None,
                 startup_timeout: float = 180.0, extra_args: list[str] | None = None,
                 log_path: str | Path | None = None, parallel: int = 1):
        self.binary = Path(binary) if binary else None
        self.model = Path(model) if model else None
        self.port = port
        self.alias = alias
        self.ctx_size = ctx_size
        self.n_predict = n_predict
        self.seed = seed
        self.chat_template_file = Path(chat_template_file) if chat_template_file else None
        self.threads = threads or os.cpu_count() or 2
        self.startup_timeout = startup_timeout
        self.extra_args = list(extra_args or [])
        # slots (-np): requests decoded at once, in continuous batching (llama-server's
        # default); each slot has ctx_size / parallel of the context, so a caller that wants
        # a full context a slot passes ctx_size x parallel (tune.py does)
        self.parallel = parallel
        self.log_path = Path(log_path) if log_path else (
            llama_server.agentprov_home() / "cache" / "llama-server" / "logs" / f"serve-{port}.log")
        self.proc: subprocess.Popen | None = None
        self.start_seconds: float | None = None

    @property
    def root_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def command(self) -> list[str]:
        return [str(self.binary), "-m", str(self.model), "--alias", self.alias,
                "--host", HOST, "--port", str(self.port), "--jinja",
                "-c", str(self.ctx_size), "-n", str(self.n_predict), "-np", str(self.parallel), "--no-webui",
                "-t", str(self.threads), "--seed", str(self.seed),
                *(["--chat-template-file", str(self.chat_template_file)]
                  if self.chat_template_file else []),
                *self.extra_args]

    def start(self) -> LlamaServer:
        if self.binary is None:
            self.binary = llama_server.ensure()
        if self.model is None:
            self.model = model_pkg.ensure()
        if port_in_use(self.port):
            raise RuntimeError(f"{HOST}:{self.port} is already in use: stop that server or "
                               "choose another --port")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
        cmd = self.command()
        log(" ".join(cmd))
        t0 = time.monotonic()
        with open(self.log_path, "wb") as logf:
            # its own session: a Ctrl-C at the terminal reaches us, and we stop it in order
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf,
                                         stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        try:
            self._wait_healthy(t0)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        log(f"healthy after {self.start_seconds:.1f} s: {self.base_url} (pid {self.proc.pid}, "
            f"log {self.log_path})")
        return self

    def _wait_healthy(self, t0: float) -> None:
        last = None
        while time.monotonic() - t0 < self.startup_timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode} before it "
                                   f"was healthy; the end of its log:\n{self.log_tail()}")
            try:
                status, body = _get(f"{self.root_url}/health", timeout=1.0)
                last = (status, body[:200])
                if status == 200:
                    return
            except OSError as e:  # not listening yet
                last = repr(e)
            time.sleep(0.25)
        raise TimeoutError(f"llama-server was not healthy within {self.startup_timeout:.0f} s "
                           f"(last answer {last}); the end of its log:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def props(self) -> dict:
        status, body = _get(f"{self.root_url}/props")
        if status != 200:
            raise RuntimeError(f"GET /props answered {status}")
        return json.loads(body)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (llama-server shuts down its slots and exits), then SIGKILL after timeout."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"llama-server (pid {proc.pid}) did not stop within {timeout:.0f} s: SIGKILL")
            proc.kill()
            rc = proc.wait()
        log(f"stopped (exit {rc})")
        return rc

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=int(os.environ.get("REALMODEL_PORT", DEFAULT_PORT)))
    ap.add_argument("--binary", help="llama-server [the cached build of llama_server.py]")
    ap.add_argument("--model", help="the .gguf [the assembled model of model.py]")
    ap.add_argument("--ctx-size", type=int, default=DEFAULT_CTX)
    ap.add_argument("--n-predict", type=int, default=DEFAULT_N_PREDICT)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--tool-template", action="store_true",
                    help="serve with the tool-rendering template of llama_server.tool_template() "
                         "instead of the GGUF's own")
    ap.add_argument("--parallel", type=int, default=1,
                    help="slots (-np N), each of --ctx-size: the context is --ctx-size x N")
    ap.add_argument("--check", action="store_true",
                    help="start, wait for /health, print a summary of /props, stop")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server on SIGTERM too
    srv = LlamaServer(binary=args.binary, model=args.model, port=args.port,
                      ctx_size=args.ctx_size * args.parallel, n_predict=args.n_predict,
                      seed=args.seed, parallel=args.parallel,
                      chat_template_file=llama_server.tool_template() if args.tool_template
                      else None)
    with srv:
        if args.check:
            p = srv.props()
            print(json.dumps({
                "base_url": srv.base_url,
                "start_seconds": round(srv.start_seconds, 1),
                "build_info": p.get("build_info"),
                "model_path": p.get("model_path"),
                "model_alias": p.get("model_alias"),
                "total_slots": p.get("total_slots"),
                "n_ctx": (p.get("default_generation_settings") or {}).get("n_ctx"),
                "chat_template_chars": len(p.get("chat_template") or ""),
            }, indent=1))
            return 0
        print(srv.base_url, flush=True)
        try:
            while srv.proc is not None and srv.proc.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        if srv.proc is not None and srv.proc.poll() is not None:
            log(f"llama-server exited by itself with {srv.proc.returncode}:\n{srv.log_tail()}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
