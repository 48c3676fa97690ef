"""E-mail over real HTTP: raw RFC 5322 messages threaded by References / In-Reply-To."""

from __future__ import annotations

from collections.abc import Iterator
from email.message import EmailMessage
from email.policy import SMTP

import httpx
import pytest

from chainrecall.service import Memory
from chainrecall.store import Store
from tests.ingest_support import (
    OWN_FIXTURES,
    assert_problem,
    ingest_client,
    shared_ingest_server,
    trigger_count,
)

RFC822 = {"Content-Type": "message/rfc822"}


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, httpx.Client]]:
    with shared_ingest_server(tmp_path_factory.mktemp("email") / "memory.db") as running:
        yield running


def mail(
    message_id: str,
    subject: str,
    body: str,
    *,
    sender: str = "Alice Nguyen <alice@example.com>",
    in_reply_to: str | None = None,
    references: list[str] | None = None,
    attachment: tuple[str, bytes] | None = None,
) -> bytes:
    """A message as a mail server would hand it over: CRLF line ends, MIME encoded."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = "payments-team@example.com"
    message["Subject"] = subject
    message["Date"] = "Tue, 03 Nov 2026 10:12:44 +0100"
    message["Message-ID"] = f"<{message_id}>"
    if in_reply_to:
        message["In-Reply-To"] = f"<{in_reply_to}>"
    if references:
        message["References"] = " ".join(f"<{r}>" for r in references)
    message.set_content(body)
    if attachment:
        name, data = attachment
        message.add_attachment(data, maintype="text", subtype="plain", filename=name)
    return message.as_bytes(policy=SMTP)


def test_a_reply_chain_of_four_lands_on_one_thread_each_citing_its_parent(store: Store) -> None:
    memory = Memory(store)
    log = b"ZEBRAQUOKKA timeout after 30s in payments/client.py\n" * 50
    chain = [
        mail("root@mail.example", "Staging deploy failing", "The health check times out."),
        mail(
            "r1@mail.example", "Re: Staging deploy failing", "Is it the retry budget?",
            sender="Bob <bob@example.com>", in_reply_to="root@mail.example",
            references=["root@mail.example"],
        ),
        mail(
            "r2@mail.example", "Re: Staging deploy failing", "Yes, log attached.",
            in_reply_to="r1@mail.example", references=["root@mail.example", "r1@mail.example"],
            attachment=("deploy.log", log),
        ),
        # some clients send In-Reply-To alone: the parent's thread is found by its id
        mail(
            "r3@mail.example", "Re: Staging deploy failing", "Rolled back.",
            sender="Bob <bob@example.com>", in_reply_to="r2@mail.example",
        ),
    ]  # fmt: skip
    other = mail("else@mail.example", "Lunch", "Pho at noon?")
    with ingest_client(store) as client:
        records = []
        for raw in chain:
            response = client.post("/ingest/email", content=raw, headers=RFC822)
            assert response.status_code == 201, response.text
            records.append(response.json())
        unrelated = client.post("/ingest/email", content=other, headers=RFC822).json()
        again = client.post("/ingest/email", content=chain[2], headers=RFC822)
        stored = client.get(f"/triggers/{records[2]['id']}/payload")
    thread_ids = {r["thread_id"] for r in records}
    assert len(thread_ids) == 1
    assert memory.get_thread(records[0]["thread_id"]).key == "email:root@mail.example"
    assert memory.get_thread(records[0]["thread_id"]).title == "Staging deploy failing"
    assert [r["in_reply_to"] for r in records] == [None] + [r["id"] for r in records[:-1]]
    assert unrelated["thread_id"] not in thread_ids
    # a redelivery of the same Message-ID is the same record
    assert again.status_code == 200 and again.json()["id"] == records[2]["id"]
    # the message, attachment and all, is kept byte for byte; the summary only counts it
    assert stored.content == chain[2]
    assert stored.headers["content-type"].startswith("message/rfc822")
    assert records[2]["summary"] == (
        "E-mail from Alice Nguyen <alice@example.com>: Re: Staging deploy failing (1 attachment)"
    )
    assert "ZEBRAQUOKKA" not in records[2]["summary"]
    assert records[2]["payload"]["bytes"] == len(chain[2])
    assert records[0]["occurred_at"] == "2026-11-03T09:12:44Z"
    assert records[1]["author"] == "Bob <bob@example.com>"
    # the text body is searchable, the attachment's content is not inlined into the index
    assert records[1]["id"] in [h.id for h in memory.search("retry budget").items]
    assert memory.search("ZEBRAQUOKKA").items == []


def test_a_reply_that_arrives_before_its_root_still_joins_the_roots_thread(store: Store) -> None:
    with ingest_client(store) as client:
        reply = client.post(
            "/ingest/email",
            content=mail(
                "late-r1@x", "Re: Outage", "me too", in_reply_to="late-root@x",
                references=["late-root@x"],
            ),
            headers=RFC822,
        ).json()  # fmt: skip
        root = client.post(
            "/ingest/email", content=mail("late-root@x", "Outage", "api down"), headers=RFC822
        ).json()
    assert root["thread_id"] == reply["thread_id"]


def test_the_own_fixture_message_with_a_pdf_attachment_is_accepted(store: Store) -> None:
    raw = (OWN_FIXTURES / "email" / "with-attachment.eml").read_bytes()
    with ingest_client(store) as client:
        response = client.post("/ingest/email", content=raw, headers=RFC822)
        assert response.status_code == 201, response.text
        stored = client.get(f"/triggers/{response.json()['id']}/payload").content
    assert stored == raw
    assert response.json()["summary"] == (
        "E-mail from Chi Tran <chi@example.org>: Invoice 2026-114 (1 attachment)"
    )


@pytest.mark.parametrize(
    "body",
    [b"", b"   \r\n", b"just some words, no headers at all", b"Subject: hi\r\n\r\nno sender"],
    ids=["empty", "blank", "no-headers", "no-from"],
)
def test_malformed_e_mail_answers_400_and_stores_nothing(
    hooks: tuple[Store, httpx.Client], body: bytes
) -> None:
    store, client = hooks
    before = trigger_count(store)
    assert_problem(client.post("/ingest/email", content=body, headers=RFC822), 400)
    assert trigger_count(store) == before


def test_e_mail_sent_as_json_is_415_and_stores_nothing(hooks: tuple[Store, httpx.Client]) -> None:
    store, client = hooks
    before = trigger_count(store)
    response = client.post("/ingest/email", json={"from": "a@b", "subject": "hi"})
    problem = assert_problem(response, 415)
    assert "message/rfc822" in problem["detail"]
    assert trigger_count(store) == before
