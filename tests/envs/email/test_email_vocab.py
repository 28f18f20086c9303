"""The word pools: vocab.toml's arrays, each read under one name of vocab.py with its shape checked."""

from __future__ import annotations

import tomllib

import pytest

from rankgym.envs.email import vocab
from rankgym.envs.email.inbox import generator_files


def _names() -> set[str]:
    return {n for n in vars(vocab) if n.isupper() and not n.startswith("_")} - {"POOLS_FILE"}


def test_every_pool_of_vocab_toml_has_exactly_one_name_in_vocab_py():
    pools = tomllib.loads(vocab.POOLS_FILE.read_text(encoding="utf-8"))
    assert sorted(pools) == sorted(n.lower() for n in _names())


def test_pools_are_tuples_of_the_declared_shape():
    assert all(isinstance(w, str) for w in vocab.FIRST_NAMES)
    assert all(len(c) == 3 and all(isinstance(x, str) for x in c) for c in vocab.COMPANIES)
    assert all(len(p) == 2 for p in vocab.PROMO_SENDERS + vocab.HOTEL_SITES + vocab.COURIERS)
    rows = [r for v in vocab.VENDORS.values() for r in v]
    assert rows and all(type(lo) is int and type(hi) is int and lo < hi for _, lo, hi in rows)
    assert set(vocab.VENDORS) <= {c[0] for c in vocab.COMPANIES}  # the builder looks them up


def test_the_pools_file_is_part_of_the_inbox_cache_key():
    assert vocab.POOLS_FILE in generator_files()


@pytest.mark.parametrize(
    ("pools", "read"),
    [
        ({"companies": [["Acme", "acme.com"]]}, lambda: vocab._triples("companies")),
        ({"companies": "Acme"}, lambda: vocab._triples("companies")),
        ({"teams": ["Data", 3]}, lambda: vocab._words("teams")),
        ({"teams": []}, lambda: vocab._words("teams")),
        ({"vendors": {"Acme": [["audit", "low", 9]]}}, vocab._vendors),
    ],
)
def test_a_malformed_pool_is_refused_naming_the_pool_and_the_file(monkeypatch, pools, read):
    monkeypatch.setattr(vocab, "_POOLS", pools)
    with pytest.raises(ValueError, match=rf"vocab\.toml: pool '{next(iter(pools))}' must be"):
        read()


def test_a_missing_pool_is_refused_naming_it(monkeypatch):
    monkeypatch.setattr(vocab, "_POOLS", {})
    with pytest.raises(ValueError, match="pool 'first_names'"):
        vocab._words("first_names")
