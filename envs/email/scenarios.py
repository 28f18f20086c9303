"""The 16 fact scenarios: each adds one fact email, its distractors and one question.

Import path: ``rankgym.envs.email.scenarios``. A scenario is a function of a ``Builder``; it
returns False (and adds nothing) when it cannot reserve an unused identity, and the builder
moves on. ``SCENARIOS`` is the order the builder runs them in: changing the order, or any
random draw inside a scenario, changes every generated inbox (bump ``GENERATOR_VERSION``).
This module holds the facts that come from outside the company (vendors, partners,
contractors, friends, airlines, hotels, couriers); ``scenarios_office`` those from colleagues.

Most scenarios write their emails through ``Builder.fact_group``: variant 0 is the fact, the
others are near-duplicates from the same sender with other facts; each letter is a
``Builder.note`` and every scenario ends with ``return b.ask(...)`` (the question over the group). The ones that need threads
(``expense``, ``meeting_moved``) or differently shaped distractors (``flight``) add emails
directly. Not covered: facts spread across several emails, or questions with no answer.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from rankgym.envs.email import vocab as V
from rankgym.envs.email.builder import Builder, Draft, Letter
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


def invoice(b: Builder) -> bool:
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
    if variants is None:
        return False

    def write(k: int, variant: tuple[str, int]) -> Letter:
        svc, m = variant
        lo_, hi_ = (
            (lo, hi) if svc == service else next((x, y) for s_, x, y in services if s_ == svc)
        )
        amount = b.amount(lo_, hi_)
        inv = b.code("INV-", "0123456789", 5)
        when = b.work_time(datetime(2024, m + 1, rng.randint(1, 9)))
        due = when + timedelta(days=30)
        subject = rng.choice(
            (
                f"Invoice {inv} - {svc} - {MONTHS[m - 1]} 2024",
                f"{vendor} invoice {inv} ({svc}, {MONTHS[m - 1]} 2024)",
            )
        )
        return b.note(
            billing, when, subject,
            f"Please find attached {vendor} invoice {inv} for {svc} provided to {b.org} during {MONTHS[m - 1]} 2024.",
            f"The total amount due is {amount}, payable by {fmt_day(due, rng.randint(0, 2), year=True)} to the account on file. "
            "Please quote the invoice number with your payment.",
            "If you have any questions about this invoice, just reply to this email.",
            answer=amount,
        )  # fmt: skip

    drafts, answer = b.fact_group(variants, write)
    m = MONTHS[month - 1]
    short = vendor.split(" ")[0]
    return b.ask(
        drafts, "how much", "invoice",
        rng.choice((f"How much did {vendor} invoice us for {service} for {m} 2024?",
                    f"What was the total on {vendor}'s invoice for {service} in {m} 2024?")),
        answer, "amount", (vendor, service, m), (short, *service.split(" "), m),
    )  # fmt: skip


def quote(b: Builder) -> bool:
    rng = b.rng
    contractor = rng.choice(b.contractors)
    job, picked = b.one_of("quote", contractor.name, V.HOME_JOBS, 6)
    if picked is None:
        return False

    def write(k: int, variant: tuple[str, str]) -> Letter:
        j = variant[1]
        amount = b.amount(350, 9500)
        when = b.any_time(b.day())
        return b.note(
            contractor, when, f"Quote for {j}",
            f"Thanks for having me round to look at the {j}.",
            rng.choice((f"My quote for the {j} comes to {amount}, including materials and VAT.",
                        f"For the {j} I can do it for {amount} all in (labour and materials).")),
            f"I could start {rng.choice(('next Monday', 'in two weeks', 'early next month'))}. The quote is valid for 30 days.",
            answer=amount,
        )  # fmt: skip

    drafts, answer = b.fact_group(picked, write)
    question = f"How much did {contractor.name} quote for the {job}?"
    terms = (contractor.name, job)
    return b.ask(
        drafts, "how much", "quote", question, answer, "amount", terms, (*job.split(" "), "quote")
    )


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


def dinner(b: Builder) -> bool:
    rng = b.rng
    friend = rng.choice(b.friends)
    occasion, picked = b.one_of("dinner", friend.name, V.OCCASIONS, 5)
    if picked is None:
        return False

    def write(k: int, variant: tuple[str, str]) -> Letter:
        occ = variant[1]
        restaurant = b.unique(lambda: rng.choice(V.RESTAURANTS))
        when = b.any_time(b.day())
        t = when + timedelta(days=rng.randint(2, 12))
        return b.note(
            friend, when, f"Dinner for {occ}",
            f"I've booked a table at {restaurant} for {occ}, {fmt_day(t, rng.randint(0, 3))} at {rng.choice(('7', '7:30', '8'))}pm.",
            rng.choice(("Let me know if you're bringing anyone!", "Can't wait - it's been too long.")),
            answer=restaurant,
        )  # fmt: skip

    drafts, answer = b.fact_group(picked, write)
    question = f"Which restaurant did {friend.name} book for {occasion}?"
    keywords = (*occasion.replace("'s", "").split(" "), "table")
    return b.ask(
        drafts, "where", "dinner", question, answer, "text", (friend.name, occasion), keywords
    )


def parcel(b: Builder) -> bool:
    rng = b.rng
    shop = rng.choice(V.SHOPS)
    picked = b.identities("parcel", (shop,), [(s,) for s in rng.sample(V.SHOPS, len(V.SHOPS))])
    if picked is None:
        return False
    points = rng.sample(V.PICKUP_POINTS, len(picked))

    def write(k: int, variant: tuple[str]) -> Letter:
        s = variant[0]
        when = b.any_time(b.day())
        track = b.code("PP", "0123456789", 9)
        body = (
            f"Hello {b.owner.first},\n\nYour parcel from {s} (tracking number {track}) is ready for collection at "
            f"{points[k]}. Please bring photo ID. We'll keep it for 7 days.\n\n{b.courier.name}"
        )
        return Letter(b.courier, when, f"Your {s} parcel is ready for collection", body)

    drafts, _ = b.fact_group(picked, write)
    p = points[0]
    answer = p[4:] if p.startswith("the ") else p
    question = f"Where can I collect my parcel from {shop}?"
    keywords = (*shop.replace("&", "").split(), "collection")
    return b.ask(drafts, "where", "parcel", question, answer, "text", (shop, "collect"), keywords)


def hotel(b: Builder) -> bool:
    rng = b.rng
    city = rng.choice(V.CITIES)
    picked = b.identities("hotel", (city,), [(c,) for c in rng.sample(V.CITIES, 6)])
    if picked is None:
        return False
    hotels: list[str] = []

    def write(k: int, variant: tuple[str]) -> Letter:
        c = variant[0]
        name = b.unique(lambda: f"{rng.choice(V.VENUE_PREFIXES)} Hotel")
        hotels.append(name)
        conf = b.code("", "0123456789", 10)
        when = b.any_time(b.day(0, N_DAYS - 20))
        arrive = when + timedelta(days=rng.randint(5, 40))
        body = (
            f"Dear {b.owner.name},\n\nYour booking at the {name}, {c} is confirmed.\n\n"
            f"Confirmation number: {conf}\nCheck-in: {fmt_day(arrive, 2, year=True)}, from 15:00\n"
            f"Nights: {rng.randint(1, 4)}\n\nFree cancellation until 48 hours before arrival.\n\n{b.hotels.name}"
        )
        return Letter(b.hotels, when, f"Your booking at the {name}, {c} is confirmed", body, conf)

    drafts, answer = b.fact_group(picked, write)
    hotel0 = hotels[0]
    question = f"What is the confirmation number for my stay at the {hotel0} in {city}?"
    return b.ask(
        drafts,
        "what",
        "hotel",
        question,
        answer,
        "code",
        (hotel0, city),
        (*hotel0.split(" "), city),
    )


def po(b: Builder) -> bool:
    rng = b.rng
    vendor, _, services = rng.choice(b.vendors)
    service = rng.choice(services)[0]
    alts = [(v, s[0]) for v, _, ss in b.vendors for s in ss]
    rng.shuffle(alts)
    variants = b.identities("po", (vendor, service), alts)
    if variants is None:
        return False

    def write(k: int, variant: tuple[str, str]) -> Letter:
        v, s = variant
        number = b.code("PO-", "0123456789", 6)
        when = b.work_time(b.day())
        return b.note(
            b.procurement, when, f"PO approved: {v} - {s}",
            f"The purchase order for {v} ({s}) has been approved. The PO number is {number}.",
            "Please pass it on to the vendor so it appears on their invoices.",
            answer=number,
        )  # fmt: skip

    drafts, answer = b.fact_group(variants, write)
    question = f"What is the purchase order number for {vendor} ({service})?"
    keywords = (vendor.split(" ")[0], *service.split(" "), "PO")
    aliases = (answer.removeprefix("PO-"),)
    return b.ask(
        drafts, "what", "po", question, answer, "code", (vendor, service), keywords, aliases
    )


Scenario = Callable[[Builder], bool]

SCENARIOS: tuple[Scenario, ...] = (
    invoice, expense, quote, meeting_moved, flight, deadline, offsite, dinner,
    parcel, interview, presenter, handover, new_hire, hotel, wifi, po,
)  # fmt: skip
"""Every fact scenario, in the order the builder runs them (the order is part of the output)."""
