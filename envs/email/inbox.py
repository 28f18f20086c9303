"""Inboxes as SQLite files with an FTS5 index: building, caching, searching, reading.

One file per inbox holds ``emails`` (+ the external-content FTS5 table ``emails_fts`` over
subject, body and sender, porter-stemmed), ``questions`` and ``meta``. Files are cached under
``$RANKGYM_CACHE/email/v<GENERATOR_VERSION>-<hash of the package source>/...`` (default
``~/.cache/rankgym``), so a new generator version (or any edit to any module of
``rankgym.envs.email``) is rebuilt automatically; each file is written to a temp name and
renamed into place atomically, so concurrent builders never see a half-written inbox. The same seed
gives a byte-identical file on the same SQLite version (inserts happen in a fixed order and
nothing time-dependent is stored).

Search semantics (what the agent's ``search_emails`` tool does):

* ``keywords`` are split into words; an email matches if it contains *all* of them (in the
  subject, body or sender; case-insensitive, stemmed: "invoices" finds "invoice"). If no email
  contains all of them, emails containing *any* are returned instead, each row marked
  ``"matched": "some"``.
* ``sender`` keeps emails whose sender name or address contains that text.
* ``after`` (inclusive) / ``before`` (exclusive) are ``YYYY-MM-DD`` dates.
* At most 10 results, best BM25 match first (subject weighted 3x body), newest first on ties.

What it does not do: no phrase or boolean query syntax is exposed (the agent's words are
quoted, so FTS operators in them are inert), no search over recipients, no attachments.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rankgym.envs.email.generator import generate_inbox, inbox_splits
from rankgym.envs.email.types import GENERATOR_VERSION, Corpus, Email, Inbox, Person, Question
from rankgym.model import cache_dir

MAX_RESULTS = 10
MAX_KEYWORDS = 12
"""Distinct search words used; later ones are ignored."""
_WORD_RE = re.compile(r"\w+")
SNIPPET_TOKENS = 16

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE emails (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    thread_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    sender_name TEXT NOT NULL,
    sender_email TEXT NOT NULL,
    recipients TEXT NOT NULL,
    cc TEXT NOT NULL,
    date TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    kind TEXT NOT NULL
);
CREATE INDEX emails_date ON emails(date);
CREATE VIRTUAL TABLE emails_fts USING fts5(
    subject, body, sender,
    content='emails', content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TABLE questions (
    id TEXT PRIMARY KEY,
    data TEXT NOT NULL
);
"""


def generator_files() -> list[Path]:
    """Every module and data file of ``rankgym.envs.email`` (``*.py``, and the ``*.toml`` data:
    ``facts.toml``, the words of the fact scenarios, and ``vocab.toml``, the word pools),
    sorted: what :data:`GENERATOR_KEY` hashes."""
    here = Path(__file__).parent
    return sorted(p for p in here.iterdir() if p.suffix in (".py", ".toml"))


def _fingerprint() -> str:
    """Hash of every file of ``generator_files()``: any edit invalidates cached inboxes.

    The whole package, not a list of generator modules, so a new or split module cannot be
    missed; editing the env or reward also rebuilds the cache (cheap, and never stale).
    """
    h = hashlib.sha256()
    for path in generator_files():
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:10]


GENERATOR_KEY = f"{GENERATOR_VERSION}-{_fingerprint()}"
"""Cache key of generated inboxes: the declared version plus a hash of the generator source."""

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}( \d{2}:\d{2})?$")


def cache_root() -> Path:
    """``$RANKGYM_CACHE/email`` (default ``~/.cache/rankgym/email``)."""
    return cache_dir() / "email"


def write_inbox_db(path: str | Path, inbox: Inbox, meta: dict[str, Any] | None = None) -> Path:
    """Write ``inbox`` to a fresh SQLite file at ``path`` (atomically: temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.executescript(_SCHEMA)
        info = {
            "generator_version": GENERATOR_KEY,
            "inbox_id": inbox.id,
            "split": inbox.split,
            "owner_name": inbox.owner.name,
            "owner_email": inbox.owner.email,
            "today": inbox.today,
            "n_emails": str(len(inbox.emails)),
            **{k: str(v) for k, v in (meta or {}).items()},
        }
        con.executemany("INSERT INTO meta VALUES (?, ?)", sorted(info.items()))
        con.executemany(
            "INSERT INTO emails (id, thread_id, sender, sender_name, sender_email, recipients, cc,"
            " date, subject, body, kind) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            [
                (e.id, e.thread_id, e.sender, e.sender_name, e.sender_email, json.dumps(list(e.to)),
                 json.dumps(list(e.cc)), e.date, e.subject, e.body, e.kind)
                for e in inbox.emails
            ],
        )  # fmt: skip
        con.execute("INSERT INTO emails_fts(emails_fts) VALUES ('rebuild')")
        con.execute("INSERT INTO emails_fts(emails_fts) VALUES ('optimize')")
        con.executemany(
            "INSERT INTO questions VALUES (?, ?)",
            [(q.id, json.dumps(q.__dict__, sort_keys=True)) for q in inbox.questions],
        )
        con.commit()
    finally:
        con.close()
    os.replace(tmp, path)
    return path


def _read_meta(path: Path) -> dict[str, str] | None:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return dict(con.execute("SELECT key, value FROM meta").fetchall())
        finally:
            con.close()
    except sqlite3.Error:
        return None


def corpus_dir(corpus: Corpus, root: Path | None = None) -> Path:
    """Cache folder of one synthetic corpus configuration."""
    root = root or cache_root()
    c = corpus
    return root / f"v{GENERATOR_KEY}" / f"seed{c.seed}-n{c.n_emails}-f{c.facts_per_scenario}"


def ensure_synthetic(*, root: Path | None = None, **corpus: int) -> list[Path]:
    """Paths of the inbox files of ``Corpus(**corpus)`` under ``root`` (default: the cache),
    generating and writing any missing or stale one. TypeError for an unknown corpus field."""
    c = Corpus(**corpus)
    splits = inbox_splits(c.n_inboxes, c.n_test)
    folder = corpus_dir(c, root)
    paths = []
    for i, split in enumerate(splits):
        path = folder / f"inbox{i}-{split}.sqlite"
        meta = _read_meta(path) if path.exists() else None
        if meta is None or meta.get("generator_version") != GENERATOR_KEY:
            inbox = generate_inbox(c.seed, i, c.n_emails, split, c.facts_per_scenario)
            write_inbox_db(path, inbox, {"seed": c.seed, "source": "synthetic"})
        paths.append(path)
    return paths


@dataclass(frozen=True)
class EmailQuery:
    """One ``search_emails`` call as the agent made it: the keywords and the optional filters
    (``sender``: part of a name or address; ``after``/``before``: ``YYYY-MM-DD``). Not checked
    here: :meth:`InboxDB.search_emails` rejects bad values with a message for the agent."""

    keywords: str | list[str]
    sender: str | None = None
    after: str | None = None
    before: str | None = None


class InboxDB:
    """Read-only access to one inbox file (thread-safe; one connection per instance)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no inbox file at {self.path}")
        self._con = sqlite3.connect(
            f"file:{self.path}?mode=ro&immutable=1", uri=True, check_same_thread=False
        )
        self._con.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        self.meta: dict[str, str] = {k: v for k, v in self._q("SELECT key, value FROM meta")}
        self.id = self.meta["inbox_id"]
        self.owner = Person(self.meta["owner_name"], self.meta["owner_email"])
        self.today = self.meta["today"]

    def _q(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._con.execute(sql, tuple(params)).fetchall()

    def close(self) -> None:
        self._con.close()

    def __len__(self) -> int:
        return self._q("SELECT count(*) FROM emails")[0][0]

    # -------------------------------------------------------------- tools
    def search_emails(self, query: EmailQuery, limit: int = MAX_RESULTS) -> list[dict[str, str]]:
        """Emails matching the query: id, sender, date, subject, snippet, matched.

        Raises ``ValueError`` with a message meant for the agent on bad input.
        """
        sender, after, before = query.sender, query.after, query.before
        words = _search_words(query.keywords)
        where, params = [], []
        if sender:
            where.append("e.sender LIKE ?")
            params.append(f"%{sender.strip()}%")
        for name, value, op in (("after", after, ">="), ("before", before, "<")):
            if value:
                value = str(value).strip().replace("T", " ")
                if not _DATE_RE.match(value):
                    raise ValueError(f"{name} must be a date like 2024-03-01, got {value!r}")
                where.append(f"e.date {op} ?")
                params.append(value)
        limit = max(1, min(int(limit), MAX_RESULTS))
        if not words:
            if not where:
                raise ValueError("give at least one keyword (or a sender/after/before filter)")
            rows = self._q(
                "SELECT e.id, e.sender, e.date, e.subject, substr(e.body, 1, 120) AS snippet FROM emails e"
                f" WHERE {' AND '.join(where)} ORDER BY e.date DESC, e.id LIMIT ?",
                [*params, limit],
            )
            return [{**dict(r), "matched": "all"} for r in rows]
        filt = "".join(f" AND {w}" for w in where)
        join = " JOIN emails e ON e.rowid = emails_fts.rowid" if where else ""
        # Rank first (cheap), then build snippets for the winners only: computing snippet()
        # in the ranking query would run it for every match before the sort.
        rank_sql = (
            f"SELECT emails_fts.rowid FROM emails_fts{join} WHERE emails_fts MATCH ?{filt}"
            " ORDER BY bm25(emails_fts, 3.0, 1.0, 1.0), emails_fts.rowid DESC LIMIT ?"
        )
        quoted = [f'"{w}"' for w in words]
        match, matched = " ".join(quoted), "all"
        rowids = [r[0] for r in self._q(rank_sql, [match, *params, limit])]
        if not rowids and len(words) > 1:
            match, matched = " OR ".join(quoted), "some"
            rowids = [r[0] for r in self._q(rank_sql, [match, *params, limit])]
        if not rowids:
            return []
        marks = ",".join("?" * len(rowids))
        rows = self._q(
            "SELECT emails_fts.rowid AS rid, e.id, e.sender, e.date, e.subject,"
            f" snippet(emails_fts, 1, '[', ']', ' ... ', {SNIPPET_TOKENS}) AS snippet"
            " FROM emails_fts JOIN emails e ON e.rowid = emails_fts.rowid"
            f" WHERE emails_fts MATCH ? AND emails_fts.rowid IN ({marks})",
            [match, *rowids],
        )
        order = {rid: k for k, rid in enumerate(rowids)}
        rows = sorted(rows, key=lambda r: order[r["rid"]])
        return [
            {k: r[k] for k in ("id", "sender", "date", "subject", "snippet")} | {"matched": matched}
            for r in rows
        ]

    def read_email(self, message_id: str) -> Email | None:
        """The email with this id, or None."""
        rows = self._q("SELECT * FROM emails WHERE id = ?", [str(message_id).strip()])
        return _row_email(rows[0]) if rows else None

    # -------------------------------------------------------------- data access
    def emails(self) -> list[Email]:
        """Every email, in date order."""
        return [_row_email(r) for r in self._q("SELECT * FROM emails ORDER BY rowid")]

    def questions(self) -> list[Question]:
        """Every question about this inbox."""
        out = []
        for (data,) in self._q("SELECT data FROM questions ORDER BY id"):
            d = json.loads(data)
            for k in ("aliases", "key_terms", "keywords", "distractor_ids"):
                d[k] = tuple(d[k])
            out.append(Question(**d))
        return out


def _search_words(keywords: Any) -> list[str]:
    """The first ``MAX_KEYWORDS`` distinct lower-case words of the keywords, in order.

    Linear in the length of the input (a dict keeps the order; the scan stops once enough
    words are found), so a 100,000-word query costs no more than reading it.
    """
    if isinstance(keywords, str) or not isinstance(keywords, list | tuple):
        keywords = [keywords] if keywords else []
    words: dict[str, None] = {}
    for k in keywords:
        for m in _WORD_RE.finditer(str(k).lower()):
            words.setdefault(m.group(), None)
            if len(words) == MAX_KEYWORDS:
                return list(words)
    return list(words)


def _row_email(r: sqlite3.Row) -> Email:
    return Email(
        id=r["id"], thread_id=r["thread_id"], sender_name=r["sender_name"], sender_email=r["sender_email"],
        to=tuple(json.loads(r["recipients"])), cc=tuple(json.loads(r["cc"])), date=r["date"],
        subject=r["subject"], body=r["body"], kind=r["kind"],
    )  # fmt: skip
