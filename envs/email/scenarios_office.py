"""Fact scenarios whose facts come from colleagues: deadlines, offsites, interviews, all-hands
presenters, leave cover, new starters, office Wi-Fi, expense approvals.

Import path: ``rankgym.envs.email.scenarios_office``. Same contract as ``scenarios.py`` (which
lists every scenario, in order, in ``SCENARIOS``): a callable of a ``Builder`` that returns
False, adding nothing, when it cannot reserve an unused identity. All but ``expense`` (a thread
of submission and approval) are ``facts.FactScenario`` rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from rankgym.envs.email import vocab as V
from rankgym.envs.email.builder import Builder, Draft
from rankgym.envs.email.facts import FactScenario, Slots
from rankgym.envs.email.templates import FLOORS, ROOMS, fmt_day, fmt_time
from rankgym.envs.email.types import MONTHS, N_DAYS

WIFI_WORDS = ("harbor", "copper", "maple", "falcon", "orbit", "pepper", "quartz", "tango", "violet", "walnut")  # fmt: skip
Picked = tuple[Slots, Sequence[Any] | None]


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


def _deadline_pick(b: Builder) -> Picked:
    rng = b.rng
    project = rng.choice(V.PROJECTS)
    deliverable = rng.choice(V.DELIVERABLES)
    alts = [(project, d) for d in rng.sample(V.DELIVERABLES, 3)] + [
        (p, deliverable) for p in rng.sample(V.PROJECTS, 3)
    ]
    rng.shuffle(alts)
    variants = b.identities("deadline", (project, deliverable), alts, n_extra=2)
    if variants is None:
        return {}, None
    style = rng.randint(0, 3)
    return {"sender": b.manager, "project": project, "deliverable": deliverable,
            "style": style}, variants  # fmt: skip


def _deadline_letter(b: Builder, s: Slots, k: int, variant: tuple[str, str]) -> Slots:
    when = b.work_time(b.day(0, N_DAYS - 20))
    due = b.slot(when, 5, 30)
    while k > 0 and due.date() == s["due"].date():  # never the fact's date
        due = b.slot(when, 5, 30)
    return {"this_project": variant[0], "this_deliverable": variant[1], "when": when,
            "due": due, "due_day": fmt_day(due, s["style"])}  # fmt: skip


deadline = FactScenario("deadline", _deadline_pick, _deadline_letter)


def _offsite_pick(b: Builder) -> Picked:
    rng = b.rng
    team = rng.choice(V.TEAMS)
    month = rng.randint(3, 9)
    alts = [(team, m) for m in rng.sample(range(3, 10), 3)] + [
        (t, month) for t in rng.sample(V.TEAMS, 3)
    ]
    rng.shuffle(alts)
    variants = b.identities("offsite", (team, month), alts, n_extra=2)
    return {"sender": b.office, "team": team, "month": MONTHS[month - 1]}, variants


def _offsite_letter(b: Builder, s: Slots, k: int, variant: tuple[str, int]) -> Slots:
    rng = b.rng
    team, m = variant
    venue = b.unique(lambda: f"{rng.choice(V.VENUE_PREFIXES)} {rng.choice(V.VENUE_KINDS)}")
    city = rng.choice(V.CITIES)
    when = b.work_time_in(max(1, m - 2), 25, spill_days=10)
    first_day = rng.randint(3, 24)
    return {"this_team": team, "this_month": MONTHS[m - 1], "venue": venue, "city": city,
            "when": when, "first_day": first_day, "last_day": first_day + 2}  # fmt: skip


offsite = FactScenario("offsite", _offsite_pick, _offsite_letter)


def _interview_pick(b: Builder) -> Picked:
    role = b.rng.choice(V.ROLES)
    candidates = [b.person_name() for _ in range(2)]
    rooms = b.rng.sample(ROOMS, 2)
    return {"sender": b.recruiter, "role": role, "candidate": candidates[0], "rooms": rooms,
            "room": rooms[0]}, candidates  # fmt: skip


def _interview_letter(b: Builder, s: Slots, k: int, candidate: str) -> Slots:
    rng = b.rng
    when = b.work_time(b.day(0, N_DAYS - 15))
    t = b.slot(when, 2, 10)
    day, time = fmt_day(t, rng.randint(0, 3)), fmt_time(t, rng.randint(0, 2))
    return {"this_candidate": candidate, "when": when, "day": day, "time": time,
            "this_room": s["rooms"][k], "floor": rng.choice(FLOORS)}  # fmt: skip


interview = FactScenario("interview", _interview_pick, _interview_letter)


def _presenter_pick(b: Builder) -> Picked:
    month = b.rng.randint(1, 7)
    picked = b.identities("allhands", (month,), [(m,) for m in b.rng.sample(range(1, 8), 7)])
    if picked is None:
        return {}, None
    topic = b.rng.choice(V.TOPICS)
    return {"sender": b.manager, "topic": topic, "month": MONTHS[month - 1]}, picked


def _presenter_letter(b: Builder, s: Slots, k: int, variant: tuple[int]) -> Slots:
    rng, topic = b.rng, s["topic"]
    topics = [topic] + rng.sample([t for t in V.TOPICS if t != topic], 2)
    rng.shuffle(topics)
    # the fact's presenter: no distractor names them
    pool = b.peers if k == 0 else [p for p in b.peers if p.name != s["presenter"]]
    presenters = rng.sample(pool, 3)
    when = b.work_time_in(variant[0], 12, spill_days=5)
    agenda = "\n".join(
        f"{i + 2}. {tp.capitalize()} update - {pr.name}"
        for i, (tp, pr) in enumerate(zip(topics, presenters, strict=True))
    )
    return {"this_month": MONTHS[variant[0] - 1], "when": when, "agenda": agenda,
            "presenter": presenters[topics.index(topic)].name}  # fmt: skip


presenter = FactScenario("presenter", _presenter_pick, _presenter_letter)


def _handover_pick(b: Builder) -> Picked:
    sender, project, picked = b.one_of("handover", b.peers, V.PROJECTS, 5)
    return {"sender": sender, "colleague": sender.name, "project": project}, picked


def _handover_letter(b: Builder, s: Slots, k: int, variant: tuple[str, str]) -> Slots:
    rng = b.rng
    # the fact's cover: no distractor names them
    others = [c for c in b.peers if c != s["sender"] and (k == 0 or c.name != s["cover"])]
    cover = rng.choice(others)
    when = b.work_time(b.day())
    leave = when + timedelta(days=rng.randint(3, 20))
    return {"this_project": variant[1], "cover": cover.name, "when": when,
            "leave": fmt_day(leave, 2)}  # fmt: skip


handover = FactScenario("handover", _handover_pick, _handover_letter)


def _new_hire_pick(b: Builder) -> Picked:
    team = b.rng.choice(V.TEAMS)
    role = b.rng.choice(V.ROLES)
    variants = b.identities("hire", (team, role), [(t, role) for t in b.rng.sample(V.TEAMS, 4)])
    return {"sender": b.recruiter, "team": team, "role": role}, variants


def _new_hire_letter(b: Builder, s: Slots, k: int, variant: tuple[str, str]) -> Slots:
    hire = b.person_name()
    when = b.work_time(b.day())
    start = b.slot(when, 7, 30)
    return {"this_team": variant[0], "this_role": variant[1], "hire": hire, "when": when,
            "start": fmt_day(start, b.rng.randint(0, 3))}  # fmt: skip


new_hire = FactScenario("new_hire", _new_hire_pick, _new_hire_letter)


def _wifi_pick(b: Builder) -> Picked:
    city = b.rng.choice(V.CITIES)
    picked = b.identities("wifi", (city,), [(c,) for c in b.rng.sample(V.CITIES, 6)])
    return {"sender": b.office, "city": city, "network": f"{b.org_slug.upper()}-Guest"}, picked


def _wifi_letter(b: Builder, s: Slots, k: int, variant: tuple[str]) -> Slots:
    rng, w = b.rng, WIFI_WORDS
    pw = b.unique(lambda: f"{rng.choice(w).capitalize()}-{rng.randint(1000, 9999)}-{rng.choice(w)}")
    return {"this_city": variant[0], "pw": pw, "when": b.work_time(b.day())}


wifi = FactScenario("wifi", _wifi_pick, _wifi_letter)
