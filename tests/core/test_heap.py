"""rankgym.heap: the fixed mmap threshold and its environment override."""

from __future__ import annotations

import pytest

from rankgym import heap


def test_the_threshold_comes_from_the_environment_when_it_is_a_whole_number(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.delenv(heap.THRESHOLD_ENV, raising=False)
    assert heap.default_mmap_threshold() == heap.MMAP_THRESHOLD == 4 << 20
    monkeypatch.setenv(heap.THRESHOLD_ENV, "131072")
    assert heap.default_mmap_threshold() == 131072
    monkeypatch.setenv(heap.THRESHOLD_ENV, "lots")  # not a number: the default, no error
    assert heap.default_mmap_threshold() == heap.MMAP_THRESHOLD


def test_bound_heap_and_trim_never_raise_and_say_whether_glibc_took_them():
    assert isinstance(heap.bound_heap(), bool)
    assert isinstance(heap.release_freed_memory(), bool)
    assert heap.bound_heap(heap.MMAP_THRESHOLD) in (True, False)


def test_primitive_caches_get_the_cap_unless_the_user_set_one(monkeypatch: pytest.MonkeyPatch):
    for name in heap.CACHE_ENV:  # setenv first: the test's own values are undone after it
        monkeypatch.setenv(name, "1")
        monkeypatch.delenv(name)
    assert heap.bound_primitive_caches() is True
    assert [heap.os.environ[n] for n in heap.CACHE_ENV] == ["64", "64"]
    assert heap.bound_primitive_caches(8) is False  # already set: idempotent, first value stays
    monkeypatch.setenv(heap.CACHE_ENV[0], "512")
    monkeypatch.delenv(heap.CACHE_ENV[1])
    assert heap.bound_primitive_caches() is True
    assert [heap.os.environ[n] for n in heap.CACHE_ENV] == ["512", "64"]


def test_a_primitive_cache_of_zero_is_refused_by_name():
    with pytest.raises(ValueError, match="capacity"):
        heap.bound_primitive_caches(0)


def test_the_cli_caps_the_caches_before_a_command_runs(monkeypatch: pytest.MonkeyPatch, capsys):
    from rankgym.cli import main

    for name in heap.CACHE_ENV:  # setenv first: the test's own values are undone after it
        monkeypatch.setenv(name, "1")
        monkeypatch.delenv(name)
    assert main(["envs", "--json"]) == 0
    capsys.readouterr()
    assert all(heap.os.environ[n] == str(heap.PRIMITIVE_CACHE_CAPACITY) for n in heap.CACHE_ENV)
