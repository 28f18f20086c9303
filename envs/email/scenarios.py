"""The 16 fact scenarios: each adds one fact email, its distractors and one question.

Import path: ``rankgym.envs.email.scenarios``. A scenario is a callable of a ``Builder``; it
returns False (and adds nothing) when it cannot reserve an unused identity, and the builder
moves on. ``SCENARIOS`` is the order the builder runs them in: changing the order, or any
random draw inside a scenario, changes every generated inbox (bump ``GENERATOR_VERSION``).
This module holds the facts that come from outside the company (vendors, partners,
contractors, friends, airlines, hotels, couriers); ``scenarios_office`` those from colleagues.

Most scenarios are rows of ``facts.FactScenario``: the words as templates, and two small
functions of random draws, ``pick`` (the fact's identity and its distractors') and ``letter``
(one email's values, in the order the words use them). The ones that need threads
(``expense``, ``meeting_moved``) or differently shaped distractors (``flight``) are functions
that add emails directly. Not covered: facts spread across several emails, or questions with
no answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from rankgym.envs.email import vocab as V
from rankgym.envs.email.builder import Builder, Draft
from rankgym.envs.email.facts import FactScenario, Slots
from rankgym.envs.email.scenarios_office import (
    deadline,
    expense,
    handover,
    interview,
    new_hire,
    offsite,
    presenter,
    wifi,
)
from rankgym.envs.email.templates import fmt_day, fmt_time
from rankgym.envs.email.types import MONTHS, N_DAYS

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
DIGITS = "0123456789"
Picked = tuple[Slots, Sequence[Any] | None]


def _invoice_pick(b: Builder) -> Picked:
    rng = b.rng
    vendor, billing, services = rng.choice(b.vendors)
    (service, lo, hi) = rng.choice(services)
    month = rng.randint(1, 6)
    other_service = [s for s in services if s[0] != service]
    alts = [(service, m) for m in rng.sample(range(1, 7), 6)][:3] + [
        (s[0], month) for s in other_service
    ]
    rng.shuffle(alts)
    variants = b.identities("invoice", (service, month), alts, n_extra=2)
    short = vendor.split(" ")[0]
    return {"sender": billing, "vendor": vendor, "short": short, "service": service,
            "month": MONTHS[month - 1], "prices": services}, variants  # fmt: skip


def _invoice_letter(b: Builder, s: Slots, k: int, variant: tuple[str, int]) -> Slots:
    service, m = variant
    lo, hi = next((lo, hi) for name, lo, hi in s["prices"] if name == service)
    amount = b.amount(lo, hi)
    invoice = b.code("INV-", DIGITS, 5)
    when = b.work_time(datetime(2024, m + 1, b.rng.randint(1, 9)))
    due = when + timedelta(days=30)
    return {"this_service": service, "this_month": MONTHS[m - 1], "amount": amount,
            "inv": invoice, "when": when,
            "due": tuple(fmt_day(due, style, year=True) for style in range(3))}  # fmt: skip


invoice = FactScenario("invoice", _invoice_pick, _invoice_letter)


def _quote_pick(b: Builder) -> Picked:
    contractor, job, picked = b.one_of("quote", b.contractors, V.HOME_JOBS, 6)
    return {"sender": contractor, "contractor": contractor.name, "job": job}, picked


def _quote_letter(b: Builder, s: Slots, k: int, variant: tuple[str, str]) -> Slots:
    amount = b.amount(350, 9500)
    when = b.any_time(b.day())
    start = ("next Monday", "in two weeks", "early next month")
    return {"this_job": variant[1], "amount": amount, "when": when, "start": start}


quote = FactScenario("quote", _quote_pick, _quote_letter)


def meeting_moved(b: Builder) -> bool:
    rng = b.rng
    org, _, people = rng.choice(b.partners)
    meeting = rng.choice(V.EXTERNAL_MEETINGS)
    if not b.key("meeting", org, meeting):
        return False
    contact = rng.choice(people)
    start = b.work_time(b.day(0, N_DAYS - 30))
    old = b.slot(start, 5, 20)
    style, tstyle = rng.randint(0, 3), rng.randint(0, 2)
    first = b.add(
        contact, [b.owner], start, f"{meeting.capitalize()} with {org}",
        b.letter(contact, b.owner,
                 f"Confirming the {meeting} with {org} on {fmt_day(old, style)} at {fmt_time(old, tstyle)}. "
                 "I'll send the agenda a couple of days before.",
                 "Looking forward to it."),
        "distractor",
    )  # fmt: skip
    new = b.slot(first.when, 4, 16)  # the reply comes within 3 days, so this is after it
    while new.date() == old.date():
        new = b.slot(first.when, 4, 16)
    fact = b.reply(
        first, contact,
        b.letter(contact, b.owner,
                 rng.choice((f"Unfortunately we need to move the {meeting} with {org}. New time: {fmt_day(new, style)} at {fmt_time(new, tstyle)}.",
                             f"Small change of plan: the {meeting} with {org} is moved to {fmt_day(new, style)}, {fmt_time(new, tstyle)}. Same dial-in.")),
                 "Sorry for the shuffle - I've updated the calendar invite."),
        "fact", delay_minutes=(600, 4000),
    )  # fmt: skip
    drafts = [fact, first]
    # same sender, same org, another meeting: a near-duplicate with another time
    other = rng.choice([m for m in V.EXTERNAL_MEETINGS if m != meeting])
    if b.key("meeting", org, other):
        t = b.slot(start, 3, 25)
        while t.date() == new.date():
            t = b.slot(start, 3, 25)
        drafts.append(b.add(
            contact, [b.owner], b.work_time(b.day(0, N_DAYS - 30)), f"{other.capitalize()} with {org}",
            b.letter(contact, b.owner, f"Confirming the {other} with {org} on {fmt_day(t, style)} at {fmt_time(t, tstyle)}.", "Talk then."),
            "distractor",
        ))  # fmt: skip
    return b.ask(
        drafts, "when", "meeting_moved",
        rng.choice((f"What date and time was the {meeting} with {org} moved to?",
                    f"When is the {meeting} with {org} now taking place, after it was moved?")),
        f"{new:%Y-%m-%d %H:%M}", "datetime", (meeting, org), (*meeting.split(" "), org.split(" ")[0]),
    )  # fmt: skip


def flight(b: Builder) -> bool:
    rng = b.rng
    city = rng.choice(V.CITIES)
    if not b.key("flight", city):
        return False
    code = b.airline.extra["code"]
    ref = b.code("", CODE_ALPHABET, 6)
    booked = b.any_time(b.day(0, N_DAYS - 30))
    out = b.slot(booked, 7, 40).replace(hour=rng.randint(6, 20))
    back = b.slot(out, 2, 6).replace(hour=rng.randint(6, 20))
    style, tstyle = rng.randint(0, 3), rng.randint(0, 2)
    a = b.airline.person

    def booking(ref_: str, src: str, dst: str, t: datetime, when: datetime, kind: str) -> Draft:
        arr = t + timedelta(minutes=rng.randint(70, 400))
        leg = (f"Flight {code}{rng.randint(100, 2999)} departs {src} on {fmt_day(t, style, year=True)} at "
               f"{fmt_time(t, tstyle)} and arrives in {dst} at {fmt_time(arr, tstyle)}.")  # fmt: skip
        return b.add(
            a, [b.owner], when, f"Booking confirmation {ref_}: {src} to {dst}",
            f"Dear {b.owner.name},\n\nThank you for booking with {a.name}. Your booking reference is {ref_}.\n\n"
            f"{leg}\n\nCheck-in opens 24 hours before departure.\n\n{a.name} Customer Care",
            kind,
        )  # fmt: skip

    fact = booking(ref, b.home_city, city, out, booked, "fact")
    ref2 = b.code("", CODE_ALPHABET, 6)
    when2 = booked + timedelta(minutes=rng.randint(2, 30))
    drafts = [booking(ref2, city, b.home_city, back, when2, "distractor")]
    other = rng.choice([c for c in V.CITIES if c != city])
    if b.key("flight", other):
        ref3 = b.code("", CODE_ALPHABET, 6)
        t = b.slot(b.day(0, N_DAYS - 30), 7, 40)
        while t.date() == out.date():
            t = b.slot(b.day(0, N_DAYS - 30), 7, 40)
        when3 = b.any_time(b.day(0, N_DAYS - 30))
        drafts.append(booking(ref3, b.home_city, other, t, when3, "distractor"))
    route = f"{b.home_city} to {city}"
    keywords = (b.home_city, city, "booking")
    group = [fact, *drafts]
    if rng.random() < 0.5:
        question = f"When does my outbound flight from {route} depart?"
        return b.ask(
            group,
            "when",
            "flight",
            question,
            f"{out:%Y-%m-%d %H:%M}",
            "datetime",
            (route,),
            keywords,
        )
    question = f"What is the booking reference for my flight from {route}?"
    return b.ask(group, "what", "flight_ref", question, ref, "code", (route,), keywords)


def _dinner_pick(b: Builder) -> Picked:
    friend, occasion, picked = b.one_of("dinner", b.friends, V.OCCASIONS, 5)
    words = occasion.replace("'s", "")
    return {"sender": friend, "friend": friend.name, "occasion": occasion,
            "occasion_words": words}, picked  # fmt: skip


def _dinner_letter(b: Builder, s: Slots, k: int, variant: tuple[str, str]) -> Slots:
    rng = b.rng
    restaurant = b.unique(lambda: rng.choice(V.RESTAURANTS))
    when = b.any_time(b.day())
    t = when + timedelta(days=rng.randint(2, 12))
    day = fmt_day(t, rng.randint(0, 3))
    hour = rng.choice(("7", "7:30", "8"))
    return {"this_occasion": variant[1], "restaurant": restaurant, "when": when, "day": day,
            "hour": hour}  # fmt: skip


dinner = FactScenario("dinner", _dinner_pick, _dinner_letter)


def _parcel_pick(b: Builder) -> Picked:
    rng = b.rng
    shop = rng.choice(V.SHOPS)
    picked = b.identities("parcel", (shop,), [(s,) for s in rng.sample(V.SHOPS, len(V.SHOPS))])
    if picked is None:
        return {}, None
    points = rng.sample(V.PICKUP_POINTS, len(picked))
    place = points[0][4:] if points[0].startswith("the ") else points[0]
    return {"sender": b.courier, "shop": shop, "shop_words": shop.replace("&", ""),
            "points": points, "place": place}, picked  # fmt: skip


def _parcel_letter(b: Builder, s: Slots, k: int, variant: tuple[str]) -> Slots:
    when = b.any_time(b.day())
    track = b.code("PP", DIGITS, 9)
    return {"this_shop": variant[0], "when": when, "track": track, "point": s["points"][k]}


parcel = FactScenario("parcel", _parcel_pick, _parcel_letter)


def _hotel_pick(b: Builder) -> Picked:
    city = b.rng.choice(V.CITIES)
    picked = b.identities("hotel", (city,), [(c,) for c in b.rng.sample(V.CITIES, 6)])
    return {"sender": b.hotels, "city": city}, picked


def _hotel_letter(b: Builder, s: Slots, k: int, variant: tuple[str]) -> Slots:
    rng = b.rng
    name = b.unique(lambda: f"{rng.choice(V.VENUE_PREFIXES)} Hotel")
    conf = b.code("", DIGITS, 10)
    when = b.any_time(b.day(0, N_DAYS - 20))
    arrive = when + timedelta(days=rng.randint(5, 40))
    check_in = fmt_day(arrive, 2, year=True)
    return {"this_city": variant[0], "hotel": name, "conf": conf, "when": when,
            "check_in": check_in, "nights": rng.randint(1, 4)}  # fmt: skip


hotel = FactScenario("hotel", _hotel_pick, _hotel_letter)


def _po_pick(b: Builder) -> Picked:
    rng = b.rng
    vendor, _, services = rng.choice(b.vendors)
    service = rng.choice(services)[0]
    alts = [(v, s[0]) for v, _, ss in b.vendors for s in ss]
    rng.shuffle(alts)
    variants = b.identities("po", (vendor, service), alts)
    short = vendor.split(" ")[0]
    return {"sender": b.procurement, "vendor": vendor, "short": short,
            "service": service}, variants  # fmt: skip


def _po_letter(b: Builder, s: Slots, k: int, variant: tuple[str, str]) -> Slots:
    number = b.code("PO-", DIGITS, 6)
    when = b.work_time(b.day())
    return {"this_vendor": variant[0], "this_service": variant[1], "number": number,
            "digits": number.removeprefix("PO-"), "when": when}  # fmt: skip


po = FactScenario("po", _po_pick, _po_letter)


Scenario = Callable[[Builder], bool]

SCENARIOS: tuple[Scenario, ...] = (
    invoice, expense, quote, meeting_moved, flight, deadline, offsite, dinner,
    parcel, interview, presenter, handover, new_hire, hotel, wifi, po,
)  # fmt: skip
"""Every fact scenario, in the order the builder runs them (the order is part of the output)."""
