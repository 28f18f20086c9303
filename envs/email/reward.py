"""Verifiable reward for email search: answer correctness, source correctness, partial credit.

In the spirit of ART-E's hand-written reward, mapped to [0, 1]:

============================================  =======================================
outcome                                       reward
============================================  =======================================
correct answer, source cited                  1.0  (``CORRECT_WITH_SOURCE``; success)
correct answer, source missing or wrong       0.75 (``CORRECT_WITHOUT_SOURCE``)
no answer / "I don't know" / turn limit       0.1 if the source email ever appeared in a
                                              search result + 0.1 if it was read (max 0.2)
wrong answer                                  half of that partial credit (max 0.1): being
                                              wrong is worse than saying you don't know
============================================  =======================================

"Source cited" means the source message id is in ``sources`` and at most ``MAX_SOURCES`` ids
were given (citing the whole inbox earns nothing). An answer is checked deterministically by
kind: ``amount`` (money, any currency sign or thousands separator), ``date`` / ``datetime`` /
``time`` (month names, abbreviations, ordinals, ISO, 12/24-hour clocks; a missing year is
accepted, a wrong one is not), ``code`` (case and punctuation ignored), ``text`` (normalised
phrase containment: case, accents, punctuation and articles ignored). Answers that list more
than two candidate values of the asked kind, or run past ``MAX_ANSWER_WORDS`` words, are
not credited and raise the ``answer_stuffing`` hack signal.

``LLMAnswerChecker`` optionally asks a LiteLLM model whether a free-form (``text``) answer
that failed the deterministic check is nevertheless equivalent to the reference. It is off by
default; when on, it can only turn a failed ``text`` check into a pass, never the reverse.

What this does not do: it does not judge answer quality beyond the fact asked, does not
understand paraphrases unless the LLM checker is on (e.g. "Birch" for "the Birch room" only
passes because it is a listed alias), and does not know relative dates ("next Monday").
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

CORRECT_WITH_SOURCE = 1.0
CORRECT_WITHOUT_SOURCE = 0.75
FOUND_CREDIT = 0.1
READ_CREDIT = 0.1
WRONG_ANSWER_FACTOR = 0.5
MAX_SOURCES = 3
MAX_ANSWER_WORDS = 60
MAX_CANDIDATES = 2

ANSWER_KINDS = ("amount", "date", "datetime", "time", "code", "text")

_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
    "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH_RE = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_ORD = r"(?:st|nd|rd|th)?"
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}}){_ORD}(?:\s+of)?\s+{_MONTH_RE}(?:,?\s+(\d{{4}}))?\b", re.I)
_MONTH_DAY = re.compile(rf"\b{_MONTH_RE}\s+(?:the\s+)?(\d{{1,2}}){_ORD}(?:,?\s+(\d{{4}}))?\b", re.I)
_ISO_DATE = re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b")
_NUM_DATE = re.compile(r"\b(\d{1,2})[/.](\d{1,2})[/.](\d{4})\b")
_CLOCK = re.compile(
    r"(?<![\d:.,$€£])(\d{1,2})(?::(\d{2})(?::\d{2})?|\.(\d{2})(?=\s*[ap]\.?\s?m\b))(?:\s*([ap])\.?\s?m\b\.?)?",
    re.I,
)
_BARE_HOUR = re.compile(r"(?<![\d:.])(\d{1,2})\s*([ap])\.?\s?m\b\.?", re.I)
_MONEY = re.compile(
    r"(?P<cur>[$€£])?\s?(?P<num>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d{1,2})?(?!\d)"
    r"(?:\s?(?P<cur2>usd|eur|gbp|dollars?|euros?|pounds?)\b)?",
    re.I,
)
_ABSTAIN = (
    "i don't know", "i do not know", "don't know", "unknown", "not found", "no answer",
    "cannot find", "can't find", "could not find", "couldn't find", "unable to find", "n/a",
)  # fmt: skip
_ARTICLES = {"the", "a", "an"}


# --------------------------------------------------------------------------- normalisers


def normalize_text(s: str) -> str:
    """Lowercase, strip accents and punctuation, drop articles, collapse spaces."""
    s = unicodedata.normalize("NFKD", s)
    s = "".join(c for c in s if not unicodedata.combining(c)).lower()
    s = s.replace("'s ", " ").replace("&", " and ")
    words = re.sub(r"[^a-z0-9]+", " ", s).split()
    return " ".join(w for w in words if w not in _ARTICLES)


def extract_amounts(text: str) -> list[tuple[Decimal, bool]]:
    """Every number in ``text`` as ``(value, has_currency_marker)``."""
    out = []
    for m in _MONEY.finditer(text):
        raw = m.group("num").replace(",", "") + (m.group("frac") or "")
        try:
            out.append((Decimal(raw), bool(m.group("cur") or m.group("cur2"))))
        except InvalidOperation:  # pragma: no cover - regex only yields digits
            continue
    return out


def extract_dates(text: str) -> list[tuple[int | None, int, int]]:
    """Every calendar date in ``text`` as ``(year or None, month, day)``.

    Numeric ``d/m/yyyy`` dates are ambiguous and yield both readings.
    """
    out: list[tuple[int | None, int, int]] = []

    def add(y: int | None, mo: int, d: int) -> None:
        if 1 <= mo <= 12 and 1 <= d <= 31 and (y, mo, d) not in out:
            out.append((y, mo, d))

    for m in _ISO_DATE.finditer(text):
        add(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    for m in _NUM_DATE.finditer(text):
        a, b, y = int(m.group(1)), int(m.group(2)), int(m.group(3))
        add(y, b, a)
        add(y, a, b)
    for m in _DAY_MONTH.finditer(text):
        add(
            int(m.group(3)) if m.group(3) else None,
            _MONTHS[m.group(2).lower()[:3]],
            int(m.group(1)),
        )
    for m in _MONTH_DAY.finditer(text):
        add(
            int(m.group(3)) if m.group(3) else None,
            _MONTHS[m.group(1).lower()[:3]],
            int(m.group(2)),
        )
    return out


def extract_times(text: str) -> list[tuple[int, int]]:
    """Every clock time in ``text`` as ``(hour 0-23, minute)``; ``noon``/``midnight`` too."""
    out: list[tuple[int, int]] = []

    def add(h: int, mi: int, ap: str | None) -> None:
        if ap:
            if not 1 <= h <= 12:
                return
            h = h % 12 + (12 if ap.lower() == "p" else 0)
        if 0 <= h <= 23 and 0 <= mi <= 59 and (h, mi) not in out:
            out.append((h, mi))

    no_dates = _ISO_DATE.sub(" ", _NUM_DATE.sub(" ", text))
    for m in _CLOCK.finditer(no_dates):
        add(int(m.group(1)), int(m.group(2) or m.group(3)), m.group(4))
    for m in _BARE_HOUR.finditer(no_dates):
        add(int(m.group(1)), 0, m.group(2))
    low = text.lower()
    if re.search(r"\bnoon\b", low):
        add(12, 0, None)
    if re.search(r"\bmidnight\b", low):
        add(0, 0, None)
    return out


def _compact_windows(text: str, max_len: int = 5) -> set[str]:
    tokens = re.findall(r"[a-z0-9]+", text.lower())
    out = set()
    for i in range(len(tokens)):
        for j in range(i + 1, min(i + max_len, len(tokens)) + 1):
            out.add("".join(tokens[i:j]))
    return out


def _date_ok(found: list[tuple[int | None, int, int]], ref: tuple[int, int, int]) -> bool:
    y, mo, d = ref
    return any(fm == mo and fd == d and (fy is None or fy == y) for fy, fm, fd in found)


def contains_value(text: str, reference: str, kind: str, aliases: tuple[str, ...] = ()) -> bool:
    """Whether ``text`` states ``reference`` (of answer ``kind``), ignoring surface format.

    Used both on agent answers (with the stuffing limits of ``answer_matches``) and on email
    texts (to check that exactly one email carries a question's answer).
    """
    if kind not in ANSWER_KINDS:
        raise ValueError(f"unknown answer kind {kind!r}; expected one of {ANSWER_KINDS}")
    refs = (reference, *aliases)
    if kind == "amount":
        values = {v for v, _ in extract_amounts(text)}
        return any(v in values for r in refs for v, _ in extract_amounts(r)[:1])
    if kind in ("date", "datetime"):
        date_part = reference[:10]
        y, mo, d = (int(x) for x in date_part.split("-"))
        if not _date_ok(extract_dates(text), (y, mo, d)):
            return False
        if kind == "date":
            return True
        h, mi = (int(x) for x in reference[11:16].split(":"))
        return (h, mi) in extract_times(text)
    if kind == "time":
        h, mi = (int(x) for x in reference[:5].split(":"))
        return (h, mi) in extract_times(text)
    if kind == "code":
        windows = _compact_windows(text)
        return any(re.sub(r"[^a-z0-9]", "", r.lower()) in windows for r in refs)
    norm = f" {normalize_text(text)} "
    return any(f" {normalize_text(r)} " in norm for r in refs if normalize_text(r))


def _n_candidates(text: str, kind: str) -> int:
    if kind == "amount":
        marked = [v for v, cur in extract_amounts(text) if cur]
        return len(set(marked))
    if kind == "date":
        return len({(m, d) for _, m, d in extract_dates(text)})
    if kind == "datetime":
        return max(len({(m, d) for _, m, d in extract_dates(text)}), len(extract_times(text)))
    if kind == "time":
        return len(extract_times(text))
    return 0


def is_abstention(answer: str) -> bool:
    """Whether the answer is empty or a short "I don't know" / "could not find it"."""
    a = " ".join(answer.lower().replace("\u2019", "'").split())
    return not a or (len(a.split()) <= 15 and any(p in a for p in _ABSTAIN))


@dataclass(frozen=True)
class AnswerPart:
    """One thing the answer must state: ``reference`` of ``kind`` (ISO for dates/times)."""

    kind: str
    reference: str
    aliases: tuple[str, ...] = ()


def answer_matches(
    answer: str, parts: tuple[AnswerPart, ...] | list[AnswerPart]
) -> tuple[bool, list[str]]:
    """Deterministic check of an agent's answer: every part stated, no stuffing.

    Returns ``(correct, hack_signals)``.
    """
    signals: list[str] = []
    if len(answer.split()) > MAX_ANSWER_WORDS:
        return False, ["answer_stuffing"]
    for p in parts:
        if _n_candidates(answer, p.kind) > MAX_CANDIDATES:
            return False, ["answer_stuffing"]
    ok = all(contains_value(answer, p.reference, p.kind, p.aliases) for p in parts)
    return ok, signals


# --------------------------------------------------------------------------- LLM checker


class LLMAnswerChecker:
    """Ask a LiteLLM model whether a free-form answer means the same as the reference.

    Off by default (network, cost, and a second model's judgement in a verifiable reward).
    ``completion_kwargs`` go to ``litellm.completion`` (e.g. ``api_base``; tests pass
    ``mock_response``). Any error counts as "not equivalent" and is reported in ``errors``.
    """

    PROMPT = (
        "You check answers to questions about emails. Reply with a JSON object "
        '{{"equivalent": true}} or {{"equivalent": false}} and nothing else.\n'
        "The candidate is equivalent if it states the same fact as the reference (extra "
        "harmless detail is fine; hedging between several options is not).\n\n"
        "Question: {question}\nReference answer: {reference}\nCandidate answer: {candidate}"
    )

    def __init__(self, model: str, **completion_kwargs: Any):
        self.model = model
        self.completion_kwargs = {"temperature": 0.0, **completion_kwargs}
        self.errors = 0
        self._cache: dict[tuple[str, str, str], bool] = {}

    def __call__(self, question: str, reference: str, candidate: str) -> bool:
        key = (question, reference, candidate)
        if key in self._cache:
            return self._cache[key]
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm  # ~10 s to import, and only the optional LLM answer checker needs it

        prompt = self.PROMPT.format(question=question, reference=reference, candidate=candidate)
        try:
            resp = litellm.completion(
                model=self.model,
                messages=[{"role": "user", "content": prompt}],
                **self.completion_kwargs,
            )
            text = resp.choices[0].message.content or ""
            start, end = text.find("{"), text.rfind("}")  # the outermost object (linear)
            obj = json.loads(text[start : end + 1]) if -1 < start < end else {}
            verdict = bool(obj.get("equivalent")) if isinstance(obj, dict) else False
        except Exception:  # noqa: BLE001 - any provider failure means "not verified"
            self.errors += 1
            verdict = False
        self._cache[key] = verdict
        return verdict


# --------------------------------------------------------------------------- episode reward


@dataclass
class RewardBreakdown:
    """The reward of one episode and why."""

    reward: float
    answered: bool
    answer_correct: bool
    source_correct: bool
    found_source: bool
    read_source: bool
    checked_by_llm: bool = False
    hack_signals: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def score_episode(
    *,
    question: str,
    parts: tuple[AnswerPart, ...] | list[AnswerPart],
    source_id: str,
    answer: str | None,
    sources: list[str] | None,
    found_ids: list[str] | set[str],
    read_ids: list[str] | set[str],
    checker: LLMAnswerChecker | None = None,
) -> RewardBreakdown:
    """Reward of an episode from the final answer and what the agent searched and read.

    ``answer`` is None when the episode ended without an ``answer`` call (turn limit).
    """
    found, read = source_id in found_ids, source_id in read_ids
    partial = FOUND_CREDIT * found + READ_CREDIT * read
    sources = [str(s).strip() for s in (sources or [])]
    signals: list[str] = []
    if len(sources) > MAX_SOURCES:
        signals.append("source_stuffing")
    source_ok = source_id in sources and len(sources) <= MAX_SOURCES
    if answer is None or not answer.strip():
        return RewardBreakdown(
            round(partial, 4), False, False, source_ok, found, read, hack_signals=signals
        )
    correct, sig = answer_matches(answer, parts)
    signals += sig
    if not correct and is_abstention(answer):
        return RewardBreakdown(
            round(partial, 4), False, False, source_ok, found, read, hack_signals=signals
        )
    by_llm = False
    if not correct and not sig and checker is not None and any(p.kind == "text" for p in parts):
        reference = "; ".join(p.reference for p in parts)
        correct = by_llm = checker(question, reference, answer)
    if not correct:
        return RewardBreakdown(
            round(partial * WRONG_ANSWER_FACTOR, 4),
            True,
            False,
            source_ok,
            found,
            read,
            hack_signals=signals,
        )
    if not (found or read):
        signals.append("unsupported_correct_answer")
    reward = CORRECT_WITH_SOURCE if source_ok else CORRECT_WITHOUT_SOURCE
    return RewardBreakdown(reward, True, True, source_ok, found, read, by_llm, signals)
