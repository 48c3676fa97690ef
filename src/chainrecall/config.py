"""Configuration: the only module that reads the environment.

Command-line flags win over environment variables, which win over defaults.
Secrets (webhook secrets, API keys) are read here and never logged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from chainrecall.errors import InvalidInput

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8077
DEFAULT_MAX_BODY_BYTES = 25 * 1024 * 1024


@dataclass(frozen=True)
class ServerConfig:
    db: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    github_secret: str | None = None
    slack_signing_secret: str | None = None
    workers: int = 1
    insecure: bool = False
    rate_limit: float = 100.0  # requests a second per API token, on average
    rate_burst: int = 200

    def with_overrides(self, **changes: Any) -> ServerConfig:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_env(self) -> dict[str, str]:
        """This configuration as environment variables, for worker processes."""
        env = {
            "CHAINRECALL_DB": self.db,
            "CHAINRECALL_MAX_BODY_BYTES": str(self.max_body_bytes),
            "CHAINRECALL_RATE_LIMIT": str(self.rate_limit),
            "CHAINRECALL_RATE_BURST": str(self.rate_burst),
        }
        if self.github_secret:
            env["CHAINRECALL_GITHUB_SECRET"] = self.github_secret
        if self.slack_signing_secret:
            env["CHAINRECALL_SLACK_SIGNING_SECRET"] = self.slack_signing_secret
        return env


def server_config_from_env(db: str | None = None) -> ServerConfig:
    env = os.environ
    return ServerConfig(
        db=db or env.get("CHAINRECALL_DB", "chainrecall.db"),
        host=env.get("CHAINRECALL_HOST", DEFAULT_HOST),
        port=int(env.get("CHAINRECALL_PORT", DEFAULT_PORT)),
        max_body_bytes=int(env.get("CHAINRECALL_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES)),
        github_secret=env.get("CHAINRECALL_GITHUB_SECRET") or None,
        slack_signing_secret=env.get("CHAINRECALL_SLACK_SIGNING_SECRET") or None,
        rate_limit=float(env.get("CHAINRECALL_RATE_LIMIT", 100.0)),
        rate_burst=int(env.get("CHAINRECALL_RATE_BURST", 200)),
    )


# -- the harness's model endpoint --------------------------------------------
# Provider variables tried after CHAINRECALL_API_KEY, in order; a DeepSeek URL
# prefers DEEPSEEK_API_KEY so that a shell with both keys set picks the right one.
API_KEY_VARIABLES = ("CHAINRECALL_API_KEY", "OPENAI_API_KEY", "DEEPSEEK_API_KEY")
DEFAULT_MODEL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ModelConfig:
    """Where the harness's chat model is and how to reach it (the key is never logged)."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = DEFAULT_MODEL_TIMEOUT_S
    stream: bool = False

    def __repr__(self) -> str:
        key = "set" if self.api_key else "none"
        return f"ModelConfig(base_url={self.base_url!r}, model={self.model!r}, api_key={key})"


def model_config_from_env(
    base_url: str | None,
    model: str | None,
    *,
    timeout_s: float | None = None,
    stream: bool = False,
) -> ModelConfig | None:
    """The model endpoint from flags, then CHAINRECALL_BASE_URL / CHAINRECALL_MODEL.

    None when no model is configured (the harness then runs without one).
    """
    env = os.environ
    base_url = base_url or env.get("CHAINRECALL_BASE_URL") or None
    model = model or env.get("CHAINRECALL_MODEL") or None
    if base_url is None and model is None:
        return None
    if base_url is None or model is None:
        missing = "--base-url (or CHAINRECALL_BASE_URL)" if base_url is None else "--model"
        raise InvalidInput(
            f"a model needs both --model and --base-url; {missing} is missing "
            "(e.g. --base-url https://api.deepseek.com --model deepseek-chat)"
        )
    names = list(API_KEY_VARIABLES)
    if "deepseek" in base_url:
        names = ["CHAINRECALL_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY"]
    api_key = next((env[name] for name in names if env.get(name)), None)
    timeout = timeout_s or float(env.get("CHAINRECALL_MODEL_TIMEOUT", DEFAULT_MODEL_TIMEOUT_S))
    return ModelConfig(base_url, model, api_key, timeout, stream)
