"""Text of the synthetic inboxes: date/money formatting and the noise templates.

Import path: ``rankgym.envs.email.templates``. Pure data and pure functions; the builder picks
from these tuples with its seeded RNG, so reordering or editing a template changes every
generated inbox (bump ``GENERATOR_VERSION``; the inbox cache key hashes the source anyway).
"""

from __future__ import annotations

from datetime import date, datetime

from rankgym.envs.email.types import MONTHS, WEEKDAYS

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


def header_date(t: datetime) -> str:
    """How a quoted reply or forward writes a timestamp: ``Mon, 8 Jan 2024 at 09:05``."""
    return f"{WEEKDAYS[t.weekday()][:3]}, {t.day} {MONTHS[t.month - 1][:3]} {t.year} at {t.hour:02d}:{t.minute:02d}"


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
