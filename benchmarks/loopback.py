"""A `chainrecall serve` child process on a free loopback port, for benchmarks.

The benchmarks measure the product as a user meets it: the real server
command, a real socket, a real SQLite file. Every wait here has a deadline and
the child is always stopped, so a failed benchmark leaves no server behind.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

SRC = Path(__file__).resolve().parent.parent / "src"
START_DEADLINE_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LoopbackServer:
    """`python -m chainrecall serve --db DB` on 127.0.0.1, started on enter, stopped on exit."""

    def __init__(self, db: Path, log_path: Path | None = None) -> None:
        self.db = db
        self.log_path = log_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LoopbackServer:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [
            sys.executable, "-m", "chainrecall", "serve", "--db", str(self.db),
            "--port", str(self.port), "--log-level", "warning",
        ]  # fmt: skip
        sink = self.log_path.open("ab") if self.log_path else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(cmd, env=env, stdout=sink, stderr=sink)
        finally:
            if self.log_path and not isinstance(sink, int):
                sink.close()
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"chainrecall serve exited with {self.proc.returncode}; run it by hand "
                    f"(python -m chainrecall serve --db {self.db}) to see why"
                )
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"chainrecall serve did not answer within {START_DEADLINE_S} s")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
