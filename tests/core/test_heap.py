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
