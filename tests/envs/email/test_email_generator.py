"""Synthetic inboxes: determinism, realism features, one-email answers, distractors."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rankgym.envs.email.generator import QTYPES, Email, Question, generate_corpus
from rankgym.envs.email.inbox import EmailQuery, InboxDB, ensure_synthetic, write_inbox_db
from rankgym.envs.email.reward import contains_value, extract_amounts, normalize_text

SMALL = {"seed": 3, "n_inboxes": 3, "n_emails": 300, "n_test": 1, "facts_per_scenario": 2}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _answer_holders(
    q: Question, emails: list[Email], lowered: list[str] | None = None
) -> list[str]:
    """Ids of emails that mention all the question's key terms and state its answer."""
    lowered = lowered or [e.as_text().lower() for e in emails]
    terms = [t.lower() for t in q.key_terms]
    return [
        e.id
        for e, text in zip(emails, lowered, strict=True)
        if all(t in text for t in terms)
        and contains_value(e.content(), q.answer, q.answer_kind, q.aliases)
    ]


@pytest.fixture(scope="module")
def default_dbs() -> list[InboxDB]:
    """The full-size default corpus (6 x 2,000+ emails), from the shared test cache."""
    return [InboxDB(p) for p in ensure_synthetic()]


def test_two_builds_from_the_same_seed_are_byte_identical_even_across_processes(tmp_path):
    a = ensure_synthetic(**SMALL, root=tmp_path / "a")
    script = (
        "import sys; from pathlib import Path; from rankgym.envs.email.inbox import ensure_synthetic;"
        f"ensure_synthetic(**{SMALL!r}, root=Path(sys.argv[1]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "b")], check=True, env=env)
    b = [tmp_path / "b" / p.relative_to(tmp_path / "a") for p in a]
    assert [_sha(p) for p in a] == [_sha(p) for p in b]
    other = ensure_synthetic(**{**SMALL, "seed": 4}, root=tmp_path / "c")
    assert _sha(a[0]) != _sha(other[0])


def test_full_size_default_build_is_deterministic(tmp_path, default_dbs):
    rebuilt = ensure_synthetic(root=tmp_path)
    assert [_sha(p) for p in rebuilt] == [_sha(db.path) for db in default_dbs]


def test_cache_is_reused_and_rebuilt_when_the_generator_key_changes(tmp_path, monkeypatch):
    from rankgym.envs.email import inbox as inbox_mod

    paths = ensure_synthetic(**SMALL, root=tmp_path)
    mtime = paths[0].stat().st_mtime_ns
    assert ensure_synthetic(**SMALL, root=tmp_path)[0].stat().st_mtime_ns == mtime  # reused
    monkeypatch.setattr(inbox_mod, "GENERATOR_KEY", "999-test")
    new = inbox_mod.ensure_synthetic(**SMALL, root=tmp_path)
    assert new[0] != paths[0] and "v999-test" in str(new[0])
    assert InboxDB(new[0]).meta["generator_version"] == "999-test"
    # a stale file at the current path (old version in its meta) is rebuilt in place
    stale = {"source": "synthetic", "generator_version": "0-old"}
    write_inbox_db(new[1], generate_corpus(**SMALL)[1], stale)
    assert InboxDB(new[1]).meta["generator_version"] != "999-test"
    inbox_mod.ensure_synthetic(**SMALL, root=tmp_path)
    assert InboxDB(new[1]).meta["generator_version"] == "999-test"
    assert not list(tmp_path.rglob("*.tmp"))  # temp files were renamed away


def test_default_corpus_has_the_promised_shape(default_dbs):
    assert len(default_dbs) >= 5
    splits = Counter(db.meta["split"] for db in default_dbs)
    assert splits["train"] >= 3 and splits["test"] >= 1
    owners = {db.owner.email for db in default_dbs}
    assert len(owners) == len(default_dbs)  # different people per inbox
    qtypes: Counter[str] = Counter()
    for db in default_dbs:
        emails = db.emails()
        assert len(emails) >= 2000
        kinds = Counter(e.kind for e in emails)
        for kind in ("thread", "personal", "fact", "distractor", "newsletter", "notification"):
            assert kinds[kind] >= 20, (db.id, kind)
        assert sum(e.subject.startswith("Re: ") for e in emails) >= 200
        assert sum(e.subject.startswith("Fwd: ") for e in emails) >= 10
        assert sum("wrote:\n> " in e.body for e in emails) >= 200  # quoted replies
        assert len({e.sender_email for e in emails}) >= 50
        months = {e.date[:7] for e in emails}
        assert len(months) >= 6  # dates over months
        assert len({e.thread_id for e in emails}) < len(emails)  # real threads
        qs = db.questions()
        assert len(qs) >= 60
        assert {q.split for q in qs} == {db.meta["split"]}
        qtypes.update(q.qtype for q in qs)
    assert set(qtypes) == set(QTYPES) and min(qtypes.values()) >= 50


def test_every_question_is_answered_by_exactly_one_email(default_dbs):
    n = 0
    for db in default_dbs:
        emails = db.emails()
        lowered = [e.as_text().lower() for e in emails]
        for q in db.questions():
            for term in q.key_terms:  # the key terms really are in the question
                assert term.lower() in q.question.lower()
            assert _answer_holders(q, emails, lowered) == [q.source_id], q
            n += 1
    assert n >= 400


def test_amount_and_code_answers_are_unique_in_the_whole_inbox(default_dbs):
    n = 0
    for db in default_dbs[:2]:
        emails = db.emails()
        amounts = [{v for v, _ in extract_amounts(e.content())} for e in emails]
        squashed = [re.sub(r"[^a-z0-9]", "", e.content().lower()) for e in emails]
        for q in db.questions():
            if q.answer_kind == "amount":
                ref = extract_amounts(q.answer)[0][0]
                holders = [e.id for e, vals in zip(emails, amounts, strict=True) if ref in vals]
            elif q.answer_kind == "code":
                code = re.sub(r"[^a-z0-9]", "", q.answer.lower())
                holders = [
                    e.id
                    for e, sq in zip(emails, squashed, strict=True)
                    if code in sq and contains_value(e.content(), q.answer, "code")
                ]
            else:
                continue
            assert holders == [q.source_id], q
            n += 1
    assert n >= 40


def test_questions_have_near_duplicate_distractors(default_dbs):
    for db in default_dbs[:3]:
        by_id = {e.id: e for e in db.emails()}
        for q in db.questions():
            assert q.distractor_ids, q
            src = by_id[q.source_id]
            for d in q.distractor_ids:
                e = by_id[d]
                assert e.sender_email == src.sender_email
                a = set(normalize_text(e.subject.removeprefix("Re: ")).split())
                b = set(normalize_text(src.subject.removeprefix("Re: ")).split())
                assert len(a & b) >= 2, (e.subject, src.subject)  # similar subject
                assert not contains_value(e.content(), q.answer, q.answer_kind, q.aliases)


def test_question_keywords_find_the_source_email(default_dbs):
    for db in default_dbs:
        for q in db.questions():
            ids = [r["id"] for r in db.search_emails(EmailQuery(" ".join(q.keywords)))]
            assert q.source_id in ids, q


def test_small_builds_keep_the_guarantees(tmp_path):
    for path in ensure_synthetic(**SMALL, root=tmp_path):
        db = InboxDB(path)
        emails = db.emails()
        assert len(emails) >= 300
        for q in db.questions():
            assert _answer_holders(q, emails) == [q.source_id]
