"""The sandbox: typed values in and out, isolation where the machine allows it, cleanup."""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankgym.envs.sandbox import CodecError, Limits, Opaque, Sandbox, capabilities, decode, encode

ROOT = os.geteuid() == 0
FAST = Limits(wall_s=3, cpu_s=2)

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
    | st.complex_numbers(allow_nan=False)
)
hashables = st.recursive(
    scalars, lambda c: st.tuples(c, c) | st.frozensets(c, max_size=3), max_leaves=6
)
values = st.recursive(
    scalars | hashables,
    lambda c: (
        st.lists(c, max_size=4)
        | st.tuples(c, c)
        | st.dictionaries(hashables, c, max_size=3)
        | st.sets(hashables, max_size=3)
    ),
    max_leaves=20,
)


def _same_typed(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same_typed(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_typed(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=60, deadline=None)
@given(values)
def test_the_codec_round_trips_builtins_keeping_their_exact_types(value):
    assert _same_typed(decode(encode(value)), value)


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.integers() | st.text(), lambda c: st.dictionaries(st.text(), c)))
def test_the_decoder_rejects_anything_that_is_not_an_encoding(junk):
    try:
        value = decode(junk)
    except CodecError:
        return
    assert _same_typed(decode(encode(value)), value)  # it was a valid encoding by chance


def test_objects_of_other_types_come_back_opaque_and_equal_nothing():
    class Sneaky(int):
        def __eq__(self, other):
            return True

    out = decode(encode([Sneaky(3), float("nan")]))
    assert isinstance(out[0], Opaque) and out[0] != out[0] and not out[0] and math.isnan(out[1])
    with pytest.raises(CodecError):
        decode({"t": "int", "v": "9" * 10_000})


def test_calls_return_typed_values_and_errors_per_call():
    res = Sandbox(FAST).run_calls(
        "def f(x):\n    print('side')\n    return {'x': (x, 1.5)} if x else 1 // x\n",
        "f",
        [(2,), (0,)],
    )
    assert res.stage == "done" and res.stdout == "side\nside\n"
    assert res.outcomes[0].value == {"x": (2, 1.5)}
    assert not res.outcomes[1].ok and res.outcomes[1].error.startswith("ZeroDivisionError:")


def test_a_syntax_error_and_an_import_error_are_told_apart():
    sb = Sandbox(FAST)
    assert sb.run_calls("def f(:\n", "f", [()]).stage == "parse_error"
    res = sb.run_calls("import nonexistent_module_xyz\n", "f", [()])
    assert res.stage == "import_error" and "ModuleNotFoundError" in res.error
    assert sb.run_calls("x = 1\n", "f", [()]).error == "no function named f"


def test_output_is_cut_and_runaway_output_stops_the_run():
    res = Sandbox(Limits(wall_s=5, output_chars=100)).run_script(
        "while True:\n    print('x' * 1000)\n"
    )
    assert len(res.stdout) == 100 and res.output_limit and res.wall_s < 5


def test_the_wall_clock_kills_the_whole_process_group_and_nothing_is_left(sandbox_pids):
    code = "import os, time\nfor _ in range(3):\n    os.fork()\ntime.sleep(60)\n"
    res = Sandbox(Limits(wall_s=1.5, cpu_s=5)).run_script(code)
    assert res.timed_out and res.wall_s < 10
    assert sandbox_pids() == []


@pytest.mark.skipif(not ROOT, reason="isolation needs root (uid drop, namespaces, cgroups)")
def test_the_candidate_runs_unprivileged_offline_in_an_empty_work_dir():
    caps = capabilities()
    assert caps["uid_drop"]
    if not caps["works"]:
        pytest.skip("no mount namespace and an unreadable interpreter: see docs/code.md")
    code = (
        "import os, socket\n"
        "print(os.getuid(), os.getgroups(), sorted(os.environ))\n"
        "print(os.listdir('.'), os.listdir('/tmp'), os.listdir('/work'))\n"
        "try:\n    socket.create_connection(('1.1.1.1', 80), timeout=1); print('NET')\n"
        "except OSError as e:\n    print('nonet', type(e).__name__)\n"
    )
    res = Sandbox(FAST).run_script(code, files={"given.txt": "hi"})
    uid_line, dirs, net = res.stdout.splitlines()
    assert int(uid_line.split()[0]) >= 200_000 and "[]" in uid_line
    assert "'HOME', 'LANG', 'PATH'" in uid_line
    assert "['given.txt']" in dirs
    if caps["net_ns"]:
        assert net.startswith("nonet")
    if caps["mount_ns"]:
        assert dirs.endswith("[]")  # /work (this project) is hidden
    assert [e["event"] for e in res.events if e["event"].startswith("socket")]


@pytest.mark.skipif(not ROOT, reason="cgroups need root")
def test_the_process_limit_binds_even_though_the_caller_is_root(sandbox_pids):
    code = (
        "import os, time\nn = 0\ntry:\n    for _ in range(200):\n"
        "        if os.fork() == 0:\n            time.sleep(30)\n            os._exit(0)\n"
        "        n += 1\nexcept OSError as e:\n    print(n, type(e).__name__)\n"
    )
    res = Sandbox(Limits(wall_s=5, processes=8)).run_script(code)
    n, err = res.stdout.split()
    assert int(n) < 16 and err == "BlockingIOError"
    assert sandbox_pids() == []


def test_without_namespaces_runs_still_work_and_leave_no_work_dir_behind(sandbox_pids):
    before = {p for p in os.listdir("/tmp") if p.startswith("sbx-")}
    sb = Sandbox(FAST, namespaces=False, persistent=False)
    res = sb.run_calls("import os\ndef f():\n    return os.getcwd()\n", "f", [()])
    assert res.stage == "done" and res.outcomes[0].value.startswith("/tmp/sbx-")
    assert not res.isolation["net_ns"] and not res.isolation["mount_ns"]
    assert {p for p in os.listdir("/tmp") if p.startswith("sbx-")} <= before
    assert sandbox_pids() == []


def test_concurrent_callers_get_separate_workers_and_separate_uids():
    sb = Sandbox(FAST)
    code = "import os, time\ndef f():\n    time.sleep(0.3)\n    return os.getuid()\n"
    with ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(lambda _: sb.run_calls(code, "f", [()]), range(3)))
    uids = [r.outcomes[0].value for r in runs]
    assert all(r.stage == "done" for r in runs) and len(set(uids)) == 3


def test_a_later_run_on_a_reused_worker_sees_nothing_of_an_earlier_one():
    sb = Sandbox(FAST)
    first = sb.run_script("open('left.txt', 'w').write('x')\nimport os\nprint(os.getcwd())")
    path = first.stdout.strip()
    second = sb.run_script(f"import os\nprint(os.listdir('.'), os.path.exists({path!r}))")
    assert second.stdout.strip() == "[] False"


_SCAN = """
import ctypes
needle = ("SECRET" + "-" + {a!r} + {b!r}).encode()
found = 0
for line in open('/proc/self/maps'):
    addr, perms = line.split()[:2]
    lo, hi = (int(x, 16) for x in addr.split('-'))
    if perms.startswith('rw') and hi - lo < (256 << 20):
        try:
            found += ctypes.string_at(lo, hi - lo).count(needle)
        except Exception:
            pass
print(found)
"""


def test_a_later_run_cannot_find_an_earlier_runs_code_or_inputs_in_its_own_memory():
    if not capabilities()["works"]:
        pytest.skip("ctypes is not importable by the candidate here: see docs/code.md")
    limits = Limits(wall_s=20, cpu_s=15, memory_bytes=1 << 30)
    sb = Sandbox(limits)
    token = os.urandom(8).hex()
    secret = f"SECRET-{token}"
    first = sb.run_calls(f"X = {secret!r}\ndef f(x):\n    return x + X\n", "f", [(secret,)])
    assert first.outcomes[0].value == secret * 2
    scan = _SCAN.format(a=token[:8], b=token[8:])
    reused = sb.run_script(scan).stdout.strip()
    fresh = Sandbox(limits, persistent=False).run_script(scan).stdout.strip()
    assert reused == fresh  # only the scanner's own needle; nothing left by the first run
