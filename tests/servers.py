"""Real HTTP servers on loopback ports for the tests: in a thread, or as a process.

The thread server is quick to start and shares the test's store; the process
server is the `chainrecall serve` command itself, for restarts and kills.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

import httpx
import uvicorn

SRC = str(Path(__file__).resolve().parent.parent / "src")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ThreadServer:
    """uvicorn serving an ASGI app in a background thread on a free loopback port."""

    def __init__(self, app: Any, lifespan: Literal["on", "off"] = "on") -> None:
        # The app's lifespan runs: the MCP endpoint at /mcp starts its session manager there.
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan=lifespan
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ThreadServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start within 15 s")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a `python -m chainrecall` child that imports this checkout's code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env


class ProcessServer:
    """`python -m chainrecall serve` as a child process."""

    def __init__(
        self,
        db: str,
        *args: str,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        log_level: str = "warning",
    ) -> None:
        self.db = db
        self.args = args
        self.env = env
        self.log_path = log_path
        self.log_level = log_level
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ProcessServer:
        cmd = [
            sys.executable, "-m", "chainrecall", "serve", "--db", self.db,
            "--port", str(self.port), "--log-level", self.log_level, *self.args,
        ]  # fmt: skip
        sink = self.log_path.open("ab") if self.log_path is not None else None
        try:
            self.proc = subprocess.Popen(cmd, env=cli_env(self.env), stdout=sink, stderr=sink)
        finally:
            if sink is not None:
                sink.close()
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chainrecall serve exited with {self.proc.returncode}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("chainrecall serve did not answer within 30 s")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush; what was acknowledged must already be on disk."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)

    def __enter__(self) -> ProcessServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
