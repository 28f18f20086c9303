"""``rankgym/EmailSearch-v0``: answer a question about someone's inbox by searching it.

Each task is one question about one inbox. The agent has three tools:

* ``search_emails(keywords, sender=None, after=None, before=None)``: up to 10 emails (id,
  sender, date, subject, snippet), every keyword required (see ``inbox.py`` for the exact
  semantics, including the any-keyword fallback);
* ``read_email(message_id)``: one whole email;
* ``answer(text, sources)``: the final answer and the ids of the emails it comes from; ends
  the episode.

A reply without a tool call also ends the episode; its text is taken as the answer and any
message ids written in it as the sources. The turn limit is 10 assistant turns by default.

Data (see docs/email.md): a synthetic corpus (default: seed 0, 6 inboxes of 2,000+ emails,
inboxes 0-3 ``train``, 4-5 ``test``) and the AgentDojo workspace inbox with 10 checkable
questions, served in the ``test`` split and alone as split ``agentdojo``
(``agentdojo=False`` leaves it out). Inboxes are built once and cached as SQLite files under
``$RANKGYM_CACHE/email``.

Reward: ``reward.score_episode`` (1.0 correct answer with its source; 0.75 without; partial
credit 0.1 + 0.1 for having found / read the source; half of that for a wrong answer).
Success (``success_threshold``) is 1.0. Hack signals: ``answer_stuffing``,
``source_stuffing``, ``unsupported_correct_answer`` (right answer, source never seen).

What it does not do: no sending, deleting or labelling mail; no attachments; questions have
one fact each (no multi-hop questions), and dates are never relative ("last Tuesday").
"""

from __future__ import annotations

import re
import threading
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from rankgym.envs.base import Env, EpisodeState, Task
from rankgym.envs.email import agentdojo_source
from rankgym.envs.email.inbox import EmailQuery, InboxDB, cache_root, ensure_synthetic
from rankgym.envs.email.reward import (
    AnswerPart,
    LLMAnswerChecker,
    RewardBreakdown,
    score_episode,
)
from rankgym.envs.email.types import Corpus, Question
from rankgym.envs.judge_split import JUDGE_SPLIT, carve
from rankgym.envs.toolcalls import assistant_call, protocol_prompt
from rankgym.envs.tools import tool

__all__ = ["EmailSearchEnv", "EmailTask", "answer_parts"]

SYSTEM_PROMPT = """You are an email research assistant for {owner} <{email}>. Today is {today}.
Answer the user's question by searching their inbox with the tools:
- search_emails(keywords, sender, after, before): up to 10 emails that contain all the keywords, with id, date, sender, subject and a snippet. Use a few specific words from the question.
- read_email(message_id): the full email with that id.
- answer(text, sources): your final answer and the ids of the emails it comes from. This ends the conversation.
Keep the answer short: just the fact asked for. If you cannot find it, answer "I don't know". You have at most {max_turns} turns."""

# Per-process memos: the rollout driver makes one env per episode, so making an env must be
# cheap after the first. Inbox files never change once written (new versions get new paths).
_DB_LOCK = threading.RLock()
_DBS: dict[str, InboxDB] = {}
_PATHS: dict[tuple, list[Path]] = {}
_TASKS: dict[tuple[Any, ...], list[EmailTask]] = {}


def _paths(corpus: Corpus, agentdojo: bool) -> list[Path]:
    """Inbox files of a corpus (built on first use; memoised per cache root)."""
    key = (corpus, agentdojo, str(cache_root()))
    with _DB_LOCK:
        if key not in _PATHS:
            paths = ensure_synthetic(**asdict(corpus))
            if agentdojo:
                extra = agentdojo_source.ensure_agentdojo()
                paths = paths + ([extra] if extra is not None else [])
            _PATHS[key] = paths
        return list(_PATHS[key])


def _open(path: Any) -> InboxDB:
    """One shared read-only ``InboxDB`` per file and process."""
    key = str(path)
    with _DB_LOCK:
        if key not in _DBS:
            _DBS[key] = InboxDB(path)
        return _DBS[key]


class EmailTask(Task):
    """A question about one inbox, with its reference answer and source email."""

    question: str
    inbox_id: str
    source_id: str
    answer_kind: str
    aliases: list[str] = []
    qtype: str = ""
    scenario: str = ""
    keywords: list[str] = []
    sender_email: str = ""
    distractor_ids: list[str] = []
    source: str = "synthetic"


_FROM_QUESTION = tuple(
    f.name
    for f in fields(Question)
    if f.name in EmailTask.model_fields and f.name not in Task.model_fields
)
"""The question's fields a task carries as they are (the tuples become lists)."""


def answer_parts(task: EmailTask | Question) -> tuple[AnswerPart, ...]:
    """What a correct answer must state (one part, or several joined by ``+`` / `` / ``)."""
    if "+" in task.answer_kind:
        kinds, refs = task.answer_kind.split("+"), str(task.answer).split(" / ")
        return tuple(AnswerPart(k, r) for k, r in zip(kinds, refs, strict=True))
    return (AnswerPart(task.answer_kind, str(task.answer), tuple(task.aliases)),)


def _call(i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return assistant_call(name, args, f"oracle_{i}")


class EmailSearchEnv(Env[EmailTask]):
    """ART-E-like email search (see the module docstring)."""

    env_id = "rankgym/EmailSearch-v0"
    max_turns = 10
    success_threshold = 1.0
    splits = ("train", "test", "agentdojo", JUDGE_SPLIT)
    strict_splits = True  # a train env never resets to a test task by id (issue 26)

    def __init__(
        self,
        split: str = "train",
        max_turns: int | None = None,
        seed: int = 0,
        n_inboxes: int = 6,
        n_emails: int = 2000,
        n_test: int = 2,
        facts_per_scenario: int = 5,
        agentdojo: bool = True,
        answer_checker: str | None = None,
        judge_split: bool = True,
    ) -> None:
        """Build (or load from cache) the inboxes.

        Args:
            split: Default split for ``reset``: ``train``, ``test`` or ``agentdojo``.
            max_turns: Assistant turns before truncation (default 10).
            seed, n_inboxes, n_emails, n_test, facts_per_scenario: The synthetic corpus
                (see ``generator.generate_corpus``); ``n_emails`` is per inbox.
            agentdojo: Serve the AgentDojo workspace questions (in ``test`` and ``agentdojo``).
            answer_checker: A LiteLLM model string to double-check free-form answers that fail
                the deterministic check (off by default; see ``reward.LLMAnswerChecker``).
            judge_split: Carve the judge split out of train (False: ``train`` is every task).
        """
        super().__init__(split=split, max_turns=max_turns)
        self.judge_split = judge_split
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; choose from {self.splits}")
        self.corpus = Corpus(seed, n_inboxes, n_emails, n_test, facts_per_scenario)
        self._prefix = (
            "" if self.corpus == Corpus() else f"s{seed}n{n_emails}f{facts_per_scenario}-"
        )
        self.inboxes: dict[str, InboxDB] = {}
        for path in _paths(self.corpus, agentdojo):
            db = _open(path)
            self.inboxes[db.id] = db
        self.agentdojo = "agentdojo" in self.inboxes
        self.checker = LLMAnswerChecker(answer_checker) if answer_checker else None
        self.tools = (self.search_emails, self.read_email, self.answer)

    # ---- tasks --------------------------------------------------------------------------

    def tasks(self, split: str = "train") -> list[EmailTask]:
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; choose from {self.splits}")
        key = (
            self._prefix,
            tuple(str(db.path) for db in self.inboxes.values()),
            split,
            self.judge_split,
        )
        with _DB_LOCK:
            if key not in _TASKS:
                if split in ("train", JUDGE_SPLIT):  # the judge split is carved from train
                    _TASKS[key] = carve(self._build_tasks("train"), split, self.judge_split)
                else:
                    _TASKS[key] = self._build_tasks(split)
            return list(_TASKS[key])

    def _build_tasks(self, split: str) -> list[EmailTask]:
        out: list[EmailTask] = []
        for db in self.inboxes.values():
            source = db.meta.get("source", "synthetic")
            in_split = (source == "agentdojo" and split in ("test", "agentdojo")) or (
                source != "agentdojo" and db.meta["split"] == split
            )
            if not in_split:
                continue
            for q in db.questions():
                out.append(
                    EmailTask(
                        id=(self._prefix if source != "agentdojo" else "") + q.id,
                        prompt=q.question,
                        answer=q.answer,
                        split=split,
                        metadata={"inbox_owner": db.owner.name, "today": db.today},
                        source=source,
                        **{name: getattr(q, name) for name in _FROM_QUESTION},
                    )
                )
        return out

    def initial_messages(
        self, task: EmailTask, tool_schemas: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        assert isinstance(task, EmailTask)
        db = self.inboxes[task.inbox_id]
        system = SYSTEM_PROMPT.format(
            owner=db.owner.name, email=db.owner.email, today=db.today, max_turns=self.max_turns
        )
        if self.text_protocol_in_prompt and tool_schemas:
            system = system + "\n\n" + protocol_prompt(tool_schemas)
        return [{"role": "system", "content": system}, {"role": "user", "content": task.prompt}]

    # ---- tools (bound to the current episode) --------------------------------------------

    def _db(self) -> InboxDB:
        task = self.state.task
        assert isinstance(task, EmailTask)
        return self.inboxes[task.inbox_id]

    def search_emails(
        self,
        keywords: str | list[str],
        sender: str | None = None,
        after: str | None = None,
        before: str | None = None,
    ) -> str:
        """Search the inbox; returns up to 10 emails (id, date, sender, subject, snippet).

        Args:
            keywords: Words that must all appear in the email (subject, body or sender), e.g. "invoice March cleaning".
            sender: Only emails whose sender name or address contains this text.
            after: Only emails sent on or after this date (YYYY-MM-DD).
            before: Only emails sent before this date (YYYY-MM-DD).
        """
        rows = self._db().search_emails(EmailQuery(keywords, sender, after, before))
        scratch = self.state.scratch
        found = scratch.setdefault("found", [])
        for r in rows:
            if r["id"] not in found:
                found.append(r["id"])
        if not rows:
            return "No emails found. Try fewer or different keywords."
        head = f"{len(rows)} emails, best match first:"
        if rows[0]["matched"] == "some":
            head = f"No email contains all the keywords. {len(rows)} emails with some of them:"
        lines = [head]
        for i, r in enumerate(rows, 1):
            snippet = " ".join(r["snippet"].split())
            lines.append(
                f"{i}. id: {r['id']} | date: {r['date']} | from: {r['sender']}\n"
                f"   subject: {r['subject']}\n   snippet: {snippet}"
            )
        return "\n".join(lines)

    def read_email(self, message_id: str) -> str:
        """Read one email in full.

        Args:
            message_id: The email's id, as shown by search_emails (e.g. "inbox0-00042").
        """
        email = self._db().read_email(_clean_id(message_id))
        if email is None:
            raise ValueError(f"no email with id {message_id!r}; use an id from search_emails")
        read = self.state.scratch.setdefault("read", [])
        if email.id not in read:
            read.append(email.id)
        return email.as_text()

    @tool(terminal=True)
    def answer(self, text: str, sources: list[str] | str | None = None) -> str:
        """Give the final answer and end the conversation.

        Args:
            text: The answer, short (just the fact asked for), or "I don't know".
            sources: Ids of the emails the answer comes from, e.g. ["inbox0-00042"].
        """
        return "Answer recorded."

    # ---- reward -------------------------------------------------------------------------

    def breakdown(
        self, task: EmailTask, answer: Any, state: EpisodeState[EmailTask]
    ) -> RewardBreakdown:
        """The reward and its parts for a finished episode (``verify`` returns ``.reward``)."""
        assert isinstance(task, EmailTask)
        text: str | None
        if isinstance(answer, dict):
            text = None if answer.get("text") is None else str(answer.get("text"))
            sources = _sources(answer.get("sources"))
        elif isinstance(answer, str):
            text = answer
            sources = re.findall(r"(?:inbox\d+|agentdojo)-\d+", answer)
        else:
            text, sources = None, []
        return score_episode(
            question=task.question,
            parts=answer_parts(task),
            source_id=task.source_id,
            answer=text,
            sources=sources,
            found_ids=state.scratch.get("found", []),
            read_ids=state.scratch.get("read", []),
            checker=self.checker,
        )

    def verify(self, task: EmailTask, answer: Any, state: EpisodeState[EmailTask]) -> float:
        bd = self.breakdown(task, answer, state)
        state.scratch["reward"] = bd.to_dict()
        return bd.reward

    def hack_signals_for(self, task: EmailTask, state: EpisodeState[EmailTask]) -> list[str]:
        return list(state.scratch.get("reward", {}).get("hack_signals", []))

    def oracle(self, task: EmailTask) -> list[dict[str, Any]]:
        """Search with the question's keywords, read the source email, answer citing it."""
        assert isinstance(task, EmailTask)
        return [
            _call(0, "search_emails", {"keywords": " ".join(task.keywords)}),
            _call(1, "read_email", {"message_id": task.source_id}),
            _call(2, "answer", {"text": str(task.answer), "sources": [task.source_id]}),
        ]


def _clean_id(s: Any) -> str:
    return str(s).strip().strip("[]<>\"'`. ")


def _sources(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = re.split(r"[,\s]+", value)
    return [_clean_id(v) for v in value if _clean_id(v)]
