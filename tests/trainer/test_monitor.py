"""The judge monitor, its guard and the no-signal refusal, on a tiny model in a coin env.

The coin env marks each episode's user message ``[PASS]`` or ``[FAIL]`` (from the episode
seed, or always ``[FAIL]`` with ``constant=True``) and its verifier agrees with the mark, so a
scripted judge that reads the mark is a good judge and one that inverts it an anti-correlated
one. The judge is a real LiteLLM provider (``fakejudge/``); trainer, store, prompt and the
monitor are the production code.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import gymnasium
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rankgym.cli import main
from rankgym.config import validate_config
from rankgym.envs.base import Env, Task
from rankgym.judges.prompt import parse_ids_line
from rankgym.store import Store
from rankgym.trainer.config import MonitorSection, TrainConfig
from rankgym.trainer.demo import monitor_fields, monitor_sentence
from rankgym.trainer.loop import Trainer
from rankgym.trainer.monitor import (
    JudgeMonitor,
    NoSignalStep,
    agreement,
    check_failed,
    group_unit,
    verifier_constant,
)
from rankgym.types import Group, Judgement, Message, Trajectory, TrajectoryScore

sys.path.insert(0, str(Path(__file__).parents[1] / "judges"))
from judge_fakes import install_fake  # noqa: E402
from trainer_helpers import runs_page, save_tiny_model, tiny_config, to_toml  # noqa: E402

COIN = "montest/Coin-v0"


def flip_coin(side: str) -> str:
    """Turn the coin to the side named (heads or tails) and say which side is up."""
    return side


class CoinEnv(Env):
    env_id = COIN
    max_turns = 1
    tools = [flip_coin]

    def __init__(self, constant: bool = False, **kw: Any) -> None:
        super().__init__(**kw)
        self.constant = constant
        self.passed = False

    def tasks(self, split: str = "train") -> list[Task]:
        return [Task(id=f"{split}-{i}", prompt=f"Coin task {i}.", split=split) for i in range(8)]

    def reset(self, seed=None, options=None):
        messages, info = super().reset(seed=seed, options=options)
        self.passed = not self.constant and (seed or 0) % 2 == 0
        mark = " [PASS]" if self.passed else " [FAIL]"
        messages[-1]["content"] += mark
        self.state.messages[-1]["content"] += mark
        return messages, info

    def verify(self, task, answer, state) -> float:
        return 1.0 if self.passed else 0.0


gymnasium.register(id=COIN, entry_point=CoinEnv)
_BLOCK = re.compile(r'<trajectory id="(T\d+)">(.*?)</trajectory>', re.DOTALL)


def mark_judge(anti_after: int | None = None):
    """A scripted judge scoring ``[PASS]`` trajectories high (inverted after ``anti_after`` calls)."""
    calls = {"n": 0}

    def reply(messages: list[dict[str, Any]]) -> str:
        calls["n"] += 1
        text = messages[-1]["content"]
        anti = anti_after is not None and calls["n"] > anti_after
        good = {lab: "[PASS]" in body for lab, body in _BLOCK.findall(text)}
        scores = [
            {"trajectory_id": lab, "score": 0.9 if good.get(lab, False) != anti else 0.1}
            for lab in parse_ids_line(text) or []
        ]
        return json.dumps({"scores": scores})

    return reply


@pytest.fixture
def tiny(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "m")


@pytest.fixture
def fake():
    from fakes import unregister

    f = install_fake()
    yield f
    unregister("fakejudge")


def _raw(model: Path, out: Path, steps: int, **over: Any) -> dict[str, Any]:
    raw = tiny_config(model, out, steps=steps)
    raw["env"] = {"id": COIN, "kwargs": {}, "tasks_per_step": 3, "group_size": 4, "max_turns": 1}
    raw["judge"] = {"model": "fakejudge/marks", "check_groups": 0}
    raw["reward"] = {"kind": "judge"}
    raw["monitor"] = {"min_pairs": 8, "min_groups": 3, "window": 2, "resamples": 200}
    for k, v in over.items():
        raw.setdefault(k, {}).update(v)
    return raw


# ---- the maths ------------------------------------------------------------------------------


def _group(verifier: list[float | None], judge: list[float], gid: str = "g") -> Group:
    trajs = [
        Trajectory(id=f"{gid}-t{i}", env_id="e", task_id="t",
                   messages=[Message(role="user", content=f"q{i}")], verifiable_reward=v)
        for i, v in enumerate(verifier)
    ]  # fmt: skip
    j = Judgement(
        group_id=gid,
        spec_hash="h",
        scores=[
            TrajectoryScore(trajectory_id=t.id, score=s) for t, s in zip(trajs, judge, strict=True)
        ],
    )
    return Group(id=gid, env_id="e", task_id="t", trajectories=trajs, judgement=j)


def test_pairwise_counts_only_pairs_the_verifier_orders_and_judge_ties_count_half():
    u = group_unit(_group([1.0, 0.0, 0.0, 1.0], [0.9, 0.5, 0.5, 0.5]), step=0)
    assert u is not None and u.source == "verifier" and u.pairs == 4
    assert u.agree == 2 + 0.5 * 2  # t0 beats both fails; t3 ties both
    # the judge's top (t0) passes; t3 (tied with the fails) is not at the top
    assert u.top_fail == 0.0
    worst = group_unit(_group([1.0, 0.0, 0.0], [0.1, 0.8, 0.8]), step=0)
    assert worst is not None and worst.agree == 0 and worst.top_fail == 1.0


def test_a_group_the_verifier_does_not_order_is_judged_against_a_persons_ranking():
    g = _group([0.0, 0.0, 0.0], [0.9, 0.2, 0.1])
    assert group_unit(g, 0) is None
    ranking = {t.id: r for t, r in zip(g.trajectories, [1, 2, 3], strict=True)}
    u = group_unit(g, 0, rankings=[ranking])
    assert u is not None and u.source == "human" and u.pairs == 3 and u.agree == 3
    assert u.top_fail is None


@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=2, max_size=6).flatmap(
        lambda v: st.tuples(st.just(v), st.lists(st.floats(0, 1), min_size=len(v), max_size=len(v)))
    )
)
def test_a_judge_and_its_mirror_image_split_every_ordered_pair_between_them(vj):
    verifier, judge = vj
    u = group_unit(_group(list(verifier), judge), 0)
    m = group_unit(_group(list(verifier), [1 - s for s in judge]), 0)
    if u is None:
        assert m is None
        return
    assert m is not None and u.pairs == m.pairs
    assert u.agree + m.agree == pytest.approx(u.pairs)
    assert 0.0 <= u.agree <= u.pairs


def test_agreement_has_bootstrap_cis_over_groups_and_the_guard_rule_needs_enough_pairs():
    good = [group_unit(_group([1.0, 0.0, 0.0], [0.9, 0.1, 0.2], f"g{i}"), 0) for i in range(6)]
    a = agreement(good, resamples=200)
    assert (
        a.pairwise == 1.0 and a.pairwise_ci == (1.0, 1.0) and a.tau == pytest.approx(0.8165, 1e-3)
    )
    assert a.groups == 6 and a.pairs == 12 and a.top_fail_rate == 0.0
    settings = MonitorSection(min_pairs=12, min_groups=6, window=1, resamples=200)
    mon = JudgeMonitor(settings, "judge")
    anti = [_group([1.0, 0.0, 0.0], [0.1, 0.9, 0.8], f"a{i}") for i in range(5)]
    assert mon.observe(0, anti, {}).stop is None  # 10 pairs in 5 groups: not yet enough
    res = mon.observe(1, [_group([1.0, 0.0, 0.0], [0.1, 0.9, 0.8], "a5")], {})
    assert res.stop and "no better than chance" in res.stop and "pairwise 0.00" in res.stop
    off = JudgeMonitor(settings, "judge+verifiable")  # guard "auto": off for a blended reward
    blend = off.observe(0, [*anti, _group([1.0, 0.0, 0.0], [0.1, 0.9, 0.8], "a5")], {})
    assert blend.stop is None and not off.guard_on
    # ... but the same test still runs: the step is flagged below chance, and the summary says so
    assert blend.below and "no better than chance" in blend.below and "pairwise 0.00" in blend.below
    assert blend.metrics()["judge_below_chance"] and off.summary()["below_chance"] is True
    assert res.below is None and not res.metrics()["judge_below_chance"]  # the guard spoke instead
    fine = JudgeMonitor(settings, "judge+verifiable")
    step = fine.observe(
        0, [_group([1.0, 0.0, 0.0], [0.9, 0.1, 0.2], f"f{i}") for i in range(6)], {}
    )
    assert step.below is None and fine.summary()["below_chance"] is False


def test_verifier_constant_and_a_failed_check_are_read_as_the_refusal_needs():
    assert verifier_constant([_group([0.0, 0.0], [0.1, 0.2])]) is True
    assert verifier_constant([_group([0.0, 0.0], [0.1, 0.2]), _group([1, 0], [0, 1], "b")]) is False
    assert verifier_constant([_group([None, None], [0.1, 0.2])]) is None
    assert check_failed({"kendall_tau": {"value": -0.03, "ci_low": -0.15, "ci_high": 0.09}})
    assert not check_failed({"kendall_tau": {"value": 0.6, "ci_low": 0.2, "ci_high": 0.9}})
    assert not check_failed(None) and not check_failed({"kendall_tau": {"ci_low": None}})


# ---- the trainer ----------------------------------------------------------------------------


def test_a_judge_that_turns_anti_correlated_mid_run_is_stopped_by_the_guard(
    tiny, fake, tmp_path, capsys
):
    fake.script = [mark_judge(anti_after=6)]  # good for steps 1-2 (3 groups each), then inverted
    cfg = tmp_path / "train.toml"
    out = tmp_path / "run"
    cfg.write_text(to_toml(_raw(tiny, out, steps=8)))
    assert main(["train", "--config", str(cfg), "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert "judge guard" in err and "no better than chance" in err and "pairwise 0.00" in err
    # the window caught the turn (the run-wide number still averages in the good start), and
    # the message says what to do
    assert "over the last 2 steps" in err and "Options:" in err and "judge-train" in err
    report = json.loads((out / "guard_stop.json").read_text())
    stopped = report["step"]
    assert 2 <= stopped < 7 and report["guard_stopped"] is True
    assert (out / "adapter" / "adapter_config.json").is_file()  # the last good step's adapter
    with Store(out / "store.db", readonly=True) as s:
        rows = {r["step"]: r["metrics"] for r in s.steps(s.runs()[0]["id"])}
    assert sorted(rows) == list(range(stopped + 1))
    assert rows[0]["judge_pairwise"] == 1.0 and rows[0]["judge_top_fail_rate"] == 0.0
    assert rows[1]["judge_pairwise"] == 1.0 and not rows[1]["guard_stopped"]  # not stopped early
    assert "loss" not in rows[stopped] and rows[stopped]["judge_pairwise"] == 0.0
    assert rows[stopped]["judge_pairwise_run"] < rows[0]["judge_pairwise_run"]


def test_an_anti_correlated_judge_in_a_blend_is_warned_about_and_flagged_not_stopped(tiny, fake, tmp_path):  # fmt: skip
    fake.script = [mark_judge(anti_after=0)]  # inverted from the first call
    said: list[str] = []
    raw = _raw(tiny, tmp_path / "run", steps=2, reward={"kind": "judge+verifiable"})
    summary = Trainer(validate_config(raw, TrainConfig), progress=False, echo=said.append).run()
    assert summary["steps_run"] == 2 and summary["judge_below_chance_steps"] == 2
    assert summary["monitor"]["guard"] is False and summary["monitor"]["below_chance"] is True
    warned = [line for line in said if line.startswith("warning: judge monitor: step")]
    assert (
        len(warned) == 2
        and "no better than chance" in warned[0]
        and "'judge+verifiable'" in warned[0]
    )
    assert "reward.verifiable_weight" in warned[0]  # the way out is named
    assert sum("JUDGE BELOW CHANCE" in line for line in said) == 2  # on each step line
    assert "BELOW CHANCE: the judge's share of the reward was noise" in monitor_sentence(
        summary["monitor"]
    )
    assert monitor_fields(summary["monitor"])["judge_below_chance"] is True
    with Store(tmp_path / "run" / "store.db", readonly=True) as s:
        rows = [r["metrics"] for r in s.steps(summary["run_id"])]
    assert [r["judge_below_chance"] for r in rows] == [True, True]
    assert all(r["trained_trajectories"] > 0 for r in rows)  # trained on: the run went on


def test_a_good_judge_is_not_stopped_and_the_envs_tools_reach_its_prompt(tiny, fake, tmp_path):
    fake.script = [mark_judge()]
    said: list[str] = []
    cfg = validate_config(_raw(tiny, tmp_path / "run", steps=3), TrainConfig)
    summary = Trainer(cfg, progress=False, echo=said.append).run()
    assert summary["steps_run"] == 3
    mon = summary["monitor"]
    assert mon["guard"] is True and mon["pairwise"] == 1.0 and mon["top_fail_rate"] == 0.0
    assert mon["tau"] > 0.5 and mon["pairs"] >= 8
    assert any("judge~verifier pairwise 1.000" in line for line in said)
    fields = monitor_fields(mon)  # what `rankgym demo --json` adds
    assert fields["judge_pairwise_on_policy"] == 1.0 and fields["judge_top_fail_rate"] == 0.0
    assert fields["judge_tau_on_policy"] == mon["tau"]
    assert "pairwise 1.00 [1.00, 1.00] (0.5 = chance)" in monitor_sentence(mon)
    assert fields["judge_tied_shorter"] == mon["tied_shorter"]
    assert fields["judge_monitor_tied_pairs"] == mon["tied_pairs"]
    tied = {**mon, "tied_pairs": 7, "tied_shorter": 0.71}
    assert "of 7 pairs the verifier ties it preferred the shorter 0.71" in monitor_sentence(tied)
    # the tools section of every judge request lists the env's tool, schema and description
    for messages in fake.requests:
        tools = re.search(r"<tools>\n(.*?)\n</tools>", messages[-1]["content"], re.DOTALL)
        assert tools is not None and '"flip_coin"("side": "string")' in tools.group(1)
        assert "Turn the coin to the side named" in tools.group(1)
    with Store(tmp_path / "run" / "store.db", readonly=True) as s:
        g = s.get_group(s.group_ids()[0])
    assert [t["function"]["name"] for t in g.tools] == ["flip_coin"]  # stored once per group


def test_a_step_without_verifier_signal_and_a_failed_judge_is_refused_or_forced(
    tiny, fake, tmp_path, monkeypatch
):
    from rankgym.trainer import loop

    failed = {"decision": "warn", "kendall_tau": {"value": -0.03, "ci_low": -0.15, "ci_high": 0.09}}
    monkeypatch.setattr(loop, "judge_preflight", lambda *a, **k: dict(failed))
    fake.script = [
        lambda m: json.dumps(
            {
                "scores": [
                    {"trajectory_id": lab, "score": (k % 3) / 2}
                    for k, lab in enumerate(parse_ids_line(m[-1]["content"]) or [])
                ]
            }
        )
    ]  # fmt: skip  (judge scores vary: without the refusal the step would train on them)
    raw = _raw(tiny, tmp_path / "a", steps=2, reward={"kind": "judge+verifiable"})
    raw["env"]["kwargs"] = {"constant": True}
    with pytest.raises(NoSignalStep, match=r"step 1: all 3 groups have constant verifier.*--force"):
        Trainer(validate_config(raw, TrainConfig), progress=False).run()
    said: list[str] = []
    raw["out_dir"] = str(tmp_path / "b")
    cfg = validate_config(raw, TrainConfig)
    summary = Trainer(cfg, progress=False, echo=said.append, force=True).run()
    assert summary["steps_run"] == 2 and summary["forced_no_signal_steps"] == 2
    assert sum("warning: step" in line and "--force: training anyway" in line for line in said) == 2
    assert sum("NO VERIFIER SIGNAL (forced)" in line for line in said) == 2
    with Store(tmp_path / "b" / "store.db", readonly=True) as s:
        rows = [r["metrics"] for r in s.steps(summary["run_id"])]
    assert all(r["forced_no_signal"] and r["no_verifier_signal"] for r in rows)
    assert all(r["trained_trajectories"] > 0 for r in rows)  # forced: the judge's noise trained

    # monitor.no_signal = "skip" (the demo's): flagged, warned, no update, and the run goes on
    said.clear()
    raw["out_dir"], raw["monitor"] = str(tmp_path / "c"), {"no_signal": "skip"}
    summary = Trainer(validate_config(raw, TrainConfig), progress=False, echo=said.append).run()
    assert summary["steps_run"] == 2 and summary["skipped_no_signal_steps"] == 2
    assert summary["forced_no_signal_steps"] == 0
    assert sum("no_signal = 'skip': no update this step" in line for line in said) == 2
    assert sum("NO VERIFIER SIGNAL (skipped)" in line for line in said) == 2
    with Store(tmp_path / "c" / "store.db", readonly=True) as s:
        rows = [r["metrics"] for r in s.steps(summary["run_id"])]
    assert all(r["skipped_no_signal"] and r["trained_trajectories"] == 0 for r in rows)
    with pytest.raises(NoSignalStep, match="monitor.no_signal = 'skip'"):  # the way out is named
        raw["out_dir"], raw["monitor"] = str(tmp_path / "d"), {"no_signal": "stop"}
        Trainer(validate_config(raw, TrainConfig), progress=False).run()


def test_the_runs_page_shows_the_monitor_curves_a_guard_stop_a_judge_below_chance_and_dropped(
    tmp_path, monkeypatch
):
    path = tmp_path / "s.db"
    with Store(path) as s:
        s.create_run(name="t", kind="train", run_id="t")
        for step in range(3):
            g = _group([1.0, 0.0], [0.9, 0.1], f"g{step}").model_copy(update={"run_id": "t", "step": step, "judgement": None})  # fmt: skip
            s.put_groups([g])
            row = {"reward_mean": 0.5, "judge_pairwise": 1.0 - 0.5 * step, "judge_pairwise_run": 0.9,
                   "judge_pairwise_run_low": 0.2, "judge_pairwise_run_high": 0.95,
                   "judge_tau_run": 0.3, "judge_top_fail_rate": 0.0, "monitor_pairs_run": 10 * (step + 1),
                   "guard_stopped": step == 2, "judge_below_chance": step == 1,
                   "judge_dropped": step >= 1, "judge_signal": 0.6 - 0.3 * step,
                   "judge_signal_run": None if step == 0 else 0.4}  # fmt: skip
            s.log_step("t", step, row)
    at = runs_page(path, monkeypatch)
    import pandas as pd

    from rankgym.dashboard.data import monitor_frames
    from rankgym.step_metrics import StepMetrics

    with Store(path, readonly=True) as s:
        logged = pd.DataFrame([{"step": r["step"], **StepMetrics.from_dict(r["metrics"]).series()} for r in s.steps("t")]).set_index("step")  # fmt: skip
    signal = monitor_frames(logged)["signal"]  # the chart "Judge's reward vs the verifier's"
    assert list(signal.columns) == ["this step", "running"] and signal["this step"].iloc[2] == 0.0
    assert any(h.value == "Judge monitor" for h in at.subheader)
    assert any("judge guard stopped this run at step 2" in e.value for e in at.error)
    assert any("no better than chance at step(s) 1:" in w.value for w in at.warning)
    assert any("dropped from the reward at step 1" in w.value for w in at.warning)
    assert any("(30 pairs so far)" in c.value for c in at.caption)


def test_a_resumed_run_keeps_counting_the_steps_it_already_did(tiny, fake, tmp_path):
    fake.script = [mark_judge()]
    raw = _raw(tiny, tmp_path / "run", steps=2)
    first = Trainer(validate_config(raw, TrainConfig), progress=False).run()["monitor"]
    raw["steps"] = 3
    again = Trainer(validate_config(raw, TrainConfig), progress=False, resume=True).run()
    assert again["start_step"] == 2 and again["steps_run"] == 1
    with Store(tmp_path / "run" / "store.db", readonly=True) as s:
        rows = [r["metrics"] for r in s.steps(again["run_id"])]
    assert again["monitor"]["pairs"] == rows[2]["monitor_pairs_run"]
    assert rows[2]["monitor_pairs_run"] == first["pairs"] + rows[2]["monitor_pairs"]
