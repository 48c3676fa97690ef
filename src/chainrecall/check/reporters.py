"""The reports of a check run: a readable terminal report (Rich), JSON, and JUnit XML for CI.

All three show the same facts: each check with its outcome, and for a failure
the rule of API.md it broke, the request the checker made and the answer it
received.
"""

from __future__ import annotations

import json
import secrets
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from chainrecall.check.runner import CheckResult, RunReport, reachable, run_checks
from chainrecall.check.session import CheckOptions

_MARKS = {"pass": ("PASS", "green"), "fail": ("FAIL", "bold red"), "skip": ("SKIP", "yellow")}


def failure_text(result: CheckResult) -> str:
    """The plain-text account of a failure: what broke, the rule, the request, the answer."""
    lines = [result.message, "", f"rule: {result.rule}"]
    exchange = result.exchange
    if exchange is not None:
        lines += ["", f"request: {exchange.request_line()}"]
        if exchange.request_body is not None:
            lines.append(f"  body: {exchange.request_body}")
        lines.append(f"answer: {exchange.answer_line()}")
        if exchange.location:
            lines.append(f"  Location: {exchange.location}")
        if exchange.response_body is not None:
            lines.append(f"  body: {exchange.response_body}")
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)


def print_header(console: Console, base_url: str, read_only: bool, thread_key: str | None) -> None:
    console.print(f"[bold]chainrecall check[/bold] {escape(base_url)}")
    if read_only:
        console.print("read-only: nothing will be written")
    elif thread_key:
        console.print(
            f"writes only into threads of its own: thread_key {escape(thread_key)} "
            f"(and {escape(thread_key)}:other)"
        )


def print_result(console: Console, result: CheckResult) -> None:
    mark, style = _MARKS[result.outcome]
    line = Text()
    line.append(f"{mark} ", style=style)
    line.append(result.name, style="bold")
    line.append(f"  {result.title}", style="dim")
    if result.outcome == "skip":
        line.append(f"  ({result.message})", style="yellow")
    console.print(line)
    if result.outcome == "fail":
        console.print(
            Panel(Text(failure_text(result)), title=result.name, border_style="red", expand=True)
        )
    elif result.notes:
        for note in result.notes:
            console.print(Text(f"     note: {note}", style="dim"))


def print_summary(console: Console, report: RunReport) -> None:
    style = "bold green" if report.passed else "bold red"
    console.print(
        f"[{style}]{report.count('pass')} passed, {report.count('fail')} failed, "
        f"{report.count('skip')} skipped[/{style}] in {report.seconds:.1f} s, "
        f"{report.requests} requests"
        + (f" ({report.rate_limited} rate-limited, retried)" if report.rate_limited else "")
    )
    console.print(escape(report.writes_note()))


def write_json(report: RunReport, path: Path) -> None:
    path.write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")


def junit_tree(report: RunReport) -> ET.ElementTree[ET.Element]:
    """The run as JUnit XML: one testsuite, one testcase per check."""
    suites = ET.Element("testsuites", name="chainrecall check")
    suite = ET.SubElement(
        suites, "testsuite",
        name=f"chainrecall check {report.base_url}",
        tests=str(len(report.results)),
        failures=str(report.count("fail")),
        errors="0",
        skipped=str(report.count("skip")),
        time=f"{report.seconds:.3f}",
    )  # fmt: skip
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="base_url", value=report.base_url)
    ET.SubElement(properties, "property", name="writes", value=report.writes_note())
    for result in report.results:
        group = result.name.split(".", 1)[0]
        case = ET.SubElement(
            suite, "testcase", classname=f"chainrecall.check.{group}", name=result.name,
            time=f"{result.seconds:.3f}",
        )  # fmt: skip
        if result.outcome == "fail":
            failure = ET.SubElement(
                case, "failure", message=result.message[:500], type="ContractViolation"
            )
            failure.text = failure_text(result)
        elif result.outcome == "skip":
            ET.SubElement(case, "skipped", message=result.message)
        if result.notes:
            ET.SubElement(case, "system-out").text = "\n".join(result.notes)
    ET.indent(suites)
    return ET.ElementTree(suites)


def write_junit(report: RunReport, path: Path) -> None:
    junit_tree(report).write(path, encoding="utf-8", xml_declaration=True)


def run_and_report(
    base_url: str,
    options: CheckOptions,
    *,
    token: str | None = None,
    timeout_s: float = 30.0,
    json_path: Path | None = None,
    junit_path: Path | None = None,
    console: Console | None = None,
) -> int:
    """What `chainrecall check` does: run, print as it goes, write the files; the exit status.

    0 when every check passed, 1 when one failed, 2 when the deployment could not
    be reached at all (then no check ran).
    """
    console = console or Console()
    error_console = Console(stderr=True)
    run_id = secrets.token_hex(4)
    print_header(console, base_url, options.read_only, f"chainrecall-check:{run_id}")
    unreachable = reachable(base_url, token, timeout_s)
    if unreachable is not None:
        error_console.print(
            f"[red]cannot reach {escape(base_url)}: {escape(unreachable)}[/red]; "
            "check the URL and that the server is running"
        )
        return 2
    if options.read_only and not options.thread:
        console.print(
            "no --thread given: only the checks that need no record of the deployment run"
        )
    report = run_checks(
        base_url, options, token=token, timeout_s=timeout_s, run_id=run_id,
        on_result=lambda result: print_result(console, result),
    )  # fmt: skip
    print_summary(console, report)
    if json_path is not None:
        write_json(report, json_path)
    if junit_path is not None:
        write_junit(report, junit_path)
    return 0 if report.passed else 1
