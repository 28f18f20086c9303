"""Data types of the synthetic email corpus: ``Person``, ``Email``, ``Question``, ``Inbox``.

Import path: ``rankgym.envs.email.types``. Also the calendar constants every part of the
generator shares (``START``, ``N_DAYS``, ``MONTHS``, ``WEEKDAYS``, ``QTYPES``) and
``GENERATOR_VERSION``. Plain frozen dataclasses; nothing here draws random numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

GENERATOR_VERSION = 1

START = datetime(2024, 1, 8)
"""First day of every synthetic inbox (a Monday)."""
N_DAYS = 200
"""Inboxes span ``START`` .. ``START + N_DAYS`` days (late July 2024)."""

MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

QTYPES = ("who", "when", "what", "how much", "where")


@dataclass(frozen=True)
class Person:
    """A mail correspondent."""

    name: str
    email: str
    org: str | None = None
    title: str | None = None

    @property
    def first(self) -> str:
        return self.name.split(" ")[0]

    @property
    def address(self) -> str:
        return f"{self.name} <{self.email}>"


@dataclass(frozen=True)
class Email:
    """One email as stored in the inbox. ``date`` is ISO ``YYYY-MM-DD HH:MM`` (inbox local time)."""

    id: str
    thread_id: str
    sender_name: str
    sender_email: str
    to: tuple[str, ...]
    cc: tuple[str, ...]
    date: str
    subject: str
    body: str
    kind: str
    """thread | personal | fact | distractor | newsletter | notification | promotion | agentdojo"""

    @property
    def sender(self) -> str:
        return (
            f"{self.sender_name} <{self.sender_email}>" if self.sender_name else self.sender_email
        )

    def content(self) -> str:
        """Subject and body: where an email *states* something (headers excluded)."""
        return f"{self.subject}\n\n{self.body}"

    def as_text(self) -> str:
        """The email as ``read_email`` shows it: headers, blank line, body."""
        lines = [f"Message-ID: {self.id}", f"From: {self.sender}", f"To: {', '.join(self.to)}"]
        if self.cc:
            lines.append(f"Cc: {', '.join(self.cc)}")
        lines += [f"Date: {self.date}", f"Subject: {self.subject}", "", self.body]
        return "\n".join(lines)


@dataclass(frozen=True)
class Question:
    """A question about one inbox, answerable from the single email ``source_id``.

    ``answer_kind`` tells the reward how to compare: ``amount`` (money), ``date``,
    ``datetime``, ``code`` (punctuation-insensitive), ``text`` (normalised phrase; names,
    places). ``aliases`` are other accepted surface forms. ``key_terms`` appear verbatim in
    the question; only the source contains all of them together with the answer.
    ``keywords`` are what the oracle searches for; ``distractor_ids`` are near-duplicates of
    the source (same sender, similar subject, different facts).
    """

    id: str
    inbox_id: str
    split: str
    qtype: str
    scenario: str
    question: str
    answer: str
    answer_kind: str
    aliases: tuple[str, ...]
    source_id: str
    sender_email: str
    key_terms: tuple[str, ...]
    keywords: tuple[str, ...]
    distractor_ids: tuple[str, ...]


@dataclass(frozen=True)
class Corpus:
    """Which synthetic corpus: the generator's inputs. The defaults are the built-in env's corpus."""

    seed: int = 0
    n_inboxes: int = 6
    n_emails: int = 2000
    """Emails per inbox, at least (more when the facts and their distractors need more)."""
    n_test: int = 2
    """The last ``n_test`` inboxes are the test split; the others the train split."""
    facts_per_scenario: int = 5
    """Questions each of the 16 scenarios adds to an inbox, at most."""


@dataclass
class Inbox:
    """One generated inbox: owner, emails sorted by date, and its questions."""

    id: str
    split: str
    owner: Person
    today: str
    emails: list[Email]
    questions: list[Question]
