"""Thread pass-through, measured: Router calls and bytes (and tokens) with it on and off.

Rerun:  python -m benchmarks.passthrough
        python -m benchmarks.passthrough --model deepseek-chat --base-url https://api.deepseek.com

Replays the demo week's triggers (`chainrecall.demo`) through the Router and
Workers twice, into scratch databases. Without a model it uses the offline
`ReplayPolicy` (a fixed rule, no token counts); with --model and --base-url the
provider's usage block gives prompt and cache-hit tokens too (this costs money:
about 2 x 330 triggers of requests).
"""

from __future__ import annotations

import argparse

from chainrecall.config import model_config_from_env
from chainrecall.harness.client import ChatClient, ChatModel
from chainrecall.harness.passthrough import ReplayPolicy, format_comparison, measure_pass_through


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model")
    parser.add_argument("--base-url")
    args = parser.parse_args()
    config = model_config_from_env(args.base_url, args.model)

    def factory() -> ChatModel:
        return ReplayPolicy() if config is None else ChatClient(config)

    on, off = measure_pass_through(model_factory=factory)
    print(f"model: {'offline ReplayPolicy' if config is None else config.model}")
    print(format_comparison(on, off))


if __name__ == "__main__":
    main()
