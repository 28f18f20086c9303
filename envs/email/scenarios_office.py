"""Fact scenarios whose facts come from colleagues: deadlines, offsites, interviews, all-hands
presenters, leave cover, new starters, office Wi-Fi, expense approvals.

Import path: ``rankgym.envs.email.scenarios_office``. Same contract as ``scenarios.py`` (which
lists every scenario, in order, in ``SCENARIOS``): a function of a ``Builder`` that returns
False, adding nothing, when it cannot reserve an unused identity.
"""

from __future__ import annotations

from datetime import timedelta

from rankgym.envs.email import vocab as V
from rankgym.envs.email.builder import Builder, Draft, Letter
from rankgym.envs.email.templates import FLOORS, ROOMS, fmt_day, fmt_time
from rankgym.envs.email.types import MONTHS, N_DAYS, START

WIFI_WORDS = ("harbor", "copper", "maple", "falcon", "orbit", "pepper", "quartz", "tango", "violet", "walnut")  # fmt: skip


def expense(b: Builder) -> bool:
    rng = b.rng
    city = rng.choice(V.CITIES)
    picked = b.identities("trip", (city,), [(c,) for c in rng.sample(V.CITIES, 6)])
    if picked is None:
        return False
    drafts: list[Draft] = []
    answer = ""
    for k, (c,) in enumerate(picked):
        start = b.day(5, N_DAYS - 40)
        trip_end = start + timedelta(days=rng.randint(1, 4))
        sub = b.add(
            b.owner, [b.finance], b.work_time(trip_end + timedelta(days=rng.randint(1, 5))),
            f"Expense report - {c} trip",
            b.letter(b.owner, b.finance,
                     f"Submitting my expenses for the {c} trip ({fmt_day(start, 2)} to {fmt_day(trip_end, 2)}). "
                     "Receipts for the hotel, flights and meals are attached.",
                     "Let me know if anything is missing."),
            "thread",
        )  # fmt: skip
        amount = b.amount(300, 4200)
        payroll = MONTHS[min(sub.when.month, 12) % 12]
        body = b.letter(
            b.finance, b.owner,
            rng.choice((f"Your expenses for the {c} trip have been approved. {amount} will be reimbursed with the {payroll} payroll.",
                        f"Approved: {amount} for the {c} trip, to be reimbursed with the {payroll} payroll run.")),
            rng.choice(("One note for next time: please use the corporate card for hotels where possible.", "Thanks for getting this in on time.")),
        )  # fmt: skip
        drafts.append(b.reply(sub, b.finance, body, "fact" if k == 0 else "distractor"))
        answer = answer or amount
    question = rng.choice((f"How much was approved for reimbursement for my {city} trip?",
                           f"What amount will I be reimbursed for the {city} trip?"))  # fmt: skip
    terms, keywords = (f"{city} trip",), (city, "trip", "approved")
    return b.ask(drafts, "how much", "expense", question, answer, "amount", terms, keywords)


def deadline(b: Builder) -> bool:
    rng = b.rng
    project = rng.choice(V.PROJECTS)
    deliverable = rng.choice(V.DELIVERABLES)
    alts = [(project, d) for d in rng.sample(V.DELIVERABLES, 3)] + [
        (p, deliverable) for p in rng.sample(V.PROJECTS, 3)
    ]
    rng.shuffle(alts)
    variants = b.identities("deadline", (project, deliverable), alts, n_extra=2)
    if variants is None:
        return False
    style = rng.randint(0, 3)
    first_due = START

    def write(k: int, variant: tuple[str, str]) -> Letter:
        nonlocal first_due
        p, d = variant
        when = b.work_time(b.day(0, N_DAYS - 20))
        due = b.slot(when, 5, 30)
        while k > 0 and due.date() == first_due.date():
            due = b.slot(when, 5, 30)
        if k == 0:
            first_due = due
        return b.note(
            b.manager, when, f"Project {p}: {d}",
            rng.choice((f"Please have the {d} for Project {p} ready by {fmt_day(due, style)}.",
                        f"Heads-up: the {d} for Project {p} is due on {fmt_day(due, style)}.")),
            rng.choice(("Leadership wants to review it the week after, so there's not much slack.",
                        "Shout early if that looks tight and we'll find help.")),
            answer=f"{due:%Y-%m-%d}",
        )  # fmt: skip

    drafts, answer = b.fact_group(variants, write)
    question = f"When is the {deliverable} for Project {project} due?"
    terms, keywords = (deliverable, f"Project {project}"), (project, *deliverable.split(" "))
    return b.ask(drafts, "when", "deadline", question, answer, "date", terms, keywords)


def offsite(b: Builder) -> bool:
    rng = b.rng
    team = rng.choice(V.TEAMS)
    month = rng.randint(3, 9)
    alts = [(team, m) for m in rng.sample(range(3, 10), 3)] + [
        (t, month) for t in rng.sample(V.TEAMS, 3)
    ]
    rng.shuffle(alts)
    variants = b.identities("offsite", (team, month), alts, n_extra=2)
    if variants is None:
        return False

    def write(k: int, variant: tuple[str, int]) -> Letter:
        t, m = variant
        venue = b.unique(lambda: f"{rng.choice(V.VENUE_PREFIXES)} {rng.choice(V.VENUE_KINDS)}")
        city = rng.choice(V.CITIES)
        when = b.work_time_in(max(1, m - 2), 25, spill_days=10)
        d1 = rng.randint(3, 24)
        return b.note(
            b.office, when, f"{t} team offsite in {MONTHS[m - 1]}: venue booked",
            f"Good news: we've booked the {venue} in {city} for the {t} team offsite on {d1}-{d1 + 2} {MONTHS[m - 1]}.",
            "Travel details and the agenda will follow. Please flag any dietary requirements by the end of next week.",
            answer=venue,
        )  # fmt: skip

    drafts, answer = b.fact_group(variants, write)
    mname = MONTHS[month - 1]
    question = f"Where is the {team} team offsite in {mname} being held (which venue)?"
    terms, keywords = (f"{team} team offsite", mname), (team, "offsite", mname)
    return b.ask(drafts, "where", "offsite", question, answer, "text", terms, keywords)


def interview(b: Builder) -> bool:
    rng = b.rng
    role = rng.choice(V.ROLES)
    candidates = [b.person_name() for _ in range(2)]
    rooms = rng.sample(ROOMS, 2)

    def write(k: int, cand: str) -> Letter:
        when = b.work_time(b.day(0, N_DAYS - 15))
        t = b.slot(when, 2, 10)
        return b.note(
            b.recruiter, when, f"Interview: {cand} ({role})",
            f"{cand}'s onsite interview for the {role} role is on {fmt_day(t, rng.randint(0, 3))} at {fmt_time(t, rng.randint(0, 2))} "
            f"in the {rooms[k]} room ({rng.choice(FLOORS)} floor).",
            "You're on the panel for the second round. The CV and scorecard are in the hiring folder.",
        )  # fmt: skip

    drafts, _ = b.fact_group(candidates, write)
    cand = candidates[0]
    question = f"In which room is {cand}'s interview for the {role} role?"
    keywords = (*cand.split(" "), "interview", *role.split(" "))
    return b.ask(
        drafts,
        "where",
        "interview",
        question,
        f"{rooms[0]} room",
        "text",
        (cand,),
        keywords,
        (rooms[0],),
    )


def presenter(b: Builder) -> bool:
    rng = b.rng
    month = rng.randint(1, 7)
    picked = b.identities("allhands", (month,), [(m,) for m in rng.sample(range(1, 8), 7)])
    if picked is None:
        return False
    topic = rng.choice(V.TOPICS)
    first = ""  # the fact's presenter: no distractor names them

    def write(k: int, variant: tuple[int]) -> Letter:
        nonlocal first
        m = variant[0]
        topics = [topic] + rng.sample([t for t in V.TOPICS if t != topic], 2)
        rng.shuffle(topics)
        pool = b.peers if k == 0 else [p for p in b.peers if p.name != first]
        presenters = rng.sample(pool, 3)
        when = b.work_time_in(m, 12, spill_days=5)
        agenda = "\n".join(
            f"{i + 2}. {tp.capitalize()} update - {pr.name}"
            for i, (tp, pr) in enumerate(zip(topics, presenters, strict=True))
        )
        first = first or presenters[topics.index(topic)].name
        return b.note(
            b.manager, when, f"{MONTHS[m - 1]} all-hands: agenda",
            f"Here is the agenda for the {MONTHS[m - 1]} all-hands:\n\n1. Welcome - {b.manager.name}\n{agenda}\n5. Q&A",
            "Presenters: please send me your slides two days before.",
            answer=first,
        )  # fmt: skip

    drafts, answer = b.fact_group(picked, write)
    mname = MONTHS[month - 1]
    question = f"Who is presenting the {topic} update at the {mname} all-hands?"
    terms, keywords = (topic, f"{mname} all-hands"), (mname, "all-hands", "agenda")
    return b.ask(drafts, "who", "presenter", question, answer, "text", terms, keywords)


def handover(b: Builder) -> bool:
    rng = b.rng
    sender = rng.choice(b.peers)
    project, picked = b.one_of("handover", sender.name, V.PROJECTS, 5)
    if picked is None:
        return False
    first = ""  # the fact's cover: no distractor names them

    def write(k: int, variant: tuple[str, str]) -> Letter:
        nonlocal first
        p = variant[1]
        cover = rng.choice([c for c in b.peers if c != sender and (k == 0 or c.name != first)])
        when = b.work_time(b.day())
        leave = when + timedelta(days=rng.randint(3, 20))
        first = first or cover.name
        return b.note(
            sender, when, f"Out of office: cover for Project {p}",
            f"I'm on leave from {fmt_day(leave, 2)} for two weeks. While I'm away, {cover.name} will cover Project {p}.",
            "Everything is in the project tracker; anything urgent can go to my manager.",
            answer=cover.name,
        )  # fmt: skip

    drafts, answer = b.fact_group(picked, write)
    question = f"Who will cover Project {project} while {sender.name} is on leave?"
    terms, keywords = (f"Project {project}", sender.name, "leave"), (project, "leave", "cover")
    return b.ask(drafts, "who", "handover", question, answer, "text", terms, keywords)


def new_hire(b: Builder) -> bool:
    rng = b.rng
    team = rng.choice(V.TEAMS)
    role = rng.choice(V.ROLES)
    variants = b.identities("hire", (team, role), [(t, role) for t in rng.sample(V.TEAMS, 4)])
    if variants is None:
        return False

    def write(k: int, variant: tuple[str, str]) -> Letter:
        t, r = variant
        hire = b.person_name()
        when = b.work_time(b.day())
        start = b.slot(when, 7, 30)
        return b.note(
            b.recruiter, when, f"New starter: {r}, {t} team",
            f"Happy to share that {hire} has accepted our offer and joins the {t} team as {r} on {fmt_day(start, rng.randint(0, 3))}.",
            "Please make them feel welcome - a buddy and onboarding plan will follow.",
            answer=hire,
        )  # fmt: skip

    drafts, answer = b.fact_group(variants, write)
    question = f"Who is joining the {team} team as {role}?"
    terms, keywords = (f"{team} team", role), (team, *role.split(" "), "starter")
    return b.ask(drafts, "who", "new_hire", question, answer, "text", terms, keywords)


def wifi(b: Builder) -> bool:
    rng = b.rng
    city = rng.choice(V.CITIES)
    picked = b.identities("wifi", (city,), [(c,) for c in rng.sample(V.CITIES, 6)])
    if picked is None:
        return False

    def write(k: int, variant: tuple[str]) -> Letter:
        c = variant[0]
        w = WIFI_WORDS
        pw = b.unique(
            lambda: f"{rng.choice(w).capitalize()}-{rng.randint(1000, 9999)}-{rng.choice(w)}"
        )
        when = b.work_time(b.day())
        return b.note(
            b.office, when, f"Guest Wi-Fi at the {c} office",
            f"For anyone visiting the {c} office: the guest Wi-Fi network is {b.org_slug.upper()}-Guest and the password is {pw}.",
            "Please don't share it outside the company; it rotates every quarter.",
            answer=pw,
        )  # fmt: skip

    drafts, answer = b.fact_group(picked, write)
    question = f"What is the guest Wi-Fi password for the {city} office?"
    terms, keywords = (f"{city} office", "Wi-Fi"), (city, "wi-fi", "password")
    return b.ask(drafts, "what", "wifi", question, answer, "code", terms, keywords)
