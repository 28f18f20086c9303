"""Deterministic synthetic inboxes with questions answerable from exactly one email.

``generate_corpus(seed)`` builds ``n_inboxes`` inboxes (default 6 x 2,000+ emails), each
belonging to one invented person at an invented company, spanning January-July 2024:

* work threads with replies (quoting the previous message) and forwards, personal threads,
* newsletters, notifications (code review, calendar, bank, sign-in alerts, HR, shipping) and
  promotions as noise,
* *facts*: emails that carry the answer to one question (who / when / what / how much /
  where), each with 1-3 *near-duplicate distractors* from the same sender with a similar
  subject and different facts (another month's invoice, the original time of a moved meeting,
  the return flight, another team's offsite...).

Every question names *key terms* (they appear verbatim in the question) such that exactly one
email in the inbox contains all key terms together with the reference answer; the tests check
this over every generated question. Fact emails are never quoted or forwarded by later emails,
which is what keeps the answer in one place. Amounts and codes are unique within an inbox.

Determinism: only ``random.Random`` seeded from ``(seed, inbox index)`` is used, no set or
hash-order iteration, no clock; the same seed gives the same inboxes in any process. Bump
``GENERATOR_VERSION`` whenever the output changes (with a hash of the whole
``rankgym.envs.email`` package source it keys the SQLite cache).

Limits, frankly: the text is template-based. It is varied enough that keyword search needs
the right terms and distractors punish sloppy reading, but a reader will spot the templates,
and the facts are cleaner than real mail (one fact per email, no contradictions across threads,
no attachments). Train/test split is by inbox: the test inboxes have other owners, colleagues
and facts, but the same templates.

Where the parts live (all under ``rankgym.envs.email``): ``types`` (the data types),
``templates`` (formatting and noise text), ``builder`` (the cast and primitives),
``scenarios`` (the 16 fact scenarios), ``noise`` (everything else); this module assembles an
inbox from them and re-exports the data types.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from rankgym.envs.email import noise
from rankgym.envs.email.builder import Builder
from rankgym.envs.email.scenarios import SCENARIOS
from rankgym.envs.email.types import (
    GENERATOR_VERSION,
    MONTHS,
    N_DAYS,
    QTYPES,
    START,
    WEEKDAYS,
    Corpus,
    Email,
    Inbox,
    Person,
    Question,
)

__all__ = [
    "GENERATOR_VERSION", "MONTHS", "N_DAYS", "QTYPES", "START", "WEEKDAYS",
    "Corpus", "Email", "Inbox", "Person", "Question",
    "build", "generate_corpus", "generate_inbox", "inbox_splits",
]  # fmt: skip


def build(b: Builder) -> Inbox:
    """Run every scenario, then noise until ``b.n_emails``; assign ids in date order."""
    rng = b.rng
    for scenario in SCENARIOS:
        made, tries = 0, 0
        while made < b.facts_per_scenario and tries < 40:
            tries += 1
            made += bool(scenario(b))
    noise.newsletters(b)
    while len(b.drafts) < b.n_emails:
        r = rng.random()
        if r < 0.4:
            noise.thread(b)
        elif r < 0.82:
            noise.notification(b)
        elif r < 0.92:
            noise.personal(b)
        else:
            noise.promotion(b)
    b.drafts.sort(key=lambda d: (d.when, d.seq))
    ids = {d.seq: f"{b.inbox_id}-{k:05d}" for k, d in enumerate(b.drafts)}
    threads: dict[int, str] = {}
    emails = []
    for d in b.drafts:
        tid = threads.setdefault(d.thread, f"{b.inbox_id}-t{len(threads):04d}")
        emails.append(Email(
            id=ids[d.seq], thread_id=tid, sender_name=d.sender.name, sender_email=d.sender.email,
            to=tuple(p.address for p in d.to), cc=tuple(p.address for p in d.cc),
            date=f"{d.when:%Y-%m-%d %H:%M}", subject=d.subject, body=d.body, kind=d.kind,
        ))  # fmt: skip
    questions = [
        replace(q.question, id=f"{b.inbox_id}-q{k:03d}", source_id=ids[q.source.seq],
                distractor_ids=tuple(ids[d.seq] for d in q.distractors))
        for k, q in enumerate(b.questions)
    ]  # fmt: skip
    last = max(d.when for d in b.drafts)
    today = (last + timedelta(days=1)).strftime("%Y-%m-%d")
    return Inbox(b.inbox_id, b.split, b.owner, today, emails, questions)


def generate_inbox(
    seed: int, index: int, n_emails: int = 2000, split: str = "train", facts_per_scenario: int = 5
) -> Inbox:
    """One inbox. Deterministic in ``(seed, index, n_emails, facts_per_scenario)``.

    ``n_emails`` is a minimum: the inbox gets at least that many emails (more if the facts and
    their distractors alone exceed it). ``split`` is only recorded on the questions.
    """
    return build(Builder(seed, index, n_emails, split, facts_per_scenario))


def inbox_splits(n_inboxes: int = 6, n_test: int = 2) -> list[str]:
    """Split of each inbox index: the last ``n_test`` inboxes are the test split."""
    if not 0 < n_test < n_inboxes:
        raise ValueError(f"n_test must be between 1 and n_inboxes-1, got {n_test} of {n_inboxes}")
    return ["train"] * (n_inboxes - n_test) + ["test"] * n_test


def generate_corpus(**corpus: int) -> list[Inbox]:
    """All inboxes of ``Corpus(**corpus)`` (TypeError for an unknown field); train/test split by
    inbox (see ``inbox_splits``)."""
    c = Corpus(**corpus)
    splits = inbox_splits(c.n_inboxes, c.n_test)
    return [
        generate_inbox(c.seed, i, c.n_emails, splits[i], c.facts_per_scenario)
        for i in range(c.n_inboxes)
    ]
