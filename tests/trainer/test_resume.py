"""A run killed with SIGKILL mid-step and resumed ends with the same adapter as an unkilled run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from trainer_helpers import install_fake_judge, save_tiny_model, tiny_config

from rankgym.config import validate_config
from rankgym.store import Store
from rankgym.trainer.config import TrainConfig
from rankgym.trainer.loop import Trainer

HERE = Path(__file__).parent

# The child runs the real trainer; the test only decides where it dies: right after the
# optimizer step of a given step (weights changed in memory, nothing saved), or inside the
# checkpoint write (temp dir written, not yet renamed into place).
CHILD = textwrap.dedent(
    """
    import json, os, signal, sys
    sys.path[:0] = [{helpers!r}, {tests!r}]  # trainer_helpers, and the tests/fakes it imports
    import torch
    torch.set_num_threads(1)
    from trainer_helpers import install_fake_judge
    from rankgym.config import validate_config
    from rankgym.trainer import checkpoint, loop
    from rankgym.trainer.config import TrainConfig

    cfg = validate_config(json.loads(sys.argv[1]), TrainConfig)
    where, at = sys.argv[2], int(sys.argv[3])
    install_fake_judge()
    if where == "after_update":
        real = loop.grpo_update
        calls = []
        def dying_update(*a, **k):
            out = real(*a, **k)
            calls.append(1)
            if len(calls) == at:
                os.kill(os.getpid(), signal.SIGKILL)
            return out
        loop.grpo_update = dying_update
    elif where == "in_checkpoint":
        real_save = checkpoint.save_checkpoint
        def dying_save(out_dir, step, model, *a, **k):
            if step == at:
                model.save_pretrained(checkpoint.checkpoint_dir(out_dir) / f"step-{{step:06d}}.tmp-{{os.getpid()}}")
                os.kill(os.getpid(), signal.SIGKILL)
            return real_save(out_dir, step, model, *a, **k)
        loop.ckpt.save_checkpoint = dying_save
    loop.Trainer(cfg, resume=sys.argv[4] == "1", progress=False).run()
    """
)


def _child(cfg: dict, where: str, at: int, resume: bool, script: Path) -> int:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps(cfg), where, str(at), "1" if resume else "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(proc.stderr[-3000:])
    return proc.returncode


def test_sigkill_mid_step_then_resume_matches_uninterrupted(tmp_path: Path):
    torch.set_num_threads(1)
    model_dir = save_tiny_model(tmp_path / "tiny")
    install_fake_judge()

    ref_cfg = tiny_config(model_dir, tmp_path / "ref", steps=3)
    ref = Trainer(validate_config(ref_cfg, TrainConfig), progress=False).run()
    assert ref["steps_run"] == 3 and ref["no_signal_steps"] == 0

    script = tmp_path / "child.py"
    script.write_text(CHILD.format(helpers=str(HERE), tests=str(HERE.parent)))
    cfg = tiny_config(model_dir, tmp_path / "killed", steps=3)
    # dies right after the optimizer step of step 2 (of 3): step 1 is checkpointed, 2 is not
    assert _child(cfg, "after_update", 2, False, script) == -signal.SIGKILL
    ckdir = tmp_path / "killed" / "checkpoints"
    assert (ckdir / "latest").read_text() == "step-000001"
    # resumed, dies while writing the checkpoint of step 3
    assert _child(cfg, "in_checkpoint", 3, True, script) == -signal.SIGKILL
    assert (ckdir / "latest").read_text() == "step-000002"
    assert any(".tmp-" in p.name for p in ckdir.iterdir())
    # resumed again, finishes
    assert _child(cfg, "none", 0, True, script) == 0
    assert (ckdir / "latest").read_text() == "step-000003"
    assert not any(".tmp-" in p.name for p in ckdir.iterdir())

    want = load_file(str(tmp_path / "ref" / "adapter" / "adapter_model.safetensors"))
    got = load_file(str(tmp_path / "killed" / "adapter" / "adapter_model.safetensors"))
    assert want.keys() == got.keys()
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-5, atol=1e-6)
    assert any("lora_B" in k and want[k].abs().sum() > 0 for k in want)  # it did train

    store = Store(tmp_path / "killed" / "store.db", readonly=True)
    steps = store.steps("tiny")
    assert [s["step"] for s in steps] == [0, 1, 2]
    ref_steps = Store(tmp_path / "ref" / "store.db", readonly=True).steps("tiny")
    for a, b in zip(steps, ref_steps, strict=True):
        assert a["metrics"]["reward_mean"] == pytest.approx(b["metrics"]["reward_mean"])
    assert store.count_groups(run_id="tiny") == 6


def test_resume_refuses_a_changed_config(tmp_path: Path):
    model_dir = save_tiny_model(tmp_path / "tiny")
    cfg = tiny_config(model_dir, tmp_path / "run", steps=1)
    (tmp_path / "run").mkdir()
    dumped = validate_config(cfg, TrainConfig).model_dump(mode="json")
    (tmp_path / "run" / "run.json").write_text(json.dumps({"run_id": "x", "config": dumped}))
    changed = validate_config({**cfg, "seed": 8}, TrainConfig)
    from rankgym.errors import UserError

    with pytest.raises(UserError, match="seed"):
        Trainer(changed, resume=True, progress=False).setup()
    (tmp_path / "run" / "steps").mkdir()
    (tmp_path / "run" / "steps" / "step-000000.json").write_text("{}")
    with pytest.raises(UserError, match="--resume"):
        Trainer(validate_config(cfg, TrainConfig), progress=False).setup()


def test_a_bad_env_id_fails_before_writing_and_a_failed_start_leaves_the_dir_reusable(
    tmp_path: Path,
):
    from rankgym.errors import UserError

    model_dir = save_tiny_model(tmp_path / "tiny")
    cfg = tiny_config(model_dir, tmp_path / "run", steps=1)
    bad = validate_config({**cfg, "env": {**cfg["env"], "id": "CartPole-v1"}}, TrainConfig)
    with pytest.raises(UserError, match="env.id"):
        Trainer(bad, progress=False).setup()
    assert not (tmp_path / "run").exists()  # nothing written
    too_many = validate_config(
        {**cfg, "env": {**cfg["env"], "tasks_per_step": 50_000}}, TrainConfig
    )
    with pytest.raises(UserError, match="tasks_per_step"):
        Trainer(too_many, progress=False).setup()
    assert not (tmp_path / "run").exists()
    no_field = validate_config({**cfg, "env": {**cfg["env"], "stratify": "colour"}}, TrainConfig)
    with pytest.raises(UserError, match="env.stratify='colour'"):
        Trainer(no_field, progress=False).setup()
    assert not (tmp_path / "run").exists()
    # a start that died after run.json (no step done) does not block the next start
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text(json.dumps({"run_id": "old", "config": {}}))
    t = Trainer(validate_config(cfg, TrainConfig), progress=False)
    t.setup()
    assert json.loads((tmp_path / "run" / "run.json").read_text())["run_id"] == t.run_id
    t.store.close()
