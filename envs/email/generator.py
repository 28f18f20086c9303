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
``GENERATOR_VERSION`` whenever the output changes (it keys the SQLite cache).

Limits, frankly: the text is template-based. It is varied enough that keyword search needs
the right terms and distractors punish sloppy reading, but a reader will spot the templates,
and the facts are cleaner than real mail (one fact per email, no contradictions across threads,
no attachments). Train/test split is by inbox: the test inboxes have other owners, colleagues
and facts, but the same templates.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from rankgym.envs.email import vocab as V

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


@dataclass
class Inbox:
    """One generated inbox: owner, emails sorted by date, and its questions."""

    id: str
    split: str
    owner: Person
    today: str
    emails: list[Email]
    questions: list[Question]


# --------------------------------------------------------------------------- formatting


def fmt_money(cents: int) -> str:
    """``431750`` -> ``$4,317.50``."""
    return f"${cents // 100:,}.{cents % 100:02d}"


def fmt_day(d: date | datetime, style: int, year: bool = False) -> str:
    """A calendar day in one of the house styles (0 long, 1 US, 2 short, 3 ordinal)."""
    wd, mo = WEEKDAYS[d.weekday()], MONTHS[d.month - 1]
    y = f" {d.year}" if year else ""
    if style == 0:
        return f"{wd} {d.day} {mo}{y}"
    if style == 1:
        return f"{wd}, {mo} {d.day}{',' + y if year else ''}"
    if style == 2:
        return f"{wd[:3]} {d.day} {mo[:3]}{y}"
    suffix = "th" if 11 <= d.day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(d.day % 10, "th")
    return f"{wd} the {d.day}{suffix} of {mo}{y}"


def fmt_time(t: datetime, style: int) -> str:
    """``15:30`` (style 0) or ``3:30 PM`` (style 1) or ``3:30pm`` (style 2)."""
    if style == 0:
        return f"{t.hour:02d}:{t.minute:02d}"
    h = t.hour % 12 or 12
    ampm = "AM" if t.hour < 12 else "PM"
    return f"{h}:{t.minute:02d} {ampm}" if style == 1 else f"{h}:{t.minute:02d}{ampm.lower()}"


def _header_date(t: datetime) -> str:
    return f"{WEEKDAYS[t.weekday()][:3]}, {t.day} {MONTHS[t.month - 1][:3]} {t.year} at {t.hour:02d}:{t.minute:02d}"


# --------------------------------------------------------------------------- builder


@dataclass
class _Draft:
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
class _QDraft:
    qtype: str
    scenario: str
    question: str
    answer: str
    answer_kind: str
    source: _Draft
    key_terms: tuple[str, ...]
    keywords: tuple[str, ...]
    distractors: list[_Draft]
    aliases: tuple[str, ...] = ()


@dataclass
class _Service:
    """An automated sender (airline, bank, code host...)."""

    person: Person
    extra: dict[str, str] = field(default_factory=dict)


SIGNOFFS = (
    "Best,\n{f}",
    "Thanks,\n{f}",
    "Cheers,\n{f}",
    "Kind regards,\n{n}",
    "Best regards,\n{n}",
)
GREETINGS = ("Hi {f},", "Hello {f},", "Hey {f},", "Dear {f},", "{f},")

NOTES = (
    "Timeline is unchanged; we still aim for the end of the quarter.",
    "{name} will follow up with the {team} team about staffing.",
    "We agreed to drop the reporting feature from the first release.",
    "Budget questions go to Finance before the next review.",
    "Need a decision on the vendor shortlist by next week.",
    "Customer interviews are scheduled; notes will go in the shared folder.",
    "Open question: who owns the migration runbook?",
    "Security review is pending, no blockers so far.",
    "The dashboard numbers were off by a day; fix is in progress.",
    "We'll revisit the hiring plan after the offsite.",
)

THREAD_OPENERS = (
    (
        "Quick question about the {doc}",
        "Do you have the latest version of the {doc} for Project {project}? I'd like to go through it before the {meeting}.",
    ),
    (
        "Project {project} status",
        "Could you send me a short status update on Project {project}? Mostly interested in blockers and whether we need more help from the {team} team.",
    ),
    (
        "Notes from the {meeting}",
        "Quick notes from today's {meeting}:\n- {note1}\n- {note2}\n- {note3}\n\nLet me know if I missed anything.",
    ),
    (
        "{doc} review",
        "I've left comments on the {doc}. Nothing major, mostly wording in the second section. Can you take a look when you have a moment?",
    ),
    (
        "Lunch {weekday}?",
        "Are you around for lunch on {weekday}? There's a new place near the office I've been wanting to try.",
    ),
    (
        "Thoughts on {practice}",
        "I read an interesting piece on {practice} and wondered whether it would help us on Project {project}. Worth a chat at the next {meeting}?",
    ),
    (
        "Intro: {name2} ({org})",
        "I'd like to introduce you to {name2}, who works on {sector} at {org}. I think there's a good fit with what you're doing on Project {project}.\n\nI'll let you two take it from here.",
    ),
    (
        "Access to the {repo} repo",
        "Could you give me write access to the {repo} repo? I need to push a fix before the end of the week.",
    ),
    (
        "Cleaning up the {team} drive",
        "I'm tidying up the {team} shared drive this week. Please move anything you still need out of the Archive folder by {weekday}.",
    ),
    (
        "Customer feedback on {topic}",
        "Sharing some customer feedback on {topic} from this week's calls. Two accounts asked about it unprompted, so it may be worth raising at the {meeting}.",
    ),
    (
        "Slides for the {meeting}",
        "Could you add two slides on Project {project} to the deck for the {meeting}? Same format as last time is fine.",
    ),
    (
        "Travel to {city}",
        "Are you also going to {city} next month? Might be good to coordinate flights and share a taxi from the airport.",
    ),
    (
        "Project {project} handover notes",
        "I've put the handover notes for Project {project} in the shared folder. The open items are at the top; the rest is background.",
    ),
    (
        "{practice} pilot",
        "The {team} team wants to pilot {practice} next quarter. Would Project {project} be a good candidate, or is the timing bad?",
    ),
    (
        "Re-scoping Project {project}",
        "Given the {topic} discussion last week, I think we should re-scope Project {project}. Can we find 30 minutes on {weekday}?",
    ),
)

REPLIES = (
    "Thanks {f}, I'll take a look today.",
    "Sounds good to me.",
    "Attached is the latest version. Let me know if anything is missing.",
    "Can we discuss this at the {meeting} instead? I'd like {name3} to weigh in.",
    "I'm out until {weekday}, but I'll get back to you after that.",
    "Good point. I've updated the doc and flagged the open questions.",
    "+1, let's do it.",
    "Not yet, I'm waiting on the {team} team. Should have it by {weekday}.",
    "Done. Shout if you need anything else.",
    "Let me check with {name3} and come back to you.",
    "Makes sense. I'll add it to the agenda for the {meeting}.",
    "Thanks for flagging. I hadn't seen that.",
)

FORWARD_NOTES = (
    "FYI, see below.",
    "{f}, could you handle this one?",
    "Forwarding for visibility.",
    "Looping you in - see the thread below.",
    "Can you take a look at this when you get a chance?",
)

PERSONAL_OPENERS = (
    (
        "Weekend plans?",
        "Any plans this weekend? We were thinking of a walk by the river if the weather holds.",
    ),
    (
        "Photos from {city}",
        "Finally sorted the photos from {city}. Here's the album: https://photos.example.net/{slug}",
    ),
    (
        "Book recommendation",
        "Just finished a great book on {practice}, of all things. Want to borrow it?",
    ),
    ("Catching up", "It's been ages! How are things at work? Let's get a coffee soon."),
    (
        "Moving day",
        "We finally have a date for the move. Any chance you could help carry boxes on a Saturday?",
    ),
    ("Concert tickets", "I've got a spare ticket for the concert next month. Interested?"),
    (
        "Recipe",
        "You asked for the lemon cake recipe - it's below. Don't skip the zest.\n\n200g flour, 3 eggs, 150g sugar, 2 lemons.",
    ),
    ("Running club", "The running club is starting a beginners group on Tuesdays. Thought of you!"),
)

PERSONAL_REPLIES = (
    "Sounds lovely, count me in!",
    "Ha, thanks for thinking of me. Let me check the calendar.",
    "Can't this time, sorry - next time for sure.",
    "Yes please! Send me the details.",
    "Great, talk soon.",
    "Love it, thanks for sharing.",
)

ROOMS = (
    "Aspen",
    "Birch",
    "Cedar",
    "Dogwood",
    "Elm",
    "Fir",
    "Ginkgo",
    "Hazel",
    "Ivy",
    "Juniper",
    "Laurel",
    "Maple",
    "Oak",
    "Poplar",
    "Rowan",
    "Spruce",
    "Sycamore",
    "Willow",
)
FLOORS = ("2nd", "3rd", "4th", "5th", "6th")


class _Builder:
    def __init__(self, seed: int, index: int, n_emails: int, split: str, facts_per_scenario: int):
        self.rng = random.Random(seed * 1_000_003 + index * 7_919 + 1)
        self.index = index
        self.inbox_id = f"inbox{index}"
        self.split = split
        self.n_emails = n_emails
        self.facts_per_scenario = facts_per_scenario
        self.drafts: list[_Draft] = []
        self.questions: list[_QDraft] = []
        self._seq = 0
        self._thread = 0
        self._names: set[str] = set()
        self._values: set[str] = set()
        self._keys: set[tuple[str, ...]] = set()
        self._cast()

    # ------------------------------------------------------------------ people
    def _person_name(self, last: str | None = None) -> str:
        for _ in range(1000):
            name = f"{self.rng.choice(V.FIRST_NAMES)} {last or self.rng.choice(V.LAST_NAMES)}"
            if name not in self._names:
                self._names.add(name)
                return name
        raise RuntimeError("ran out of unique names")

    def _work_person(self, org: str, domain: str, title: str) -> Person:
        name = self._person_name()
        first, last = name.lower().split(" ")
        local = self.rng.choice((f"{first}.{last}", f"{first[0]}{last}", f"{first}"))
        return Person(name, f"{local}@{domain}", org, title)

    def _private_person(self, last: str | None = None) -> Person:
        name = self._person_name(last)
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
        self.owner = self._work_person(
            self.org,
            self.domain,
            rng.choice(
                ("Product Manager", "Operations Lead", "Engineering Manager", "Program Manager")
            ),
        )
        titles = (
            "Head of Operations", "Finance Manager", "Office Manager", "Talent Partner",
            "Procurement Lead", "Data Engineer", "Product Designer", "Backend Engineer",
            "Account Executive", "Marketing Manager", "Analyst", "QA Engineer", "Legal Counsel",
            "Customer Success Manager", "Security Engineer", "Frontend Engineer", "Product Manager",
            "Sales Engineer",
        )  # fmt: skip
        self.colleagues = [self._work_person(self.org, self.domain, t) for t in titles]
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
            people = [self._work_person(name, domain, rng.choice(titles)) for _ in range(2)]
            self.partners.append((name, domain, people))
        self.vendors: list[tuple[str, Person, list[tuple[str, int, int]]]] = []
        for name, domain, _ in vendor_cos:
            billing = self._work_person(name, domain, "Accounts Receivable")
            self.vendors.append((name, billing, list(V.VENDORS[name])))
        self.friends = [self._private_person() for _ in range(8)]
        self.family = [self._private_person(self.owner.name.split(" ")[1]) for _ in range(3)]
        self.contractors = []
        for _ in range(3):
            name = self._person_name()
            last = name.split(" ")[1]
            biz = f"{last} {rng.choice(V.SMALL_BUSINESS_SUFFIXES)}"
            dom = biz.lower().replace(" & ", "").replace(" ", "") + ".com"
            self.contractors.append(
                Person(name, f"{name.split(' ')[0].lower()}@{dom}", biz, "Owner")
            )
        airline = rng.choice(V.AIRLINES)
        self.airline = _Service(
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
    def _new_thread(self) -> int:
        self._thread += 1
        return self._thread

    def _add(
        self,
        sender: Person,
        to: list[Person],
        when: datetime,
        subject: str,
        body: str,
        kind: str,
        thread: int | None = None,
        cc: list[Person] | None = None,
    ) -> _Draft:
        self._seq += 1
        d = _Draft(
            self._seq,
            thread if thread is not None else self._new_thread(),
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

    def _key(self, *parts: str) -> bool:
        """Reserve an identity (e.g. invoice vendor+service+month); False if taken."""
        if parts in self._keys:
            return False
        self._keys.add(parts)
        return True

    def _identities(
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

    def _unique(self, make) -> str:
        for _ in range(10_000):
            v = make()
            if v not in self._values:
                self._values.add(v)
                return v
        raise RuntimeError("ran out of unique values")

    def _amount(self, lo_dollars: int, hi_dollars: int) -> str:
        rng = self.rng
        return self._unique(
            lambda: fmt_money(rng.randint(lo_dollars * 100, hi_dollars * 100) // 5 * 5)
        )

    def _code(self, prefix: str, alphabet: str, n: int) -> str:
        rng = self.rng
        return self._unique(lambda: prefix + "".join(rng.choice(alphabet) for _ in range(n)))

    def _day(self, lo: int = 0, hi: int = N_DAYS - 1) -> datetime:
        return START + timedelta(days=self.rng.randint(lo, hi))

    def _work_time(self, day: datetime) -> datetime:
        while day.weekday() >= 5:
            day += timedelta(days=1)
        return day.replace(hour=self.rng.randint(8, 18), minute=self.rng.choice(range(0, 60, 1)))

    def _any_time(self, day: datetime) -> datetime:
        return day.replace(hour=self.rng.randint(6, 23), minute=self.rng.randint(0, 59))

    def _slot(self, after: datetime, min_days: int, max_days: int) -> datetime:
        """A future meeting-like slot: weekday, on the quarter hour, 9:00-17:30."""
        day = after + timedelta(days=self.rng.randint(min_days, max_days))
        while day.weekday() >= 5:
            day += timedelta(days=1)
        return day.replace(hour=self.rng.randint(9, 17), minute=self.rng.choice((0, 15, 30, 45)))

    def _greet(self, to: Person) -> str:
        return self.rng.choice(GREETINGS).format(f=to.first)

    def _sign(self, p: Person) -> str:
        s = self.rng.choice(SIGNOFFS).format(f=p.first, n=p.name)
        if p.title and p.org and self.rng.random() < 0.5:
            s += f"\n{p.title}, {p.org}"
        return s

    def _letter(self, sender: Person, to: Person, *paras: str) -> str:
        return "\n\n".join((self._greet(to), *paras, self._sign(sender)))

    def _quote(self, parent: _Draft) -> str:
        quoted = "\n".join(("> " + ln) if ln else ">" for ln in parent.body.split("\n"))
        return f"On {_header_date(parent.when)}, {parent.sender.address} wrote:\n{quoted}"

    def _reply(
        self,
        parent: _Draft,
        sender: Person,
        body: str,
        kind: str,
        delay_minutes: tuple[int, int] = (20, 2880),
        quote: bool = True,
    ) -> _Draft:
        when = parent.when + timedelta(minutes=self.rng.randint(*delay_minutes))
        subject = parent.subject if parent.subject.startswith("Re: ") else f"Re: {parent.subject}"
        if sender == parent.sender:  # a follow-up to one's own message
            to = list(parent.to)
        else:
            to = [parent.sender] + [p for p in parent.to if p != sender and p != parent.sender][:2]
        text = body + ("\n\n" + self._quote(parent) if quote else "")
        return self._add(sender, to, when, subject, text, kind, thread=parent.thread)

    def _slots(self, **extra: str) -> dict[str, str]:
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

    def _question(self, q: _QDraft) -> None:
        for term in q.key_terms:
            assert term.lower() in q.question.lower(), (term, q.question)
        self.questions.append(q)

    # ------------------------------------------------------------------ fact scenarios
    # Each scenario adds one fact email (plus its distractors) and one question; it returns
    # False when it cannot find an unused identity (then the builder moves on).

    def fact_invoice(self) -> bool:
        rng = self.rng
        vendor, billing, services = rng.choice(self.vendors)
        (service, lo, hi) = rng.choice(services)
        month = rng.randint(1, 6)
        other_service = [s for s in services if s[0] != service]
        alts = [(service, m) for m in rng.sample(range(1, 7), 6)][:3] + [
            (s[0], month) for s in other_service
        ]
        rng.shuffle(alts)
        variants = self._identities("invoice", (service, month), alts, n_extra=2)
        if variants is None:
            return False
        drafts = []
        for k, (svc, m) in enumerate(variants):
            lo_, hi_ = (
                (lo, hi) if svc == service else next((a, b) for s_, a, b in services if s_ == svc)
            )
            amount = self._amount(lo_, hi_)
            inv = self._code("INV-", "0123456789", 5)
            when = self._work_time(datetime(2024, m + 1, rng.randint(1, 9)))
            due = when + timedelta(days=30)
            subject = rng.choice(
                (
                    f"Invoice {inv} - {svc} - {MONTHS[m - 1]} 2024",
                    f"{vendor} invoice {inv} ({svc}, {MONTHS[m - 1]} 2024)",
                )
            )
            body = self._letter(
                billing,
                self.owner,
                f"Please find attached {vendor} invoice {inv} for {svc} provided to {self.org} during {MONTHS[m - 1]} 2024.",
                f"The total amount due is {amount}, payable by {fmt_day(due, rng.randint(0, 2), year=True)} to the account on file. "
                "Please quote the invoice number with your payment.",
                "If you have any questions about this invoice, just reply to this email.",
            )
            drafts.append(
                self._add(
                    billing, [self.owner], when, subject, body, "fact" if k == 0 else "distractor"
                )
            )
            if k == 0:
                answer = amount
        m = MONTHS[month - 1]
        short = vendor.split(" ")[0]
        self._question(_QDraft(
            "how much", "invoice",
            rng.choice((f"How much did {vendor} invoice us for {service} for {m} 2024?",
                        f"What was the total on {vendor}'s invoice for {service} in {m} 2024?")),
            answer, "amount", drafts[0], (vendor, service, m), (short, *service.split(" "), m), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_expense(self) -> bool:
        rng = self.rng
        city = rng.choice(V.CITIES)
        picked = self._identities("trip", (city,), [(c,) for c in rng.sample(V.CITIES, 6)])
        if picked is None:
            return False
        cities = [c for (c,) in picked]
        drafts = []
        for k, c in enumerate(cities):
            start = self._day(5, N_DAYS - 40)
            trip_end = start + timedelta(days=rng.randint(1, 4))
            sub = self._add(
                self.owner, [self.finance], self._work_time(trip_end + timedelta(days=rng.randint(1, 5))),
                f"Expense report - {c} trip",
                self._letter(self.owner, self.finance,
                             f"Submitting my expenses for the {c} trip ({fmt_day(start, 2)} to {fmt_day(trip_end, 2)}). "
                             "Receipts for the hotel, flights and meals are attached.",
                             "Let me know if anything is missing."),
                "thread",
            )  # fmt: skip
            amount = self._amount(300, 4200)
            payroll = MONTHS[min(sub.when.month, 12) % 12]
            body = self._letter(
                self.finance, self.owner,
                rng.choice((f"Your expenses for the {c} trip have been approved. {amount} will be reimbursed with the {payroll} payroll.",
                            f"Approved: {amount} for the {c} trip, to be reimbursed with the {payroll} payroll run.")),
                rng.choice(("One note for next time: please use the corporate card for hotels where possible.", "Thanks for getting this in on time.")),
            )  # fmt: skip
            drafts.append(self._reply(sub, self.finance, body, "fact" if k == 0 else "distractor"))
            if k == 0:
                answer = amount
        self._question(_QDraft(
            "how much", "expense",
            rng.choice((f"How much was approved for reimbursement for my {city} trip?",
                        f"What amount will I be reimbursed for the {city} trip?")),
            answer, "amount", drafts[0], (f"{city} trip",), (city, "trip", "approved"), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_quote(self) -> bool:
        rng = self.rng
        contractor = rng.choice(self.contractors)
        job = rng.choice(V.HOME_JOBS)
        picked = self._identities(
            "quote",
            (contractor.name, job),
            [(contractor.name, j) for j in rng.sample(V.HOME_JOBS, 6)],
        )
        if picked is None:
            return False
        jobs = [j for _, j in picked]
        drafts = []
        for k, j in enumerate(jobs):
            amount = self._amount(350, 9500)
            when = self._any_time(self._day())
            body = self._letter(
                contractor, self.owner,
                f"Thanks for having me round to look at the {j}.",
                rng.choice((f"My quote for the {j} comes to {amount}, including materials and VAT.",
                            f"For the {j} I can do it for {amount} all in (labour and materials).")),
                f"I could start {rng.choice(('next Monday', 'in two weeks', 'early next month'))}. The quote is valid for 30 days.",
            )  # fmt: skip
            drafts.append(
                self._add(
                    contractor,
                    [self.owner],
                    when,
                    f"Quote for {j}",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
            if k == 0:
                answer = amount
        self._question(_QDraft(
            "how much", "quote",
            f"How much did {contractor.name} quote for the {job}?",
            answer, "amount", drafts[0], (contractor.name, job), (*job.split(" "), "quote"), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_meeting_moved(self) -> bool:
        rng = self.rng
        org, _, people = rng.choice(self.partners)
        meeting = rng.choice(V.EXTERNAL_MEETINGS)
        if not self._key("meeting", org, meeting):
            return False
        contact = rng.choice(people)
        start = self._work_time(self._day(0, N_DAYS - 30))
        old = self._slot(start, 5, 20)
        style, tstyle = rng.randint(0, 3), rng.randint(0, 2)
        first = self._add(
            contact, [self.owner], start, f"{meeting.capitalize()} with {org}",
            self._letter(contact, self.owner,
                         f"Confirming the {meeting} with {org} on {fmt_day(old, style)} at {fmt_time(old, tstyle)}. "
                         "I'll send the agenda a couple of days before.",
                         "Looking forward to it."),
            "distractor",
        )  # fmt: skip
        new = self._slot(first.when, 4, 16)  # the reply comes within 3 days, so this is after it
        while new.date() == old.date():
            new = self._slot(first.when, 4, 16)
        fact = self._reply(
            first, contact,
            self._letter(contact, self.owner,
                         rng.choice((f"Unfortunately we need to move the {meeting} with {org}. New time: {fmt_day(new, style)} at {fmt_time(new, tstyle)}.",
                                     f"Small change of plan: the {meeting} with {org} is moved to {fmt_day(new, style)}, {fmt_time(new, tstyle)}. Same dial-in.")),
                         "Sorry for the shuffle - I've updated the calendar invite."),
            "fact", delay_minutes=(600, 4000),
        )  # fmt: skip
        drafts = [fact, first]
        # same sender, same org, another meeting: a near-duplicate with another time
        other = rng.choice([m for m in V.EXTERNAL_MEETINGS if m != meeting])
        if self._key("meeting", org, other):
            t = self._slot(start, 3, 25)
            while t.date() == new.date():
                t = self._slot(start, 3, 25)
            drafts.append(self._add(
                contact, [self.owner], self._work_time(self._day(0, N_DAYS - 30)), f"{other.capitalize()} with {org}",
                self._letter(contact, self.owner, f"Confirming the {other} with {org} on {fmt_day(t, style)} at {fmt_time(t, tstyle)}.", "Talk then."),
                "distractor",
            ))  # fmt: skip
        answer = f"{new:%Y-%m-%d %H:%M}"
        self._question(_QDraft(
            "when", "meeting_moved",
            rng.choice((f"What date and time was the {meeting} with {org} moved to?",
                        f"When is the {meeting} with {org} now taking place, after it was moved?")),
            answer, "datetime", fact, (meeting, org), (*meeting.split(" "), org.split(" ")[0]), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_flight(self) -> bool:
        rng = self.rng
        city = rng.choice(V.CITIES)
        if not self._key("flight", city):
            return False
        code = self.airline.extra["code"]
        ref = self._code("", "ABCDEFGHJKLMNPQRSTUVWXYZ23456789", 6)
        booked = self._any_time(self._day(0, N_DAYS - 30))
        out = self._slot(booked, 7, 40).replace(hour=rng.randint(6, 20))
        back = self._slot(out, 2, 6).replace(hour=rng.randint(6, 20))
        style, tstyle = rng.randint(0, 3), rng.randint(0, 2)

        def leg(src: str, dst: str, t: datetime) -> str:
            arr = t + timedelta(minutes=rng.randint(70, 400))
            return (f"Flight {code}{rng.randint(100, 2999)} departs {src} on {fmt_day(t, style, year=True)} at "
                    f"{fmt_time(t, tstyle)} and arrives in {dst} at {fmt_time(arr, tstyle)}.")  # fmt: skip

        a = self.airline.person
        fact = self._add(
            a, [self.owner], booked, f"Booking confirmation {ref}: {self.home_city} to {city}",
            f"Dear {self.owner.name},\n\nThank you for booking with {a.name}. Your booking reference is {ref}.\n\n"
            f"{leg(self.home_city, city, out)}\n\nCheck-in opens 24 hours before departure.\n\n{a.name} Customer Care",
            "fact",
        )  # fmt: skip
        ref2 = self._code("", "ABCDEFGHJKLMNPQRSTUVWXYZ23456789", 6)
        ret = self._add(
            a, [self.owner], booked + timedelta(minutes=rng.randint(2, 30)), f"Booking confirmation {ref2}: {city} to {self.home_city}",
            f"Dear {self.owner.name},\n\nThank you for booking with {a.name}. Your booking reference is {ref2}.\n\n"
            f"{leg(city, self.home_city, back)}\n\nCheck-in opens 24 hours before departure.\n\n{a.name} Customer Care",
            "distractor",
        )  # fmt: skip
        drafts = [ret]
        other = rng.choice([c for c in V.CITIES if c != city])
        if self._key("flight", other):
            ref3 = self._code("", "ABCDEFGHJKLMNPQRSTUVWXYZ23456789", 6)
            t = self._slot(self._day(0, N_DAYS - 30), 7, 40)
            while t.date() == out.date():
                t = self._slot(self._day(0, N_DAYS - 30), 7, 40)
            drafts.append(self._add(
                a, [self.owner], self._any_time(self._day(0, N_DAYS - 30)), f"Booking confirmation {ref3}: {self.home_city} to {other}",
                f"Dear {self.owner.name},\n\nThank you for booking with {a.name}. Your booking reference is {ref3}.\n\n"
                f"{leg(self.home_city, other, t)}\n\nCheck-in opens 24 hours before departure.\n\n{a.name} Customer Care",
                "distractor",
            ))  # fmt: skip
        if rng.random() < 0.5:
            self._question(_QDraft(
                "when", "flight", f"When does my outbound flight from {self.home_city} to {city} depart?",
                f"{out:%Y-%m-%d %H:%M}", "datetime", fact, (f"{self.home_city} to {city}",), (self.home_city, city, "booking"), drafts,
            ))  # fmt: skip
        else:
            self._question(_QDraft(
                "what", "flight_ref", f"What is the booking reference for my flight from {self.home_city} to {city}?",
                ref, "code", fact, (f"{self.home_city} to {city}",), (self.home_city, city, "booking"), drafts,
            ))  # fmt: skip
        return True

    def fact_deadline(self) -> bool:
        rng = self.rng
        project = rng.choice(V.PROJECTS)
        deliverable = rng.choice(V.DELIVERABLES)
        alts = [(project, d) for d in rng.sample(V.DELIVERABLES, 3)] + [
            (p, deliverable) for p in rng.sample(V.PROJECTS, 3)
        ]
        rng.shuffle(alts)
        variants = self._identities("deadline", (project, deliverable), alts, n_extra=2)
        if variants is None:
            return False
        drafts = []
        style = rng.randint(0, 3)
        first_due = START
        for k, (p, d) in enumerate(variants):
            when = self._work_time(self._day(0, N_DAYS - 20))
            due = self._slot(when, 5, 30)
            while k > 0 and due.date() == first_due.date():
                due = self._slot(when, 5, 30)
            if k == 0:
                first_due = due
            body = self._letter(
                self.manager, self.owner,
                rng.choice((f"Please have the {d} for Project {p} ready by {fmt_day(due, style)}.",
                            f"Heads-up: the {d} for Project {p} is due on {fmt_day(due, style)}.")),
                rng.choice(("Leadership wants to review it the week after, so there's not much slack.",
                            "Shout early if that looks tight and we'll find help.")),
            )  # fmt: skip
            drafts.append(
                self._add(
                    self.manager,
                    [self.owner],
                    when,
                    f"Project {p}: {d}",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
            if k == 0:
                answer = f"{due:%Y-%m-%d}"
        self._question(_QDraft(
            "when", "deadline", f"When is the {deliverable} for Project {project} due?",
            answer, "date", drafts[0], (deliverable, f"Project {project}"), (project, *deliverable.split(" ")), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_offsite(self) -> bool:
        rng = self.rng
        team = rng.choice(V.TEAMS)
        month = rng.randint(3, 9)
        alts = [(team, m) for m in rng.sample(range(3, 10), 3)] + [
            (t, month) for t in rng.sample(V.TEAMS, 3)
        ]
        rng.shuffle(alts)
        variants = self._identities("offsite", (team, month), alts, n_extra=2)
        if variants is None:
            return False
        drafts = []
        for k, (t, m) in enumerate(variants):
            venue = self._unique(
                lambda: f"{rng.choice(V.VENUE_PREFIXES)} {rng.choice(V.VENUE_KINDS)}"
            )
            city = rng.choice(V.CITIES)
            when = self._work_time(datetime(2024, max(1, m - 2), rng.randint(1, 25)))
            if when < START:
                when = self._work_time(START + timedelta(days=rng.randint(0, 10)))
            d1 = rng.randint(3, 24)
            body = self._letter(
                self.office,
                self.owner,
                f"Good news: we've booked the {venue} in {city} for the {t} team offsite on {d1}-{d1 + 2} {MONTHS[m - 1]}.",
                "Travel details and the agenda will follow. Please flag any dietary requirements by the end of next week.",
            )
            drafts.append(
                self._add(
                    self.office,
                    [self.owner],
                    when,
                    f"{t} team offsite in {MONTHS[m - 1]}: venue booked",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
            if k == 0:
                answer = venue
        mname = MONTHS[month - 1]
        self._question(_QDraft(
            "where", "offsite", f"Where is the {team} team offsite in {mname} being held (which venue)?",
            answer, "text", drafts[0], (f"{team} team offsite", mname), (team, "offsite", mname), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_dinner(self) -> bool:
        rng = self.rng
        friend = rng.choice(self.friends)
        occasion = rng.choice(V.OCCASIONS)
        picked = self._identities(
            "dinner",
            (friend.name, occasion),
            [(friend.name, o) for o in rng.sample(V.OCCASIONS, 5)],
        )
        if picked is None:
            return False
        variants = [o for _, o in picked]
        drafts = []
        for k, occ in enumerate(variants):
            restaurant = self._unique(lambda: rng.choice(V.RESTAURANTS))
            when = self._any_time(self._day())
            t = when + timedelta(days=rng.randint(2, 12))
            body = self._letter(
                friend,
                self.owner,
                f"I've booked a table at {restaurant} for {occ}, {fmt_day(t, rng.randint(0, 3))} at {rng.choice(('7', '7:30', '8'))}pm.",
                rng.choice(
                    ("Let me know if you're bringing anyone!", "Can't wait - it's been too long.")
                ),
            )
            drafts.append(
                self._add(
                    friend,
                    [self.owner],
                    when,
                    f"Dinner for {occ}",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
            if k == 0:
                answer = restaurant
        self._question(_QDraft(
            "where", "dinner", f"Which restaurant did {friend.name} book for {occasion}?",
            answer, "text", drafts[0], (friend.name, occasion), (*occasion.replace("'s", "").split(" "), "table"), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_parcel(self) -> bool:
        rng = self.rng
        shop = rng.choice(V.SHOPS)
        picked = self._identities(
            "parcel", (shop,), [(s,) for s in rng.sample(V.SHOPS, len(V.SHOPS))]
        )
        if picked is None:
            return False
        shops = [s for (s,) in picked]
        drafts = []
        points = rng.sample(V.PICKUP_POINTS, len(shops))
        for k, s in enumerate(shops):
            when = self._any_time(self._day())
            track = self._code("PP", "0123456789", 9)
            body = (
                f"Hello {self.owner.first},\n\nYour parcel from {s} (tracking number {track}) is ready for collection at "
                f"{points[k]}. Please bring photo ID. We'll keep it for 7 days.\n\n{self.courier.name}"
            )
            drafts.append(
                self._add(
                    self.courier,
                    [self.owner],
                    when,
                    f"Your {s} parcel is ready for collection",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
        p = points[0]
        self._question(_QDraft(
            "where", "parcel", f"Where can I collect my parcel from {shop}?",
            p[4:] if p.startswith("the ") else p, "text", drafts[0], (shop, "collect"), (*shop.replace("&", "").split(), "collection"), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_interview(self) -> bool:
        rng = self.rng
        role = rng.choice(V.ROLES)
        candidates = [self._person_name() for _ in range(2)]
        rooms = rng.sample(ROOMS, 2)
        drafts = []
        for k, cand in enumerate(candidates):
            when = self._work_time(self._day(0, N_DAYS - 15))
            t = self._slot(when, 2, 10)
            body = self._letter(
                self.recruiter, self.owner,
                f"{cand}'s onsite interview for the {role} role is on {fmt_day(t, rng.randint(0, 3))} at {fmt_time(t, rng.randint(0, 2))} "
                f"in the {rooms[k]} room ({rng.choice(FLOORS)} floor).",
                "You're on the panel for the second round. The CV and scorecard are in the hiring folder.",
            )  # fmt: skip
            drafts.append(
                self._add(
                    self.recruiter,
                    [self.owner],
                    when,
                    f"Interview: {cand} ({role})",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
        self._question(_QDraft(
            "where", "interview", f"In which room is {candidates[0]}'s interview for the {role} role?",
            f"{rooms[0]} room", "text", drafts[0], (candidates[0],), (*candidates[0].split(" "), "interview", *role.split(" ")), drafts[1:],
            aliases=(rooms[0],),
        ))  # fmt: skip
        return True

    def fact_presenter(self) -> bool:
        rng = self.rng
        month = rng.randint(1, 7)
        picked = self._identities("allhands", (month,), [(m,) for m in rng.sample(range(1, 8), 7)])
        if picked is None:
            return False
        topic = rng.choice(V.TOPICS)
        months = [m for (m,) in picked]
        drafts: list[_Draft] = []
        answer = ""
        for k, m in enumerate(months):
            topics = [topic] + rng.sample([t for t in V.TOPICS if t != topic], 2)
            rng.shuffle(topics)
            pool = self.peers if k == 0 else [p for p in self.peers if p.name != answer]
            presenters = rng.sample(pool, 3)
            when = self._work_time(datetime(2024, m, rng.randint(1, 12)))
            if when < START:
                when = self._work_time(START + timedelta(days=rng.randint(0, 5)))
            agenda = "\n".join(
                f"{i + 2}. {tp.capitalize()} update - {pr.name}"
                for i, (tp, pr) in enumerate(zip(topics, presenters, strict=True))
            )
            body = self._letter(
                self.manager, self.owner,
                f"Here is the agenda for the {MONTHS[m - 1]} all-hands:\n\n1. Welcome - {self.manager.name}\n{agenda}\n5. Q&A",
                "Presenters: please send me your slides two days before.",
            )  # fmt: skip
            drafts.append(
                self._add(
                    self.manager,
                    [self.owner],
                    when,
                    f"{MONTHS[m - 1]} all-hands: agenda",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
            if k == 0:
                answer = presenters[topics.index(topic)].name
        mname = MONTHS[month - 1]
        self._question(_QDraft(
            "who", "presenter", f"Who is presenting the {topic} update at the {mname} all-hands?",
            answer, "text", drafts[0], (topic, f"{mname} all-hands"), (mname, "all-hands", "agenda"), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_handover(self) -> bool:
        rng = self.rng
        sender = rng.choice(self.peers)
        project = rng.choice(V.PROJECTS)
        picked = self._identities(
            "handover",
            (sender.name, project),
            [(sender.name, p) for p in rng.sample(V.PROJECTS, 5)],
        )
        if picked is None:
            return False
        projects = [p for _, p in picked]
        drafts: list[_Draft] = []
        answer = ""
        for k, p in enumerate(projects):
            cover = rng.choice(
                [c for c in self.peers if c != sender and (k == 0 or c.name != answer)]
            )
            when = self._work_time(self._day())
            leave = when + timedelta(days=rng.randint(3, 20))
            body = self._letter(
                sender,
                self.owner,
                f"I'm on leave from {fmt_day(leave, 2)} for two weeks. While I'm away, {cover.name} will cover Project {p}.",
                "Everything is in the project tracker; anything urgent can go to my manager.",
            )
            drafts.append(
                self._add(
                    sender,
                    [self.owner],
                    when,
                    f"Out of office: cover for Project {p}",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
            if k == 0:
                answer = cover.name
        self._question(_QDraft(
            "who", "handover", f"Who will cover Project {project} while {sender.name} is on leave?",
            answer, "text", drafts[0], (f"Project {project}", sender.name, "leave"), (project, "leave", "cover"), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_new_hire(self) -> bool:
        rng = self.rng
        team = rng.choice(V.TEAMS)
        role = rng.choice(V.ROLES)
        variants = self._identities(
            "hire", (team, role), [(t, role) for t in rng.sample(V.TEAMS, 4)]
        )
        if variants is None:
            return False
        drafts = []
        for k, (t, r) in enumerate(variants):
            hire = self._person_name()
            when = self._work_time(self._day())
            start = self._slot(when, 7, 30)
            body = self._letter(
                self.recruiter,
                self.owner,
                f"Happy to share that {hire} has accepted our offer and joins the {t} team as {r} on {fmt_day(start, rng.randint(0, 3))}.",
                "Please make them feel welcome - a buddy and onboarding plan will follow.",
            )
            drafts.append(
                self._add(
                    self.recruiter,
                    [self.owner],
                    when,
                    f"New starter: {r}, {t} team",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
            if k == 0:
                answer = hire
        self._question(_QDraft(
            "who", "new_hire", f"Who is joining the {team} team as {role}?",
            answer, "text", drafts[0], (f"{team} team", role), (team, *role.split(" "), "starter"), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_hotel(self) -> bool:
        rng = self.rng
        city = rng.choice(V.CITIES)
        picked = self._identities("hotel", (city,), [(c,) for c in rng.sample(V.CITIES, 6)])
        if picked is None:
            return False
        cities = [c for (c,) in picked]
        drafts = []
        for k, c in enumerate(cities):
            hotel = self._unique(lambda: f"{rng.choice(V.VENUE_PREFIXES)} Hotel")
            conf = self._code("", "0123456789", 10)
            when = self._any_time(self._day(0, N_DAYS - 20))
            arrive = when + timedelta(days=rng.randint(5, 40))
            body = (
                f"Dear {self.owner.name},\n\nYour booking at the {hotel}, {c} is confirmed.\n\n"
                f"Confirmation number: {conf}\nCheck-in: {fmt_day(arrive, 2, year=True)}, from 15:00\n"
                f"Nights: {rng.randint(1, 4)}\n\nFree cancellation until 48 hours before arrival.\n\n{self.hotels.name}"
            )
            drafts.append(
                self._add(
                    self.hotels,
                    [self.owner],
                    when,
                    f"Your booking at the {hotel}, {c} is confirmed",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
            if k == 0:
                answer, hotel0 = conf, hotel
        self._question(_QDraft(
            "what", "hotel", f"What is the confirmation number for my stay at the {hotel0} in {city}?",
            answer, "code", drafts[0], (hotel0, city), (*hotel0.split(" "), city), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_wifi(self) -> bool:
        rng = self.rng
        city = rng.choice(V.CITIES)
        picked = self._identities("wifi", (city,), [(c,) for c in rng.sample(V.CITIES, 6)])
        if picked is None:
            return False
        cities = [c for (c,) in picked]
        drafts = []
        words = (
            "harbor",
            "copper",
            "maple",
            "falcon",
            "orbit",
            "pepper",
            "quartz",
            "tango",
            "violet",
            "walnut",
        )
        for k, c in enumerate(cities):
            pw = self._unique(
                lambda: (
                    f"{rng.choice(words).capitalize()}-{rng.randint(1000, 9999)}-{rng.choice(words)}"
                )
            )
            when = self._work_time(self._day())
            body = self._letter(
                self.office,
                self.owner,
                f"For anyone visiting the {c} office: the guest Wi-Fi network is {self.org_slug.upper()}-Guest and the password is {pw}.",
                "Please don't share it outside the company; it rotates every quarter.",
            )
            drafts.append(
                self._add(
                    self.office,
                    [self.owner],
                    when,
                    f"Guest Wi-Fi at the {c} office",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
            if k == 0:
                answer = pw
        self._question(_QDraft(
            "what", "wifi", f"What is the guest Wi-Fi password for the {city} office?",
            answer, "code", drafts[0], (f"{city} office", "Wi-Fi"), (city, "wi-fi", "password"), drafts[1:],
        ))  # fmt: skip
        return True

    def fact_po(self) -> bool:
        rng = self.rng
        vendor, _, services = rng.choice(self.vendors)
        service = rng.choice(services)[0]
        alts = [(v, s[0]) for v, _, ss in self.vendors for s in ss]
        rng.shuffle(alts)
        variants = self._identities("po", (vendor, service), alts)
        if variants is None:
            return False
        drafts = []
        for k, (v, s) in enumerate(variants):
            po = self._code("PO-", "0123456789", 6)
            when = self._work_time(self._day())
            body = self._letter(
                self.procurement,
                self.owner,
                f"The purchase order for {v} ({s}) has been approved. The PO number is {po}.",
                "Please pass it on to the vendor so it appears on their invoices.",
            )
            drafts.append(
                self._add(
                    self.procurement,
                    [self.owner],
                    when,
                    f"PO approved: {v} - {s}",
                    body,
                    "fact" if k == 0 else "distractor",
                )
            )
            if k == 0:
                answer = po
        self._question(_QDraft(
            "what", "po", f"What is the purchase order number for {vendor} ({service})?",
            answer, "code", drafts[0], (vendor, service), (vendor.split(" ")[0], *service.split(" "), "PO"), drafts[1:],
            aliases=(answer.removeprefix("PO-"),),
        ))  # fmt: skip
        return True

    SCENARIOS = (
        "fact_invoice", "fact_expense", "fact_quote", "fact_meeting_moved", "fact_flight",
        "fact_deadline", "fact_offsite", "fact_dinner", "fact_parcel", "fact_interview",
        "fact_presenter", "fact_handover", "fact_new_hire", "fact_hotel", "fact_wifi", "fact_po",
    )  # fmt: skip

    # ------------------------------------------------------------------ noise
    def noise_thread(self) -> None:
        rng = self.rng
        subject_t, body_t = rng.choice(THREAD_OPENERS)
        others = rng.sample(self.colleagues, rng.randint(1, 3))
        if rng.random() < 0.2:
            others.append(rng.choice(rng.choice(self.partners)[2]))
        slots = self._slots()
        subject = subject_t.format(**slots)
        starter = self.owner if rng.random() < 0.3 else others[0]
        to = [p for p in [self.owner, *others] if p != starter]
        first = self._add(starter, to[:1], self._work_time(self._day()), subject,
                          self._letter(starter, to[0], body_t.format(**slots)), "thread", cc=to[1:])  # fmt: skip
        cur = first
        people = [self.owner, *others]
        for _ in range(rng.choice((0, 1, 1, 2, 2, 3, 4))):
            sender = rng.choice([p for p in people if p != cur.sender])
            text = self._letter(
                sender, cur.sender, rng.choice(REPLIES).format(f=cur.sender.first, **slots)
            )
            cur = self._reply(cur, sender, text, "thread", delay_minutes=(10, 1800))
        if rng.random() < 0.12:
            target = rng.choice([p for p in self.colleagues if p not in people] or self.colleagues)
            fwd_sender = self.owner if rng.random() < 0.5 else rng.choice(others)
            note = rng.choice(FORWARD_NOTES).format(f=target.first)
            body = (
                f"{note}\n\n{fwd_sender.first}\n\n---------- Forwarded message ---------\nFrom: {cur.sender.address}\n"
                f"Date: {_header_date(cur.when)}\nSubject: {cur.subject}\nTo: {', '.join(p.address for p in cur.to)}\n\n{cur.body}"
            )
            to_ = [target] if fwd_sender == self.owner else [self.owner]
            self._add(
                fwd_sender,
                to_,
                cur.when + timedelta(minutes=rng.randint(30, 3000)),
                f"Fwd: {cur.subject}",
                body,
                "thread",
            )

    def noise_personal(self) -> None:
        rng = self.rng
        subject_t, body_t = rng.choice(PERSONAL_OPENERS)
        friend = rng.choice(self.friends + self.family)
        slots = self._slots()
        subject = subject_t.format(**slots)
        starter, other = (friend, self.owner) if rng.random() < 0.7 else (self.owner, friend)
        first = self._add(starter, [other], self._any_time(self._day()), subject,
                          f"Hi {other.first}!\n\n{body_t.format(**slots)}\n\n{starter.first}", "personal")  # fmt: skip
        cur = first
        for _ in range(rng.choice((0, 1, 1, 2))):
            sender = other if cur.sender == starter else starter
            cur = self._reply(
                cur,
                sender,
                f"{rng.choice(PERSONAL_REPLIES)}\n\n{sender.first}",
                "personal",
                delay_minutes=(15, 2000),
                quote=rng.random() < 0.6,
            )

    def noise_notification(self) -> None:
        rng = self.rng
        kind = rng.choice(
            ("pr", "pr", "ci", "calendar", "calendar", "bank", "bank", "signin", "hr", "shipping")
        )
        day = self._day()
        o = self.owner
        if kind == "pr":
            repo, n, title = rng.choice(V.REPOS), rng.randint(100, 4999), rng.choice(V.PR_TITLES)
            who = rng.choice(self.peers)
            body = (f"{who.name} requested your review on this pull request.\n\n{rng.randint(1, 9)} commits, "
                    f"{rng.randint(1, 30)} files changed.\n\nView it on CodeHarbor: https://codeharbor.dev/{self.org_slug}/{repo}/pull/{n}\n\n"
                    "You are receiving this because your review was requested.")  # fmt: skip
            self._add(
                self.codehost,
                [o],
                self._work_time(day),
                f"[{self.org_slug}/{repo}] {title} (#{n})",
                body,
                "notification",
            )
        elif kind == "ci":
            repo = rng.choice(V.REPOS)
            sha = "".join(rng.choice("0123456789abcdef") for _ in range(7))
            status = rng.choice(("failed", "succeeded", "failed"))
            body = f"Run {status}: nightly build on main ({sha}).\n\nJob: test ({rng.choice(('unit', 'integration', 'lint'))})\nDuration: {rng.randint(2, 40)}m {rng.randint(0, 59)}s"
            self._add(
                self.codehost,
                [o],
                self._any_time(day),
                f"[{self.org_slug}/{repo}] Run {status}: nightly build - main ({sha})",
                body,
                "notification",
            )
        elif kind == "calendar":
            meeting = rng.choice(V.INTERNAL_MEETINGS)
            organizer = rng.choice(self.colleagues)
            t = self._slot(day, 1, 10)
            end = t + timedelta(minutes=rng.choice((30, 45, 60)))
            body = (f"{organizer.name} has invited you to: {meeting.capitalize()}\n\nWhen: {fmt_day(t, 2, year=True)} "
                    f"{fmt_time(t, 0)}-{fmt_time(end, 0)}\nWhere: {rng.choice(ROOMS)} room\n\nGoing? Yes - Maybe - No")  # fmt: skip
            self._add(
                self.calendar,
                [o],
                self._work_time(day),
                f"Invitation: {meeting.capitalize()} @ {fmt_day(t, 2)} {fmt_time(t, 0)}",
                body,
                "notification",
            )
        elif kind == "bank":
            amount = self._amount(3, 240)
            merchant = rng.choice(V.MERCHANTS)
            body = (f"A card payment of {amount} was made at {merchant} using your card ending {rng.randint(1000, 9999)}.\n\n"
                    "If you don't recognise this payment, call us on the number on the back of your card.")  # fmt: skip
            self._add(
                self.bank,
                [o],
                self._any_time(day),
                f"Card payment of {amount} at {merchant}",
                body,
                "notification",
            )
        elif kind == "signin":
            browser = rng.choice(("Chrome", "Firefox", "Safari", "Edge"))
            osname = rng.choice(("Windows", "macOS", "Linux", "Android", "iOS"))
            body = (f"We noticed a new sign-in to your {self.org} account from {browser} on {osname} near {rng.choice(V.CITIES + V.HOME_CITIES)}.\n\n"
                    "If this was you, no action is needed. Otherwise, reset your password right away.")  # fmt: skip
            self._add(
                self.security,
                [o],
                self._any_time(day),
                "New sign-in to your account",
                body,
                "notification",
            )
        elif kind == "hr":
            if rng.random() < 0.5:
                wk = (day - START).days // 7 + 2
                subject, body = (
                    f"Reminder: submit your timesheet for week {wk}",
                    f"Hi {o.first}, your timesheet for week {wk} is still open. Please submit it by Friday.\n\nPeopleDesk",
                )
            else:
                mo = MONTHS[(day.month - 2) % 12]
                subject, body = (
                    f"Your payslip for {mo} is available",
                    f"Hi {o.first}, your payslip for {mo} is now available in PeopleDesk.\n\nPeopleDesk",
                )
            self._add(self.hr, [o], self._work_time(day), subject, body, "notification")
        else:
            shop = rng.choice(V.SHOPS)
            n = rng.randint(10000, 99999)
            domain = shop.lower().replace(" & ", "and").replace(" ", "") + ".com"
            sender = Person(shop, f"orders@{domain}", shop)
            body = f"Hi {o.first},\n\nGood news - your order #{n} has shipped and should arrive by {rng.choice(WEEKDAYS)}.\n\nThanks for shopping with {shop}."
            self._add(
                sender,
                [o],
                self._any_time(day),
                f"Your {shop} order #{n} has shipped",
                body,
                "notification",
            )

    def newsletters(self) -> None:
        rng = self.rng
        for title, addr, _theme in rng.sample(V.NEWSLETTERS, rng.randint(5, 7)):
            sender = Person(title, addr, title)
            weekday = rng.randint(0, 6)
            every = rng.choice((7, 7, 14))
            day = START + timedelta(days=(weekday - START.weekday()) % 7)
            issue = rng.randint(40, 300)
            while day < START + timedelta(days=N_DAYS):
                heads = []
                for _ in range(rng.randint(3, 4)):
                    h = rng.choice(V.HEADLINE_TEMPLATES).format(
                        company=rng.choice(V.COMPANIES)[0], sector=rng.choice(V.COMPANIES)[2],
                        practice=rng.choice(V.PRACTICES), city=rng.choice(V.CITIES),
                    )  # fmt: skip
                    heads.append(
                        f"* {h[0].upper() + h[1:]}\n  {rng.choice(('A short read on what changed and why it matters.', 'Our take, plus three links worth your time.', 'We asked five practitioners what they would do differently.', 'The numbers, the caveats, and what to watch next.'))}"
                    )
                body = (f"{title} - Issue #{issue}\n\nThis week:\n\n" + "\n\n".join(heads)
                        + f"\n\nYou are receiving this because you subscribed to {title}. Unsubscribe: https://{addr.split('@')[1]}/unsubscribe")  # fmt: skip
                self._add(
                    sender,
                    [self.owner],
                    day.replace(hour=rng.randint(6, 9), minute=rng.choice((0, 0, 30))),
                    f"{title} #{issue}: {heads[0][2:].split(chr(10))[0]}",
                    body,
                    "newsletter",
                )
                issue += 1
                day += timedelta(days=every)

    def noise_promotion(self) -> None:
        rng = self.rng
        shop, addr = rng.choice(V.PROMO_SENDERS)
        pct = rng.choice((10, 15, 20, 25, 30, 40))
        body = (f"{pct}% off {rng.choice(('everything', 'bestsellers', 'new arrivals', 'our summer range'))} this weekend only.\n\n"
                f"Use code SAVE{pct} at checkout. Free delivery on orders over {self._amount(30, 120)}.\n\nUnsubscribe anytime.")  # fmt: skip
        self._add(
            Person(shop, addr, shop),
            [self.owner],
            self._any_time(self._day()),
            f"{shop}: {pct}% off this weekend",
            body,
            "promotion",
        )

    # ------------------------------------------------------------------ assemble
    def build(self) -> Inbox:
        rng = self.rng
        for name in self.SCENARIOS:
            made, tries = 0, 0
            while made < self.facts_per_scenario and tries < 40:
                tries += 1
                made += bool(getattr(self, name)())
        self.newsletters()
        while len(self.drafts) < self.n_emails:
            r = rng.random()
            if r < 0.4:
                self.noise_thread()
            elif r < 0.82:
                self.noise_notification()
            elif r < 0.92:
                self.noise_personal()
            else:
                self.noise_promotion()
        self.drafts.sort(key=lambda d: (d.when, d.seq))
        ids = {d.seq: f"{self.inbox_id}-{k:05d}" for k, d in enumerate(self.drafts)}
        threads: dict[int, str] = {}
        emails = []
        for d in self.drafts:
            tid = threads.setdefault(d.thread, f"{self.inbox_id}-t{len(threads):04d}")
            emails.append(Email(
                id=ids[d.seq], thread_id=tid, sender_name=d.sender.name, sender_email=d.sender.email,
                to=tuple(p.address for p in d.to), cc=tuple(p.address for p in d.cc),
                date=f"{d.when:%Y-%m-%d %H:%M}", subject=d.subject, body=d.body, kind=d.kind,
            ))  # fmt: skip
        questions = []
        for k, q in enumerate(self.questions):
            questions.append(Question(
                id=f"{self.inbox_id}-q{k:03d}", inbox_id=self.inbox_id, split=self.split, qtype=q.qtype,
                scenario=q.scenario, question=q.question, answer=q.answer, answer_kind=q.answer_kind,
                aliases=q.aliases, source_id=ids[q.source.seq], sender_email=q.source.sender.email,
                key_terms=q.key_terms, keywords=tuple(w.lower() for w in q.keywords),
                distractor_ids=tuple(ids[d.seq] for d in q.distractors),
            ))  # fmt: skip
        last = max(d.when for d in self.drafts)
        today = (last + timedelta(days=1)).strftime("%Y-%m-%d")
        return Inbox(self.inbox_id, self.split, self.owner, today, emails, questions)


def generate_inbox(
    seed: int, index: int, n_emails: int = 2000, split: str = "train", facts_per_scenario: int = 5
) -> Inbox:
    """One inbox. Deterministic in ``(seed, index, n_emails, facts_per_scenario)``.

    ``n_emails`` is a minimum: the inbox gets at least that many emails (more if the facts and
    their distractors alone exceed it). ``split`` is only recorded on the questions.
    """
    return _Builder(seed, index, n_emails, split, facts_per_scenario).build()


def inbox_splits(n_inboxes: int = 6, n_test: int = 2) -> list[str]:
    """Split of each inbox index: the last ``n_test`` inboxes are the test split."""
    if not 0 < n_test < n_inboxes:
        raise ValueError(f"n_test must be between 1 and n_inboxes-1, got {n_test} of {n_inboxes}")
    return ["train"] * (n_inboxes - n_test) + ["test"] * n_test


def generate_corpus(
    seed: int = 0,
    n_inboxes: int = 6,
    n_emails: int = 2000,
    n_test: int = 2,
    facts_per_scenario: int = 5,
) -> list[Inbox]:
    """All inboxes of a corpus; train/test split by inbox (see ``inbox_splits``)."""
    splits = inbox_splits(n_inboxes, n_test)
    return [
        generate_inbox(seed, i, n_emails, splits[i], facts_per_scenario) for i in range(n_inboxes)
    ]
