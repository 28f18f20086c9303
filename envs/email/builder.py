"""The inbox builder: the cast of an inbox and the primitives scenarios and noise use.

Import path: ``rankgym.envs.email.builder``. ``Builder`` holds the seeded RNG, the people of
one inbox (owner, colleagues, vendors, partners, friends, automated senders) and the drafts
written so far; it reserves identities (``key``/``identities``) and values (``unique``) so
that every question has exactly one source email. It does not decide *what* an inbox
contains: ``scenarios.py`` adds facts with questions, ``noise.py`` the rest, and
``generator.py`` assembles them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

from rankgym.envs.email import vocab as V
from rankgym.envs.email.templates import GREETINGS, NOTES, SIGNOFFS, fmt_money, header_date
from rankgym.envs.email.types import N_DAYS, START, WEEKDAYS, Person, Question

T = TypeVar("T")


@dataclass
class Draft:
    """An email before ids are assigned: ``seq`` orders creation, ``thread`` groups replies."""

    seq: int
    thread: int
    sender: Person
    to: list[Person]
    cc: list[Person]
    when: datetime
    subject: str
    body: str
    kind: str


@dataclass
class QDraft:
    """A question before email ids are assigned: ``question.id``, ``source_id`` and
    ``distractor_ids`` are empty until the generator numbers ``source`` and ``distractors``."""

    question: Question
    source: Draft
    distractors: list[Draft]


@dataclass(frozen=True)
class Letter:
    """What a scenario writes for one fact or distractor email (see ``Builder.fact_group``)."""

    sender: Person
    when: datetime
    subject: str
    body: str
    answer: str = ""


@dataclass
class Service:
    """An automated sender (airline, bank, code host...)."""

    person: Person
    extra: dict[str, str] = field(default_factory=dict)


class Builder:
    """One inbox under construction: the cast of people, the drafts, the questions.

    Scenarios (``scenarios.py``) and noise (``noise.py``) are functions of a ``Builder``;
    they draw every random choice from ``self.rng`` in a fixed order, which is what makes an
    inbox a pure function of its seed.
    """

    def __init__(self, seed: int, index: int, n_emails: int, split: str, facts_per_scenario: int):
        self.rng = random.Random(seed * 1_000_003 + index * 7_919 + 1)
        self.index = index
        self.inbox_id = f"inbox{index}"
        self.split = split
        self.n_emails = n_emails
        self.facts_per_scenario = facts_per_scenario
        self.drafts: list[Draft] = []
        self.questions: list[QDraft] = []
        self._seq = 0
        self._thread = 0
        self._names: set[str] = set()
        self._values: set[str] = set()
        self._keys: set[tuple[str, ...]] = set()
        self._cast()

    # ------------------------------------------------------------------ people
    def person_name(self, last: str | None = None) -> str:
        for _ in range(1000):
            name = f"{self.rng.choice(V.FIRST_NAMES)} {last or self.rng.choice(V.LAST_NAMES)}"
            if name not in self._names:
                self._names.add(name)
                return name
        raise RuntimeError("ran out of unique names")

    def work_person(self, org: str, domain: str, title: str) -> Person:
        name = self.person_name()
        first, last = name.lower().split(" ")
        local = self.rng.choice((f"{first}.{last}", f"{first[0]}{last}", f"{first}"))
        return Person(name, f"{local}@{domain}", org, title)

    def private_person(self, last: str | None = None) -> Person:
        name = self.person_name(last)
        first, last_ = name.lower().split(" ")
        local = self.rng.choice(
            (f"{first}.{last_}", f"{first}{last_[0]}", f"{first}{self.rng.randint(10, 99)}")
        )
        return Person(name, f"{local}@{self.rng.choice(V.PERSONAL_DOMAINS)}")

    def _cast(self) -> None:
        rng = self.rng
        companies = list(V.COMPANIES)
        rng.shuffle(companies)
        self.org, self.domain, _ = companies[0]
        self.owner = self.work_person(
            self.org,
            self.domain,
            rng.choice(
                ("Product Manager", "Operations Lead", "Engineering Manager", "Program Manager")
            ),
        )
        titles: tuple[str, ...] = (
            "Head of Operations", "Finance Manager", "Office Manager", "Talent Partner",
            "Procurement Lead", "Data Engineer", "Product Designer", "Backend Engineer",
            "Account Executive", "Marketing Manager", "Analyst", "QA Engineer", "Legal Counsel",
            "Customer Success Manager", "Security Engineer", "Frontend Engineer", "Product Manager",
            "Sales Engineer",
        )  # fmt: skip
        self.colleagues = [self.work_person(self.org, self.domain, t) for t in titles]
        self.manager, self.finance, self.office, self.recruiter, self.procurement = self.colleagues[
            :5
        ]
        self.peers = self.colleagues[5:]
        # vendors (invoices, POs) and partners (external meetings)
        vendor_cos = [c for c in companies[1:] if c[0] in V.VENDORS][:6]
        partner_cos = [c for c in companies[1:] if c not in vendor_cos][:6]
        self.partners: list[tuple[str, str, list[Person]]] = []
        for name, domain, _ in partner_cos:
            titles = ("Account Manager", "Partner Lead", "Director", "Program Lead")
            people = [self.work_person(name, domain, rng.choice(titles)) for _ in range(2)]
            self.partners.append((name, domain, people))
        self.vendors: list[tuple[str, Person, list[tuple[str, int, int]]]] = []
        for name, domain, _ in vendor_cos:
            billing = self.work_person(name, domain, "Accounts Receivable")
            self.vendors.append((name, billing, list(V.VENDORS[name])))
        self.friends = [self.private_person() for _ in range(8)]
        self.family = [self.private_person(self.owner.name.split(" ")[1]) for _ in range(3)]
        self.contractors = []
        for _ in range(3):
            name = self.person_name()
            last = name.split(" ")[1]
            biz = f"{last} {rng.choice(V.SMALL_BUSINESS_SUFFIXES)}"
            dom = biz.lower().replace(" & ", "").replace(" ", "") + ".com"
            self.contractors.append(
                Person(name, f"{name.split(' ')[0].lower()}@{dom}", biz, "Owner")
            )
        airline = rng.choice(V.AIRLINES)
        self.airline = Service(
            Person(airline[0], f"bookings@{airline[1]}", airline[0]), {"code": airline[2]}
        )
        hotel = rng.choice(V.HOTEL_SITES)
        self.hotels = Person(hotel[0], f"reservations@{hotel[1]}", hotel[0])
        courier = rng.choice(V.COURIERS)
        self.courier = Person(courier[0], f"noreply@{courier[1]}", courier[0])
        self.bank = Person("Fairhaven Bank", "alerts@fairhavenbank.com", "Fairhaven Bank")
        self.codehost = Person("CodeHarbor", "notifications@codeharbor.dev", "CodeHarbor")
        self.calendar = Person("Calendar", f"calendar-noreply@{self.domain}", self.org)
        self.hr = Person("PeopleDesk", "noreply@peopledesk.app", "PeopleDesk")
        self.security = Person("Account Security", f"security@{self.domain}", self.org)
        self.home_city = rng.choice(V.HOME_CITIES)
        self.org_slug = self.domain.split(".")[0]

    # ------------------------------------------------------------------ primitives
    def new_thread(self) -> int:
        self._thread += 1
        return self._thread

    def add(
        self,
        sender: Person,
        to: list[Person],
        when: datetime,
        subject: str,
        body: str,
        kind: str,
        thread: int | None = None,
        cc: list[Person] | None = None,
    ) -> Draft:
        self._seq += 1
        d = Draft(
            self._seq,
            thread if thread is not None else self.new_thread(),
            sender,
            to,
            cc or [],
            when,
            subject,
            body,
            kind,
        )
        self.drafts.append(d)
        return d

    def key(self, *parts: str) -> bool:
        """Reserve an identity (e.g. invoice vendor+service+month); False if taken."""
        if parts in self._keys:
            return False
        self._keys.add(parts)
        return True

    def identities(
        self, kind: str, fact: tuple, alternatives: list[tuple], n_extra: int = 1
    ) -> list | None:
        """Reserve a fact's identity and 1..n_extra distractor identities, or nothing.

        Returns ``[fact, *distractor identities]``, or None (and reserves nothing) when the fact's
        identity is taken or no alternative is free: every question gets a distractor.
        """
        key = lambda ident: (kind, *(str(x) for x in ident))  # noqa: E731
        if key(fact) in self._keys:
            return None
        extras: list[tuple] = []
        for alt in alternatives:
            if len(extras) == n_extra:
                break
            if alt != fact and alt not in extras and key(alt) not in self._keys:
                extras.append(alt)
        if not extras:
            return None
        for ident in (fact, *extras):
            self._keys.add(key(ident))
        return [fact, *extras]

    def one_of(
        self, kind: str, people: Sequence[Person], pool: Sequence[str], n_alternatives: int
    ) -> tuple[Person, str, list | None]:
        """One of ``people``, a random thing of ``pool`` for them, and its :meth:`identities`
        (``None`` when taken), the alternatives being the same person with ``n_alternatives``
        other things of the pool (drawn in that order)."""
        who = self.rng.choice(people)
        thing = self.rng.choice(pool)
        alts = [(who.name, t) for t in self.rng.sample(pool, n_alternatives)]
        return who, thing, self.identities(kind, (who.name, thing), alts)

    def unique(self, make: Callable[[], str]) -> str:
        for _ in range(10_000):
            v = make()
            if v not in self._values:
                self._values.add(v)
                return v
        raise RuntimeError("ran out of unique values")

    def amount(self, lo_dollars: int, hi_dollars: int) -> str:
        rng = self.rng
        return self.unique(
            lambda: fmt_money(rng.randint(lo_dollars * 100, hi_dollars * 100) // 5 * 5)
        )

    def code(self, prefix: str, alphabet: str, n: int) -> str:
        rng = self.rng
        return self.unique(lambda: prefix + "".join(rng.choice(alphabet) for _ in range(n)))

    def day(self, lo: int = 0, hi: int = N_DAYS - 1) -> datetime:
        return START + timedelta(days=self.rng.randint(lo, hi))

    def work_time(self, day: datetime) -> datetime:
        while day.weekday() >= 5:
            day += timedelta(days=1)
        return day.replace(hour=self.rng.randint(8, 18), minute=self.rng.choice(range(0, 60, 1)))

    def work_time_in(self, month: int, last_day: int, spill_days: int) -> datetime:
        """Working hours on a day 1..``last_day`` of ``month`` 2024; when that falls before the
        inbox starts, on one of the ``spill_days`` + 1 days from the start instead."""
        when = self.work_time(datetime(2024, month, self.rng.randint(1, last_day)))
        if when < START:
            when = self.work_time(START + timedelta(days=self.rng.randint(0, spill_days)))
        return when

    def any_time(self, day: datetime) -> datetime:
        return day.replace(hour=self.rng.randint(6, 23), minute=self.rng.randint(0, 59))

    def slot(self, after: datetime, min_days: int, max_days: int) -> datetime:
        """A future meeting-like slot: weekday, on the quarter hour, 9:00-17:30."""
        day = after + timedelta(days=self.rng.randint(min_days, max_days))
        while day.weekday() >= 5:
            day += timedelta(days=1)
        return day.replace(hour=self.rng.randint(9, 17), minute=self.rng.choice((0, 15, 30, 45)))

    def greet(self, to: Person) -> str:
        return self.rng.choice(GREETINGS).format(f=to.first)

    def sign(self, p: Person) -> str:
        s = self.rng.choice(SIGNOFFS).format(f=p.first, n=p.name)
        if p.title and p.org and self.rng.random() < 0.5:
            s += f"\n{p.title}, {p.org}"
        return s

    def letter(self, sender: Person, to: Person, *paras: str) -> str:
        return "\n\n".join((self.greet(to), *paras, self.sign(sender)))

    def quote(self, parent: Draft) -> str:
        quoted = "\n".join(("> " + ln) if ln else ">" for ln in parent.body.split("\n"))
        return f"On {header_date(parent.when)}, {parent.sender.address} wrote:\n{quoted}"

    def reply(
        self,
        parent: Draft,
        sender: Person,
        body: str,
        kind: str,
        delay_minutes: tuple[int, int] = (20, 2880),
        quote: bool = True,
    ) -> Draft:
        when = parent.when + timedelta(minutes=self.rng.randint(*delay_minutes))
        subject = parent.subject if parent.subject.startswith("Re: ") else f"Re: {parent.subject}"
        if sender == parent.sender:  # a follow-up to one's own message
            to = list(parent.to)
        else:
            to = [parent.sender] + [p for p in parent.to if p != sender and p != parent.sender][:2]
        text = body + ("\n\n" + self.quote(parent) if quote else "")
        return self.add(sender, to, when, subject, text, kind, thread=parent.thread)

    def slots(self, **extra: str) -> dict[str, str]:
        """Random values for the noise templates' slots (one dict per thread keeps it coherent)."""
        rng = self.rng
        partner = rng.choice(self.partners)
        slots = {
            "doc": rng.choice(V.DOCS),
            "project": rng.choice(V.PROJECTS),
            "meeting": rng.choice(V.INTERNAL_MEETINGS),
            "team": rng.choice(V.TEAMS),
            "weekday": rng.choice(WEEKDAYS[:5]),
            "practice": rng.choice(V.PRACTICES),
            "topic": rng.choice(V.TOPICS),
            "repo": rng.choice(V.REPOS),
            "city": rng.choice(V.CITIES),
            "org": partner[0],
            "name2": rng.choice(partner[2]).name,
            "name3": rng.choice(self.colleagues).name,
            "name": rng.choice(self.colleagues).name,
            "sector": rng.choice([c[2] for c in V.COMPANIES]),
            "slug": "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(8)),
            "note1": "",
            "note2": "",
            "note3": "",
        }
        notes = rng.sample(NOTES, 3)
        for k in range(3):
            slots[f"note{k + 1}"] = notes[k].format(
                name=rng.choice(self.colleagues).name, team=rng.choice(V.TEAMS)
            )
        slots.update(extra)
        return slots

    def question(self, q: QDraft) -> None:
        for term in q.question.key_terms:
            assert term.lower() in q.question.question.lower(), (term, q.question.question)
        self.questions.append(q)

    def ask(
        self,
        group: Sequence[Draft],
        qtype: str,
        scenario: str,
        question: str,
        answer: str,
        answer_kind: str,
        key_terms: tuple[str, ...],
        keywords: tuple[str, ...],
        aliases: tuple[str, ...] = (),
    ) -> bool:
        """Add the question whose source is ``group[0]`` (the fact) and whose distractors are
        the rest of ``group``; returns True, so a scenario can end with ``return b.ask(...)``."""
        fact, *distractors = group
        q = Question(
            id="", inbox_id=self.inbox_id, split=self.split, qtype=qtype, scenario=scenario,
            question=question, answer=answer, answer_kind=answer_kind, aliases=aliases,
            source_id="", sender_email=fact.sender.email, key_terms=key_terms,
            keywords=tuple(w.lower() for w in keywords), distractor_ids=(),
        )  # fmt: skip
        self.question(QDraft(q, fact, distractors))
        return True

    def note(
        self, sender: Person, when: datetime, subject: str, *paras: str, answer: str = ""
    ) -> Letter:
        """A ``Letter`` from ``sender`` to the owner: greeting, ``paras``, sign-off (in that
        order of random draws, after the arguments)."""
        return Letter(sender, when, subject, self.letter(sender, self.owner, *paras), answer)

    def fact_group(
        self, variants: Sequence[T], write: Callable[[int, T], Letter]
    ) -> tuple[list[Draft], str]:
        """Add one email per variant to the owner: variant 0 is the fact, the rest distractors.

        ``write(k, variant)`` draws the k-th email (in order, so the RNG sequence is fixed).
        Returns the drafts (fact first) and the fact's answer.
        """
        drafts: list[Draft] = []
        answer = ""
        for k, variant in enumerate(variants):
            m = write(k, variant)
            kind = "fact" if k == 0 else "distractor"
            drafts.append(self.add(m.sender, [self.owner], m.when, m.subject, m.body, kind))
            if k == 0:
                answer = m.answer
        return drafts, answer
