"""`chainrecall check`: the API contract of API.md as a test suite against any deployment.

The checks talk to a running service over HTTP only, as any client would, so
they run as well against our server on either backend as against someone
else's implementation of the same API. `run_checks(base_url)` answers a
`RunReport` with one `CheckResult` per check; `reporters` prints it for a
terminal or writes it as JSON or JUnit XML. A run writes only into threads of
its own (thread_key `chainrecall-check:<run>`); `CheckOptions(read_only=True,
thread=...)` writes nothing at all.
"""

from __future__ import annotations

from chainrecall.check.checks import CHECKS, Check
from chainrecall.check.rules import Rule
from chainrecall.check.runner import CheckResult, RunReport, reachable, run_checks
from chainrecall.check.session import DEFAULT_MAX_BODY_BYTES, CheckOptions, Exchange

__all__ = [
    "CHECKS",
    "DEFAULT_MAX_BODY_BYTES",
    "Check",
    "CheckOptions",
    "CheckResult",
    "Exchange",
    "Rule",
    "RunReport",
    "reachable",
    "run_checks",
]
