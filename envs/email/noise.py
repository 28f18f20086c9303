"""Noise: everything in an inbox that answers no question.

Import path: ``rankgym.envs.email.noise``. Work threads with replies and forwards, personal
threads, notifications (code review, CI, calendar, bank, sign-in, HR, shipping), weekly
newsletters and promotions. Each function adds emails to a ``Builder``; ``generator.py``
calls them until the inbox reaches its size. Noise emails are never facts, and fact emails
are never quoted or forwarded here (the forward picks from noise threads only), which keeps
every answer in one email.
"""

from __future__ import annotations

from datetime import timedelta

from rankgym.envs.email import vocab as V
from rankgym.envs.email.builder import Builder
from rankgym.envs.email.templates import (
    FORWARD_NOTES,
    PERSONAL_OPENERS,
    PERSONAL_REPLIES,
    REPLIES,
    ROOMS,
    THREAD_OPENERS,
    fmt_day,
    fmt_time,
    header_date,
)
from rankgym.envs.email.types import MONTHS, N_DAYS, START, WEEKDAYS, Person


def thread(b: Builder) -> None:
    """A work thread: an opener, 0-4 replies quoting the previous message, sometimes a forward."""
    rng = b.rng
    subject_t, body_t = rng.choice(THREAD_OPENERS)
    others = rng.sample(b.colleagues, rng.randint(1, 3))
    if rng.random() < 0.2:
        others.append(rng.choice(rng.choice(b.partners)[2]))
    slots = b.slots()
    subject = subject_t.format(**slots)
    starter = b.owner if rng.random() < 0.3 else others[0]
    to = [p for p in [b.owner, *others] if p != starter]
    first = b.add(starter, to[:1], b.work_time(b.day()), subject,
                      b.letter(starter, to[0], body_t.format(**slots)), "thread", cc=to[1:])  # fmt: skip
    cur = first
    people = [b.owner, *others]
    for _ in range(rng.choice((0, 1, 1, 2, 2, 3, 4))):
        sender = rng.choice([p for p in people if p != cur.sender])
        text = b.letter(sender, cur.sender, rng.choice(REPLIES).format(f=cur.sender.first, **slots))
        cur = b.reply(cur, sender, text, "thread", delay_minutes=(10, 1800))
    if rng.random() < 0.12:
        target = rng.choice([p for p in b.colleagues if p not in people] or b.colleagues)
        fwd_sender = b.owner if rng.random() < 0.5 else rng.choice(others)
        note = rng.choice(FORWARD_NOTES).format(f=target.first)
        body = (
            f"{note}\n\n{fwd_sender.first}\n\n---------- Forwarded message ---------\nFrom: {cur.sender.address}\n"
            f"Date: {header_date(cur.when)}\nSubject: {cur.subject}\nTo: {', '.join(p.address for p in cur.to)}\n\n{cur.body}"
        )
        to_ = [target] if fwd_sender == b.owner else [b.owner]
        b.add(
            fwd_sender,
            to_,
            cur.when + timedelta(minutes=rng.randint(30, 3000)),
            f"Fwd: {cur.subject}",
            body,
            "thread",
        )


def personal(b: Builder) -> None:
    """A personal thread with a friend or family member, 0-2 replies."""
    rng = b.rng
    subject_t, body_t = rng.choice(PERSONAL_OPENERS)
    friend = rng.choice(b.friends + b.family)
    slots = b.slots()
    subject = subject_t.format(**slots)
    starter, other = (friend, b.owner) if rng.random() < 0.7 else (b.owner, friend)
    first = b.add(starter, [other], b.any_time(b.day()), subject,
                      f"Hi {other.first}!\n\n{body_t.format(**slots)}\n\n{starter.first}", "personal")  # fmt: skip
    cur = first
    for _ in range(rng.choice((0, 1, 1, 2))):
        sender = other if cur.sender == starter else starter
        cur = b.reply(
            cur,
            sender,
            f"{rng.choice(PERSONAL_REPLIES)}\n\n{sender.first}",
            "personal",
            delay_minutes=(15, 2000),
            quote=rng.random() < 0.6,
        )


def notification(b: Builder) -> None:
    """One automated notification (code review, CI, calendar, bank, sign-in, HR, shipping)."""
    rng = b.rng
    kind = rng.choice(
        ("pr", "pr", "ci", "calendar", "calendar", "bank", "bank", "signin", "hr", "shipping")
    )
    day = b.day()
    o = b.owner
    if kind == "pr":
        repo, n, title = rng.choice(V.REPOS), rng.randint(100, 4999), rng.choice(V.PR_TITLES)
        who = rng.choice(b.peers)
        body = (f"{who.name} requested your review on this pull request.\n\n{rng.randint(1, 9)} commits, "
                f"{rng.randint(1, 30)} files changed.\n\nView it on CodeHarbor: https://codeharbor.dev/{b.org_slug}/{repo}/pull/{n}\n\n"
                "You are receiving this because your review was requested.")  # fmt: skip
        sender, when = b.codehost, b.work_time(day)
        subject = f"[{b.org_slug}/{repo}] {title} (#{n})"
    elif kind == "ci":
        repo = rng.choice(V.REPOS)
        sha = "".join(rng.choice("0123456789abcdef") for _ in range(7))
        status = rng.choice(("failed", "succeeded", "failed"))
        body = f"Run {status}: nightly build on main ({sha}).\n\nJob: test ({rng.choice(('unit', 'integration', 'lint'))})\nDuration: {rng.randint(2, 40)}m {rng.randint(0, 59)}s"
        sender, when = b.codehost, b.any_time(day)
        subject = f"[{b.org_slug}/{repo}] Run {status}: nightly build - main ({sha})"
    elif kind == "calendar":
        meeting = rng.choice(V.INTERNAL_MEETINGS)
        organizer = rng.choice(b.colleagues)
        t = b.slot(day, 1, 10)
        end = t + timedelta(minutes=rng.choice((30, 45, 60)))
        body = (f"{organizer.name} has invited you to: {meeting.capitalize()}\n\nWhen: {fmt_day(t, 2, year=True)} "
                f"{fmt_time(t, 0)}-{fmt_time(end, 0)}\nWhere: {rng.choice(ROOMS)} room\n\nGoing? Yes - Maybe - No")  # fmt: skip
        sender, when = b.calendar, b.work_time(day)
        subject = f"Invitation: {meeting.capitalize()} @ {fmt_day(t, 2)} {fmt_time(t, 0)}"
    elif kind == "bank":
        amount = b.amount(3, 240)
        merchant = rng.choice(V.MERCHANTS)
        body = (f"A card payment of {amount} was made at {merchant} using your card ending {rng.randint(1000, 9999)}.\n\n"
                "If you don't recognise this payment, call us on the number on the back of your card.")  # fmt: skip
        sender, when = b.bank, b.any_time(day)
        subject = f"Card payment of {amount} at {merchant}"
    elif kind == "signin":
        browser = rng.choice(("Chrome", "Firefox", "Safari", "Edge"))
        osname = rng.choice(("Windows", "macOS", "Linux", "Android", "iOS"))
        body = (f"We noticed a new sign-in to your {b.org} account from {browser} on {osname} near {rng.choice(V.CITIES + V.HOME_CITIES)}.\n\n"
                "If this was you, no action is needed. Otherwise, reset your password right away.")  # fmt: skip
        sender, when = b.security, b.any_time(day)
        subject = "New sign-in to your account"
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
        sender, when = b.hr, b.work_time(day)
    else:
        shop = rng.choice(V.SHOPS)
        n = rng.randint(10000, 99999)
        domain = shop.lower().replace(" & ", "and").replace(" ", "") + ".com"
        sender = Person(shop, f"orders@{domain}", shop)
        body = f"Hi {o.first},\n\nGood news - your order #{n} has shipped and should arrive by {rng.choice(WEEKDAYS)}.\n\nThanks for shopping with {shop}."
        when = b.any_time(day)
        subject = f"Your {shop} order #{n} has shipped"
    b.add(sender, [o], when, subject, body, "notification")


def newsletters(b: Builder) -> None:
    """5-7 newsletters, each issued weekly or fortnightly over the whole inbox span."""
    rng = b.rng
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
            b.add(
                sender,
                [b.owner],
                day.replace(hour=rng.randint(6, 9), minute=rng.choice((0, 0, 30))),
                f"{title} #{issue}: {heads[0][2:].split(chr(10))[0]}",
                body,
                "newsletter",
            )
            issue += 1
            day += timedelta(days=every)


def promotion(b: Builder) -> None:
    """One promotional email from a shop."""
    rng = b.rng
    shop, addr = rng.choice(V.PROMO_SENDERS)
    pct = rng.choice((10, 15, 20, 25, 30, 40))
    body = (f"{pct}% off {rng.choice(('everything', 'bestsellers', 'new arrivals', 'our summer range'))} this weekend only.\n\n"
            f"Use code SAVE{pct} at checkout. Free delivery on orders over {b.amount(30, 120)}.\n\nUnsubscribe anytime.")  # fmt: skip
    b.add(
        Person(shop, addr, shop),
        [b.owner],
        b.any_time(b.day()),
        f"{shop}: {pct}% off this weekend",
        body,
        "promotion",
    )
