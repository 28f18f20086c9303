"""Supervised warm start: LoRA fine-tuning on demonstrations rendered exactly as the policy sees them.

SmolLM2-135M follows no tool protocol zero-shot, so RL alone never discovers tool calls on CPU.
A few minutes of SFT on demonstrations fixes that; GRPO then continues from the adapter it
writes (``[sft]`` in a train config, or ``rankgym sft`` then ``Trainer(init_adapter=...)``).

Demonstrations come from one of three sources, never from the test split:

- ``oracle``: the env's scripted solution (``env.oracle(task)``) on train-split tasks, played
  by the rollout driver with the ``OraclePolicy`` (the episodes GRPO's rollouts would record);
  only episodes that end without an error at the env's success threshold are kept;
- ``store``: trajectories of a store, selected by verifiable reward (``select = "verifier"``,
  reward >= ``min_reward``) or by the judge (``select = "judge"``: the top-scored trajectory of
  each judged group) — rejection sampling / expert iteration; trajectories of tasks in the env's
  test split are skipped;
- ``jsonl``: one chat example per line in ART's SFT format, ``{"messages": [...], "tools":
  [...]}`` (OpenAI messages, optional OpenAI tool schemas), e.g. distilled from a stronger model.

Every conversation is rendered by ``TransformersPolicy.demonstration`` (``envs.policies.render``):
the chat template, system prompt and tool-call protocol of the rollout, one token row per
conversation (each turn's prompt extends the previous one), loss on assistant tokens only —
the same rows and masks ``grpo.trajectory_rows`` builds for GRPO. The loss is the mean token
cross-entropy over a batch's assistant tokens.

JSONL lines are validated per line (``sft_data``: schema, size limits, errors naming the line
and field), and every message of every source is cut to its token budget before rendering.

What it does not do: no packing of several conversations into one row, no shortening of the
repeated tool list (it is what the policy sees), no validation split or early stopping, and
no check that a JSONL example is correct (only that it is well-formed).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from peft import set_peft_model_state_dict
from safetensors.torch import load_file
from tqdm import tqdm

from rankgym.envs.base import Env
from rankgym.envs.judge_split import JUDGE_SPLIT
from rankgym.envs.policies import TransformersPolicy
from rankgym.envs.policies.scripted import OraclePolicy
from rankgym.envs.rollout import EnvFactory, rollout_groups
from rankgym.errors import UserError
from rankgym.model import bound_heap, release_freed_memory
from rankgym.store import Store
from rankgym.trainer.checkpointing import KEEP_ACTIVATIONS_TOKENS as KEEP_TOKENS
from rankgym.trainer.checkpointing import checkpointing_paused, keeps_activations
from rankgym.trainer.config import SFTSection, TrainConfig
from rankgym.trainer.context import TrainingContext
from rankgym.trainer.finite import check_update
from rankgym.trainer.grpo import (
    Sample,
    collate,
    lora_inputs_uncast,
    token_logprobs,
    trajectory_rows,
)
from rankgym.trainer.setup import adamw_with_warmup, make_env_factory
from rankgym.trainer.sft_data import MAX_COMPLETION_TOKENS, fit_conversation, read_jsonl

__all__ = [
    "Conversation",
    "SFTStats",
    "check_demonstrations",
    "jsonl_conversations",
    "oracle_conversations",
    "oracle_demonstrations",
    "render_rows",
    "sft_section",
    "sft_train",
    "store_conversations",
    "warm_start",
]

Rows = list[tuple[list[int], list[int]]]
_HINT = "lower [sft] lr or check the demonstrations"


@dataclass
class Conversation:
    """A demonstration: OpenAI messages, the tool schemas the policy saw, and where it came from."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    source: str = ""


@dataclass
class SFTStats:
    """What one SFT run did. ``tokens``/``assistant_tokens``: of the dataset; ``seen_tokens``: all
    tokens processed (padding excluded); ``epochs``: seen / dataset tokens."""

    examples: int = 0
    tokens: int = 0
    assistant_tokens: int = 0
    seen_tokens: int = 0
    steps: int = 0
    loss_first: float | None = None
    loss_last: float | None = None
    seconds: float = 0.0
    steps_planned: int = 0
    max_minutes: float | None = None
    stopped_on_time_cap: bool = False
    """True when ``max_minutes`` ran out before ``steps_planned`` were done."""
    losses: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "losses"}
        d["assistant_token_share"] = self.assistant_tokens / self.tokens if self.tokens else None
        d["epochs"] = self.seen_tokens / self.tokens if self.tokens else None
        d["tokens_per_s"] = self.seen_tokens / self.seconds if self.seconds else None
        return d


def oracle_demonstrations(
    env: Env, task_ids: Sequence[str], seed: int = 0, split: str = "train"
) -> list[Conversation]:
    """The successful oracle episodes of ``task_ids`` (of ``split``) on ``env``, in that order.

    The episodes are the rollout driver's (``rollout_groups`` with the ``OraclePolicy``), one
    at a time on ``env``; an episode that ends in an error (no oracle, a script that runs out)
    or below the env's success threshold is left out.
    """
    one_env = EnvFactory(lambda: env, env.env_id)  # one episode at a time: one env is enough
    groups = rollout_groups(one_env, OraclePolicy(), task_ids=task_ids, group_size=1, split=split,
                            seed=seed, progress=False, max_concurrent=1)  # fmt: skip
    return [
        Conversation([m.to_openai() for m in t.messages], list(g.tools), f"oracle:{g.task_id}")
        for g in groups
        for t in g.trajectories
        if t.error is None and (t.verifiable_reward or 0.0) >= env.success_threshold
    ]


def oracle_conversations(
    make_env: Callable[[], Env],
    n_tasks: int | None = None,
    seed: int = 0,
    *,
    judge_split: bool = False,
) -> list[Conversation]:
    """Successful oracle episodes (:func:`oracle_demonstrations`) on train-split tasks
    (``n_tasks`` drawn with ``seed``; all by default), and on the env's ``judge`` split when
    ``judge_split`` (it is carved from train: GRPO never draws it, SFT may)."""
    env = make_env()
    tasks = list(env.tasks("train"))
    if judge_split and JUDGE_SPLIT in env.splits:
        tasks += env.tasks(JUDGE_SPLIT)  # marked split="judge"
    if not tasks:
        raise UserError("sft: the env has no train-split tasks to demonstrate")
    random.Random(seed).shuffle(tasks)
    chosen = tasks[: n_tasks or len(tasks)]
    out = [
        c
        for split in ("train", JUDGE_SPLIT)
        if (ids := [t.id for t in chosen if (t.split or "train") == split])
        for c in oracle_demonstrations(env, ids, seed, split)
    ]
    if not out:
        raise UserError(
            f"sft.source = 'oracle': {env.env_id} has no oracle (or none succeeded); use "
            "source = 'store' or 'jsonl'"
        )
    return out


def store_conversations(
    store_path: str | Path,
    make_env: Callable[[], Env],
    *,
    select: str = "verifier",
    min_reward: float = 1.0,
    run_id: str | None = None,
) -> list[Conversation]:
    """Trajectories of a store chosen by verifier reward or judge rank (see the module doc)."""
    if not Path(store_path).is_file():
        raise UserError(f"sft.path: store {str(store_path)!r} does not exist")
    env = make_env()
    test_ids = {t.id for t in env.tasks("test")}
    tools_of: dict[str, list[dict[str, Any]]] = {}
    out: list[Conversation] = []
    with Store(store_path, readonly=True) as store:
        for gid in store.group_ids(run_id=run_id) if run_id else store.group_ids():
            g = store.get_group(gid)
            if g.task_id in test_ids or g.env_id != env.env_id:
                continue
            if select == "judge":
                if g.judgement is None or g.judgement.status != "ok" or not g.judgement.scores:
                    continue
                best = max(g.judgement.scores, key=lambda s: s.score).trajectory_id
                chosen = [t for t in g.trajectories if t.id == best]
            else:
                chosen = [
                    t
                    for t in g.trajectories
                    if t.verifiable_reward is not None and t.verifiable_reward >= min_reward
                ]
            for t in chosen:
                if t.error:
                    continue
                if g.task_id not in tools_of:
                    _, info = env.reset(options={"task_id": g.task_id})
                    tools_of[g.task_id] = list(info.get("tools") or [])
                msgs = [m.to_openai() for m in t.messages]
                out.append(Conversation(msgs, tools_of[g.task_id], f"store:{t.id}"))
    if not out:
        raise UserError(
            f"sft: no trajectory of {str(store_path)!r} passed select = {select!r}"
            + (f" (min_reward {min_reward})" if select == "verifier" else "")
        )
    return out


def jsonl_conversations(path: str | Path) -> list[Conversation]:
    """Chat examples in ART's SFT format, one JSON object per line: ``messages`` (+ ``tools``).

    Each line is validated by ``sft_data.Example`` (limits and refusals: ``sft_data``'s docstring);
    the first bad line is a UserError naming the line and field.
    """
    return [
        Conversation(
            [m.to_openai() for m in ex.messages],
            [t.model_dump(mode="json") for t in ex.tools or []],
            f"jsonl:{n}",
        )
        for n, ex in read_jsonl(path)
    ]


def render_rows(
    policy: TransformersPolicy,
    conversations: Iterable[Conversation],
    max_completion_tokens: int = MAX_COMPLETION_TOKENS,
) -> list[Rows]:
    """Token rows (ids, assistant mask) of each conversation, as the rollout renders it.

    Every message is first cut to its token budget (``sft_data.fit_conversation``) and every
    rendered completion to ``max_completion_tokens``, so one long demonstration cannot make a
    row the trainer cannot hold.
    """
    out = []
    for c in conversations:
        msgs = fit_conversation(c.messages, policy.tokenizer, max_completion_tokens=max_completion_tokens)  # fmt: skip
        turns = [
            t.model_copy(
                update={"completion_token_ids": t.completion_token_ids[:max_completion_tokens]}
            )  # fmt: skip
            for t in policy.demonstration(msgs, c.tools)
        ]
        rows = trajectory_rows(turns)
        if rows:
            out.append(rows)
    return out


MICRO_BATCH = 2
"""Demonstrations per forward/backward of an SFT batch: 2 x ~1,000 tokens keeps the SFT stage's
rise ~0.4 GB where a whole batch of 8 in one pass rose ~1.5 GB (bench/demo_memory.py)."""


def sft_train(
    model: Any,
    examples: list[Rows],
    *,
    pad_id: int,
    steps: int,
    lr: float = 4e-4,
    batch_size: int = 8,
    max_minutes: float | None = None,
    warmup_steps: int = 5,
    bf16: bool = False,
    seed: int = 0,
    progress: bool = False,
    echo: Callable[[str], None] | None = None,
    micro_batch_size: int = MICRO_BATCH,
    keep_activations_tokens: int = KEEP_TOKENS,
) -> SFTStats:
    """Train the trainable (LoRA) parameters of ``model`` on ``examples`` for ``steps`` batches.

    Each batch's loss (mean over its assistant tokens) is accumulated over micro-batches of
    ``micro_batch_size`` demonstrations, so the activations of only that many are alive at once;
    a micro-batch of at most ``keep_activations_tokens`` padded tokens runs without gradient
    checkpointing (``trainer/checkpointing.py``: the same gradients, faster, more memory).

    Batches cycle through shuffled epochs (seeded). Stops early after ``max_minutes`` (never
    before the first step) and says so in ``stopped_on_time_cap``. Leaves the model in eval mode.
    """
    if not examples:
        raise UserError("sft: no demonstrations to train on")
    rng = random.Random(seed)
    torch.manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt, sched = adamw_with_warmup(model, lr, warmup_steps)
    device = next(model.parameters()).device
    amp = (
        torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        if bf16
        else contextlib.nullcontext()
    )
    st = SFTStats(examples=len(examples), steps_planned=steps, max_minutes=max_minutes)
    st.tokens = sum(len(ids) for rows in examples for ids, _ in rows)
    st.assistant_tokens = sum(sum(m) for rows in examples for _, m in rows)
    order: list[int] = []
    t0 = time.perf_counter()
    bar = None
    if progress:
        bar = tqdm(total=steps, desc="sft", unit="step", leave=False)
    bound_heap()  # else glibc keeps GBs of freed activations resident (rankgym.model)
    model.train()
    try:
        for step in range(steps):
            if step and max_minutes is not None and time.perf_counter() - t0 > 60 * max_minutes:
                st.stopped_on_time_cap = True  # said by sft_stage and the train summary
                break
            batch: list[Rows] = []
            while len(batch) < min(batch_size, len(examples)):
                if not order:
                    order = list(range(len(examples)))
                    rng.shuffle(order)
                batch.append(examples[order.pop()])
            # the batch's token-mean loss, accumulated over micro-batches of similar lengths
            total = max(1, sum(sum(m) for rows in batch for _, m in rows))
            batch.sort(key=lambda rows: max(len(ids) for ids, _ in rows))
            value = 0.0
            for i in range(0, len(batch), micro_batch_size):
                mb = collate([Sample(r, 0.0) for r in batch[i : i + micro_batch_size]], pad_id, device)  # fmt: skip
                n_rows, length = mb.input_ids.shape
                keep = keeps_activations(n_rows, length, keep_activations_tokens)
                with checkpointing_paused(model, keep), lora_inputs_uncast(model, bf16):
                    with amp:
                        logp = token_logprobs(model, mb)
                    loss = -(logp * mb.loss_mask).sum() / total
                    loss.backward()
                value += float(loss.detach())
                st.seen_tokens += int(mb.attention_mask.sum())
            norm = float(torch.nn.utils.clip_grad_norm_(params, 1.0))
            check_update("sft", step + 1, loss=value, grad_norm=norm, hint=_HINT)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            check_update("sft", step + 1, params=params, hint=_HINT)
            st.losses.append(value)
            st.loss_first = value if st.loss_first is None else st.loss_first
            st.loss_last = value
            st.steps = step + 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{value:.3f}")
            if echo and (step + 1) % 10 == 0:
                echo(f"sft step {step + 1}/{steps}  loss {value:.3f}")
    finally:
        if bar is not None:
            bar.close()
        model.eval()
        release_freed_memory()  # glibc otherwise keeps ~5 GB of freed SFT activations resident
    st.seconds = time.perf_counter() - t0
    return st


def sft_section(cfg: TrainConfig) -> SFTSection:
    """``cfg.sft``; a ``UserError`` when the config has no ``[sft]`` section."""
    if cfg.sft is None:
        raise UserError("the config has no [sft] section; add one (see docs/training.md)")
    return cfg.sft


def _path(s: SFTSection) -> str:
    if not s.path:  # the config refuses this already; here for the type
        raise UserError(f"sft.path: source = {s.source!r} needs path")
    return s.path


def check_demonstrations(cfg: TrainConfig) -> None:
    """Read a JSONL ``[sft]`` source now, so that a bad line fails before the model loads (the
    other sources are read when the stage runs)."""
    s = sft_section(cfg)
    if s.source == "jsonl":
        jsonl_conversations(_path(s))


def conversations_for(cfg: TrainConfig) -> list[Conversation]:
    """The demonstrations a train config's ``[sft]`` section names."""
    s = sft_section(cfg)
    kwargs = cfg.env.kwargs if s.env_kwargs is None else s.env_kwargs
    if s.source == "jsonl":
        return jsonl_conversations(_path(s))
    make_env = make_env_factory(cfg.env.id, kwargs, cfg.env.max_turns)
    if s.source == "store":
        return store_conversations(
            _path(s), make_env, select=s.select, min_reward=s.min_reward, run_id=s.run
        )
    return oracle_conversations(make_env, s.tasks, seed=cfg.seed, judge_split=s.judge_split)


def sft_stage(
    cfg: TrainConfig,
    ctx: TrainingContext,
    out_dir: str | Path,
    *,
    progress: bool = False,
    echo: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run a config's ``[sft]`` section on ``ctx.model`` (a peft LoRA model) and save the adapter.

    Writes ``out_dir`` atomically (peft adapter files + ``meta.json`` with the env, base model and
    SFT stats), so ``rankgym eval --adapter``, ``--policy hf:BASE@DIR`` and GRPO load it.
    Returns the summary it wrote.
    """
    s = sft_section(cfg)
    say = echo or (lambda _m: None)
    convs = conversations_for(cfg)
    model, tokenizer = ctx.model, ctx.tokenizer
    renderer = ctx.policy("sft")  # renders only: its sampling settings play no part
    # completions as long as the policy may sample, and never under the default budget
    rows = render_rows(renderer, convs, max(MAX_COMPLETION_TOKENS, cfg.policy.max_new_tokens))
    say(
        f"sft: {len(rows)} demonstrations from {s.source}; {s.steps} steps of {s.batch_size}, "
        f"lr {s.lr:g}"
    )
    stats = sft_train(model, rows, pad_id=tokenizer.pad_token_id, steps=s.steps, lr=s.lr,
                      batch_size=s.batch_size, max_minutes=s.max_minutes, bf16=ctx.bf16,
                      seed=cfg.seed, progress=progress, echo=say,
                      keep_activations_tokens=s.keep_activations_tokens)  # fmt: skip
    summary = {
        "source": s.source,
        "conversations": len(convs),
        **stats.summary(),
    }
    out = Path(out_dir)
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    meta = {
        "kind": "sft",
        "env": {
            "id": cfg.env.id,
            "kwargs": cfg.env.kwargs if s.env_kwargs is None else s.env_kwargs,
        },
        "policy_model": cfg.policy.model,
        "max_new_tokens": cfg.policy.max_new_tokens,
        "sft": summary,
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    say(
        f"sft: {stats.steps} steps in {stats.seconds:.0f}s, loss {stats.loss_first:.3f} -> "
        f"{stats.loss_last:.3f}; adapter {out}"
    )
    if stats.stopped_on_time_cap:
        say(
            f"sft: stopped on its time cap (max_minutes = {stats.max_minutes:g}) after "
            f"{stats.steps} of {stats.steps_planned} steps"
        )
    return summary


def warm_start(
    cfg: TrainConfig,
    ctx: TrainingContext,
    sft_dir: Path,
    *,
    reuse: bool,
    load: bool,
    progress: bool = False,
    echo: Callable[[str], None] | None = None,
) -> dict[str, Any] | None:
    """The trainer's ``[sft]`` stage: with ``reuse`` and an adapter already in ``sft_dir``, load
    it into ``ctx.model`` (when ``load``: no GRPO checkpoint overrides it) and return its
    summary; else run :func:`sft_stage` into ``sft_dir``."""
    weights = sft_dir / "adapter_model.safetensors"
    if reuse and weights.is_file():
        if load:
            set_peft_model_state_dict(ctx.model, load_file(str(weights)))
        if echo:
            echo(f"resume: reusing the SFT warm start in {sft_dir}")
        return json.loads((sft_dir / "meta.json").read_text()).get("sft")
    return sft_stage(cfg, ctx, sft_dir, progress=progress, echo=echo)
