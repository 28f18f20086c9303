"""Word pools for the synthetic inbox generator: people, organisations, places, topics.

Import path: ``rankgym.envs.email.vocab``. The pools are data in ``vocab.toml`` (beside this
file), one array a pool; this module reads that file once, checks each pool's shape (strings,
or rows of a fixed width) and gives it a name and a type: the array ``first_names`` is
``FIRST_NAMES``, a ``tuple[str, ...]``. Changing any pool changes every generated inbox, so
bump ``generator.GENERATOR_VERSION`` when you edit the file (the inbox cache key hashes it
anyway, see ``inbox.generator_files``).

What it does not do: draw anything (the builder and the scenarios do, from the inbox's RNG), or
check what the words mean (a company's domain is any string).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, TypeGuard

POOLS_FILE = Path(__file__).with_name("vocab.toml")

_POOLS: dict[str, Any] = tomllib.loads(POOLS_FILE.read_text(encoding="utf-8"))


def _bad(key: str, want: str) -> ValueError:
    return ValueError(f"{POOLS_FILE}: pool {key!r} must be {want}; fix that entry")


def _is_rows(value: Any, kinds: tuple[type, ...]) -> TypeGuard[list[list[Any]]]:
    """``value`` is a non-empty array of rows whose ``i``-th item has type ``kinds[i]``."""
    rows = value if isinstance(value, list) else []
    return bool(rows) and all(
        isinstance(r, list) and len(r) == len(kinds) and all(map(isinstance, r, kinds))
        for r in rows
    )


def _words(key: str) -> tuple[str, ...]:
    """Pool ``key``: a non-empty array of strings."""
    pool = _POOLS.get(key)
    if not (isinstance(pool, list) and pool and all(isinstance(w, str) for w in pool)):
        raise _bad(key, "a non-empty array of strings")
    return tuple(pool)


def _rows(key: str, width: int) -> tuple[tuple[str, ...], ...]:
    """Pool ``key``: a non-empty array of rows of ``width`` strings."""
    pool = _POOLS.get(key)
    if not _is_rows(pool, (str,) * width):
        raise _bad(key, f"a non-empty array of rows of {width} strings")
    return tuple(tuple(r) for r in pool)


def _pairs(key: str) -> tuple[tuple[str, str], ...]:
    return tuple((a, b) for a, b in _rows(key, 2))


def _triples(key: str) -> tuple[tuple[str, str, str], ...]:
    return tuple((a, b, c) for a, b, c in _rows(key, 3))


def _vendors() -> dict[str, tuple[tuple[str, int, int], ...]]:
    """The ``[vendors]`` table: company name = its services as [service, low, high] rows."""
    table = _POOLS.get("vendors")
    if not (isinstance(table, dict) and table):
        raise _bad("vendors", "a table of company name = [[service, low, high], ...]")
    for name, rows in table.items():
        if not _is_rows(rows, (str, int, int)):
            raise _bad("vendors", f"[service, low, high] rows for {name!r}")
    return {name: tuple((s, lo, hi) for s, lo, hi in rows) for name, rows in table.items()}


# people
FIRST_NAMES = _words("first_names")
LAST_NAMES = _words("last_names")
# organisations: (name, domain, what they do), and the ones that invoice for services
COMPANIES = _triples("companies")
VENDORS = _vendors()
# work
PROJECTS = _words("projects")
DELIVERABLES = _words("deliverables")
EXTERNAL_MEETINGS = _words("external_meetings")
INTERNAL_MEETINGS = _words("internal_meetings")
TEAMS = _words("teams")
TOPICS = _words("topics")
ROLES = _words("roles")
# places (venue = prefix + kind)
CITIES = _words("cities")
HOME_CITIES = _words("home_cities")
VENUE_PREFIXES = _words("venue_prefixes")
VENUE_KINDS = _words("venue_kinds")
RESTAURANTS = _words("restaurants")
# private life
OCCASIONS = _words("occasions")
HOME_JOBS = _words("home_jobs")
SHOPS = _words("shops")
PICKUP_POINTS = _words("pickup_points")
MERCHANTS = _words("merchants")
# services: (name, domain, code) and (name, domain)
AIRLINES = _triples("airlines")
HOTEL_SITES = _pairs("hotel_sites")
COURIERS = _pairs("couriers")
# newsletters: (title, sender address, theme), headline templates and what they fill in
NEWSLETTERS = _triples("newsletters")
HEADLINE_TEMPLATES = _words("headline_templates")
PRACTICES = _words("practices")
# code hosting and documents
REPOS = _words("repos")
PR_TITLES = _words("pr_titles")
DOCS = _words("docs")
# senders of private mail, small businesses and promotions: (shop, sender address)
PERSONAL_DOMAINS = _words("personal_domains")
SMALL_BUSINESS_SUFFIXES = _words("small_business_suffixes")
PROMO_SENDERS = _pairs("promo_senders")
