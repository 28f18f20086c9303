"""`rankgym train` configuration: one TOML file validated into :class:`TrainConfig`.

Unknown keys are errors (``extra="forbid"``) and every error names the key (see
``rankgym.config.load_config``). Every number is finite (``inf``/``nan`` are refused anywhere
in the file, by ``rankgym.config.validate_config``, and by ``allow_inf_nan=False`` on every
section) and lies in the range its ``Field`` states; ``tests/trainer/test_config_numbers.py``
fails for a numeric field without both bounds. Relative paths in the file are resolved against the current
directory, not the config file's. Defaults are the CPU demo settings; samples/configs/ has a CPU
and a GPU file per built-in env.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rankgym.config import load_config
from rankgym.judges.router import RouterConfig
from rankgym.trainer.adapter_sync import VLLMSection
from rankgym.trainer.checkpointing import KEEP_ACTIVATIONS_TOKENS
from rankgym.trainer.rewards import REWARDS, load_reward_plugins


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


_Beta = Annotated[float, Field(ge=0.0, lt=1.0)]


class EnvSection(_Section):
    id: str = "rankgym/ToolUse-v0"
    """Registered env id (``rankgym envs`` lists them)."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Passed to the env constructor, e.g. ``{difficulty = "hard", families = ["lookup"]}``."""
    split: str = "train"
    tasks_per_step: int = Field(4, ge=1, le=100_000)
    group_size: int = Field(4, ge=2, le=1024)
    """Trajectories per task (GRPO's N); at least 2, or there is nothing to compare."""
    max_turns: int | None = Field(None, ge=1, le=1000)
    """Override the env's own turn limit."""
    stratify: str | None = None
    """Balance each step's tasks over this task field (e.g. ``"family"`` on ToolUse), so no
    task type goes unseen for several steps; None = a plain seeded draw."""

    @model_validator(mode="after")
    def _not_judge_split(self) -> EnvSection:
        if self.split == "judge":
            raise ValueError(
                "split = 'judge' holds the tasks set aside for judge data, which GRPO must never "
                "draw; train on split = 'train' (the judge split is already left out of it)"
            )
        return self


class PolicySection(_Section):
    model: str = "embedded"
    """``embedded`` (SmolLM2-135M-Instruct) or a local transformers model directory."""
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """Weight dtype of the frozen base model; LoRA weights and optimizer state stay fp32.
    ``auto`` = bfloat16 where the device computes bf16 natively (CUDA, AVX512-BF16, AMX),
    else float32. bf16 base weights give the same numbers as fp32 weights under bf16 autocast,
    without casting every weight on every call (measured 2-10x faster generation on CPU)."""
    device: str = "cpu"
    max_new_tokens: int = Field(64, ge=1, le=32768)
    temperature: float = Field(1.0, ge=0.0, le=10.0)
    """Rollout sampling temperature; the GRPO update divides the logits by it too (as TRL)."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    adapter: str | None = None
    """A peft adapter dir GRPO starts from (e.g. the ``--out`` of ``rankgym sft``), instead of a
    fresh LoRA; ``rankgym train --init-adapter DIR`` overrides it. Its LoRA rank and target
    modules are the adapter's own (``[lora]`` is then unused); an ``[sft]`` section is skipped."""


class LoraSection(_Section):
    r: int = Field(16, ge=1, le=1024)
    """LoRA rank; above 1024 the adapter outweighs a small model (``r = 1000000`` was OOM-killed)."""
    alpha: int = Field(32, ge=1, le=100_000)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: list[str] = Field(
        default_factory=lambda: [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ]
    )


class JudgeSection(_Section):
    model: str = "local/smollm2"
    """Any LiteLLM model string; ``local/smollm2`` is the embedded (weak) judge."""
    rubric: str | None = None
    """Path of a rubric (comparison prompt) file; the judge's default rubric if unset."""
    permutations: int = Field(1, ge=1, le=64)
    """Shuffled presentations per group, averaged (position-bias control)."""
    concurrency: int = Field(1, ge=1, le=1024)
    api_base: str | None = None
    """Server URL for self-hosted judges (``hosted_vllm/``, ``ollama/``); stored in the spec."""
    context_window: int | None = Field(None, ge=256, le=10_000_000)
    max_tokens: int | None = Field(None, ge=16, le=1_000_000)
    check_groups: int = Field(4, ge=0, le=200)
    """Calibration groups of the judge-check run before training on the judge (0 skips it;
    cached per judge spec). See ``rankgym.trainer.preflight``."""


class RewardSection(_Section):
    kind: str = "judge"
    """The reward type, a name in ``rankgym.trainer.rewards.REWARDS``: ``judge``,
    ``verifiable``, ``judge+verifiable``, or one registered with ``@register_reward``."""
    verifiable_weight: float = Field(0.5, ge=0.0, le=1.0)
    """For ``judge+verifiable``: reward = (1-w) * judge + w * verifiable."""
    scale_rewards: Literal["group", "batch", "none"] = "group"
    judge_threshold: Annotated[float, Field(ge=0.0, le=1.0)] | Literal["fit"] | None = None
    """Set: train on the judge's verdict, a score at or above it counting 1 and below it 0
    (``rewards.judge_verdict``), instead of the graded score; the monitor still reads the
    graded score. ``"fit"``: the cut of each judge ``[judge_train]`` trains, fitted on its
    labelled judge-split episodes (``trainer/judge_cut.py``). Unset (default): the graded score."""
    hack_penalty: bool = True
    """A trajectory the env raised a hack signal for (e.g. ``answer_spam``) gets the lowest reward
    of its group; the judge's own ``judge_*`` signals do not count (see ``rewards.py``)."""

    @field_validator("kind")
    @classmethod
    def _registered(cls, kind: str) -> str:
        if kind not in REWARDS:
            load_reward_plugins()  # an installed package's reward type
        if kind not in REWARDS:
            names = [repr(n) for n in REWARDS]
            expected = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
            raise PydanticCustomError(
                "literal_error",
                "Input should be {expected}",
                {"expected": expected, "allowed": list(REWARDS)},
            )
        return kind

    @model_validator(mode="after")
    def _threshold_needs_a_judge(self) -> RewardSection:
        if self.judge_threshold is not None and not REWARDS[self.kind].needs_judge:
            raise ValueError(
                f"judge_threshold cuts judge scores, but reward.kind = {self.kind!r} runs no "
                "judge; remove judge_threshold or use a judged kind (judge, judge+verifiable)"
            )
        return self


class LossSection(_Section):
    type: Literal["grpo", "dr_grpo", "dapo"] = "dapo"
    epsilon: float = Field(0.2, gt=0.0, le=10.0)
    epsilon_high: float | None = Field(None, gt=0.0, le=10.0)
    importance_sampling_level: Literal["token", "sequence"] = "token"
    beta: float = Field(0.0, ge=0.0, le=100.0)
    """KL coefficient to the base model (adapter disabled); 0 skips the reference pass."""
    max_completion_length: int | None = Field(None, ge=1, le=10_000_000)
    """dr_grpo normaliser; default ``policy.max_new_tokens * max_turns``."""


class OptimSection(_Section):
    lr: float = Field(2e-5, gt=0.0, le=1.0)
    weight_decay: float = Field(0.0, ge=0.0, le=10.0)
    betas: tuple[_Beta, _Beta] = (0.9, 0.99)
    """Adam's betas, each in [0, 1)."""
    warmup_steps: int = Field(0, ge=0, le=1_000_000)
    max_grad_norm: float = Field(1.0, gt=0.0, le=1e6)
    micro_batch_size: int = Field(4, ge=1, le=4096)
    """Trajectories per forward/backward; gradients accumulate over the whole step."""
    num_iterations: int = Field(1, ge=1, le=64)
    """Optimizer steps per batch of rollouts (TRL's mu)."""
    bf16: Literal["auto", "on", "off"] = "auto"
    """bf16 autocast: ``auto`` = on where the processor has native bf16 (CUDA, AVX512-BF16, AMX)."""
    gradient_checkpointing: bool = True
    """Recompute activations in backward (GRPO update and SFT). bench/memory.py, demo batch at
    micro-batch 2: RSS rise 0.78 vs 1.86 GB, update time 1.4-2x; a larger micro-batch wins most
    of the time back (RESULTS.md, issue 23)."""


class EvalSection(_Section):
    split: str = "test"
    tasks: int = Field(30, ge=1, le=100_000)
    samples: int = Field(2, ge=1, le=1024)
    """Samples per task (seeded, paired between base and adapter)."""
    temperature: float = Field(0.7, ge=0.0, le=10.0)
    every: int = Field(0, ge=0, le=1_000_000)
    """Evaluate held-out success every N steps during training (0 = only at the end if enabled)."""
    at_end: bool = False


class SFTSection(_Section):
    """Supervised warm start before GRPO (``trainer/sft.py``); GRPO continues from its adapter."""

    source: Literal["oracle", "store", "jsonl"] = "oracle"
    """``oracle``: the env's scripted solutions on train tasks; ``store``: trajectories of a store
    picked by ``select``; ``jsonl``: chat examples (``messages`` + optional ``tools`` per line)."""
    path: str | None = None
    """The store (``source = "store"``) or the JSONL file (``source = "jsonl"``)."""
    select: Literal["verifier", "judge"] = "verifier"
    """For ``store``: verifiable reward >= ``min_reward``, or the judge's top trajectory per group."""
    min_reward: float = Field(1.0, ge=0.0, le=1.0)
    run: str | None = None
    """For ``store``: only this run's groups."""
    env_kwargs: dict[str, Any] | None = None
    """Env kwargs for the demonstrations (oracle/store); default: ``env.kwargs``."""
    tasks: int | None = Field(None, ge=1, le=1_000_000)
    """For ``oracle``: how many train tasks to demonstrate (default: all of them)."""
    judge_split: bool = False
    """For ``oracle``: demonstrate the env's ``judge`` split too (train tasks GRPO never draws;
    the judge learns from them). Off by default: on the demo it raised SFT's held-out success
    but not SFT+GRPO's (bench/RESULTS.md, "The recipe at filing against today's")."""
    steps: int = Field(60, ge=1, le=1_000_000)
    batch_size: int = Field(8, ge=1, le=1024)
    lr: float = Field(4e-4, gt=0.0, le=1.0)
    max_minutes: float | None = Field(None, gt=0.0, le=10_080.0)
    """Stop SFT after this many minutes even if ``steps`` are not done."""
    keep_activations_tokens: int = Field(KEEP_ACTIVATIONS_TOKENS, ge=0, le=10_000_000)
    """A micro-batch of at most this many padded tokens (rows x length) keeps every activation
    instead of recomputing it (``[optim] gradient_checkpointing``): the same gradients, ~28%
    faster a step on the demo, ~1.2 MB more memory a token (``trainer/checkpointing.py``).
    0: always checkpoint."""

    @model_validator(mode="after")
    def _path_needed(self) -> SFTSection:
        if self.source != "oracle" and not self.path:
            raise ValueError(f"source = {self.source!r} needs path")
        return self


class MonitorSection(_Section):
    """The judge monitor and its guard (``trainer/monitor.py``; docs/judging.md)."""

    guard: Literal["auto", "on", "off"] = "auto"
    """Stop the run once the judge's running agreement with the verifier (or people) is shown
    to be no better than chance. ``auto`` = on when the reward is judge-only (``reward.kind =
    "judge"``, or a registered type with ``judge_only``; ``rewards.Reward``)."""
    min_pairs: int = Field(30, ge=1, le=10_000_000)
    """Pairs the verifier orders that the guard needs before it may stop a run."""
    min_groups: int = Field(6, ge=2, le=1_000_000)
    """Groups with such pairs that the guard needs (the CI is a bootstrap over groups)."""
    window: int = Field(4, ge=1, le=1_000_000)
    """The guard also looks at the last ``window`` steps alone (a judge that turns mid-run)."""
    resamples: int = Field(1000, ge=100, le=100_000)
    """Bootstrap resamples of each CI."""
    below_chance: Literal["warn", "drop"] = "warn"
    """With the guard off, a step where the judge's agreement is shown no better than chance (the
    guard's test): ``warn`` and train on the reward as configured, or ``drop`` the judge from a
    blended reward (``judge+verifiable``) for the rest of the run: from that step on GRPO trains
    on the verifier alone, while the judge still runs and the monitor keeps watching it."""
    no_signal: Literal["stop", "skip", "train"] = "stop"
    """A step whose groups all have constant verifier rewards, on a reward that uses a judge that
    failed its check: ``stop`` the run with the reason, ``skip`` its update (flagged, the run
    goes on), or ``train`` on the judge alone (flagged; what ``--force`` does)."""


_LABEL_SOURCES: tuple[Literal["verifier", "human"], ...] = ("verifier", "human")


class JudgeTrainSection(_Section):
    """Train a pairwise judge on this policy's own groups after ``[sft]``, before GRPO
    (``trainer/judge_stage.py``): the SFT adapter is rolled out on each env's ``judge`` split
    (train tasks GRPO never draws), the verifier (and people's rankings in ``stores``) label
    pairs, ``rankgym judge-train`` trains the LoRA, and the result is checked on held-out
    tasks of the same rollout. With ``use`` it then replaces ``[judge].model`` for GRPO."""

    envs: list[str] | None = None
    """Envs to roll the SFT policy out on (their ``judge`` split); default ``[env.id]``."""
    init_judge: str | None = Field(None, min_length=1)
    """A judge to start from instead of a fresh LoRA: ``local/smollm2@DIR`` (or a bare
    ``local/smollm2``, the shipped judge) or the folder ``rankgym judge-train --out`` wrote. The
    stage trains it further on this policy's judge-split groups (its LoRA shape; ``lora_r`` is
    ignored) and checks the result like a fresh one."""
    train: bool = True
    """False: train nothing; check ``init_judge`` on *every* labelled pair of this policy's
    judge-split groups (``trainer/judge_heldout.py``) and, when it passes, judge GRPO with it
    (refreshes, if any, still train)."""
    tasks: int | None = Field(None, ge=2, le=100_000)
    """Judge-split tasks per env (default: all of them)."""
    group_size: int = Field(4, ge=2, le=64)
    max_turns: int | None = Field(None, ge=1, le=1000)
    """Turns per judge-data episode (default: ``env.max_turns``, else the env's own)."""
    env_kwargs: dict[str, Any] | None = None
    """Kwargs of the training env for its judge-split rollout (default: ``env.kwargs``), e.g.
    more difficulties of the same families for more judge-split tasks."""
    max_pairs_per_task: int = Field(4, ge=1, le=10_000)
    """Labelled pairs kept per task and source (near misses first)."""
    reward_when_passed: Literal["judge"] | None = None
    """``judge``: when the trained judge passes its held-out check, GRPO's reward becomes
    judge-only (the verifier then only labels the judge's data and feeds the monitor); when it
    fails, the configured reward stays (``rankgym demo`` uses this)."""
    stores: list[str] = Field(default_factory=list)
    """More labelled stores to learn from (e.g. one with human rankings from the dashboard)."""
    sources: list[Literal["verifier", "human"]] = Field(
        default_factory=lambda: list(_LABEL_SOURCES)
    )
    human_weight: float = Field(1.0, ge=0.0, le=1000.0)
    """Loss weight of pairs labelled by people."""
    tie_ratio: float = Field(0.0, ge=0.0, le=100.0)
    """Tie pairs (equal verifier rewards, target 0.5) per decided pair, at most (``rankgym
    judge-train --tie-ratio``); 0 = none."""
    tie_loss: Literal["presentation", "served", "served-logit"] = "presentation"
    """What the tie loss pulls to 0.5 (``rankgym judge-train --tie-loss``): each presentation's
    P(first better), or ``served``: the pair's order-averaged P, the score GRPO reads, or
    ``served-logit``: its order-averaged logit (``rankgym.trainer.judge_loss``)."""
    lambda_tie: float = Field(1.0, ge=0.0, le=1000.0)
    """Weight of the tie loss (``rankgym judge-train --lambda-tie``)."""
    length_balance: bool = True
    """Subsample decided pairs so "the longer wins" scores 0.5 on each side (``rankgym
    judge-train --no-length-balance`` turns it off); the check compares the judge with the
    better length rule on its held-out pairs either way."""
    answer_swaps: int = Field(0, ge=0, le=64)
    """Answer swaps per success on the training side (``rankgym judge-train --answer-swaps``):
    a success with a final reply the policy wrote elsewhere in place of its own, labelled by
    replaying the env (``trainer/judge_counterfactuals.py``); 0 = none."""
    chain_edits: int = Field(0, ge=0, le=64)
    """Chain edits per success on the training side (``rankgym judge-train --chain-edits``): the
    success with its last call left out, or one more call the policy made in a failed episode,
    answering with what that chain returned, labelled by replaying the env
    (``trainer/judge_chain_edits.py``); 0 = none."""
    objective: Literal["pairwise", "pointwise"] = "pairwise"
    """``pairwise``: the judge compares two attempts (trained on labelled pairs);
    ``pointwise``: it reads one attempt and answers yes/no, trained on every training-side
    trajectory with a verifier outcome (``rankgym judge-train --objective``,
    ``trainer/judge_points.py``); the check is on held-out pairs either way."""
    agreement: bool = False
    """Pointwise only: the judge's prompt also says how many of the other attempts at the task
    gave the same final answer (``rankgym judge-train --agreement``,
    ``rankgym/judges/answers.py``)."""
    max_context_tokens: int = Field(768, ge=64, le=1_000_000)
    """Longest pair presentation trained on (``--max-context-tokens``); longer ones are skipped."""
    max_train_pairs: int = Field(150, ge=1, le=1_000_000)
    max_heldout_pairs: int = Field(60, ge=1, le=1_000_000)
    heldout_fraction: float = Field(0.3, gt=0.0, lt=1.0)
    """Share of the tasks with pairs held out for the check, and at least 3 (what the check
    needs) while one is left to train on."""
    epochs: int = Field(2, ge=1, le=1000)
    lr: float = Field(1e-3, gt=0.0, le=1.0)
    lora_r: int = Field(8, ge=1, le=1024)
    max_train_minutes: float | None = Field(None, gt=0.0, le=10_080.0)
    min_pairwise: float = Field(0.5, ge=0.0, le=1.0)
    """The check passes when the held-out pairwise accuracy's CI lies above this."""
    max_tied_shorter: float = Field(0.5, ge=0.0, le=1.0)
    """With held-out tie pairs (``tie_ratio`` > 0) the check also fails when the judge is shown
    to prefer the shorter of two verifier-tied trajectories more often than this (the 95%
    Wilson interval over those pairs lies above it): the length shortcut a judge-only reward
    teaches (bench/RESULTS.md, issue 22); 1.0 = never."""
    use: bool = True
    """Judge GRPO's groups with the trained judge (``[judge].model`` is replaced)."""
    refresh_every: int = Field(0, ge=0, le=1_000_000)
    """Online: every K GRPO steps retrain the judge (``refresh_data``); 0 = never."""
    refresh_data: Literal["run", "judge_split"] = "run"
    """What a refresh learns from (``trainer/judge_refresh.py``): ``run``, this run's groups so
    far (their verifier rewards and any rankings) plus the judge-split data, a fresh LoRA; or
    ``judge_split``, the current policy rolled out again on the judge split (tasks GRPO never
    draws) and the current judge trained further on those groups, so the verifier never labels
    a task GRPO trains on."""
    refresh_epochs: int | None = Field(None, ge=1, le=1000)
    """Epochs of each refresh (default: ``epochs``); a warm-started one needs fewer."""
    refresh_max_train_minutes: float | None = Field(None, gt=0.0, le=10_080.0)
    """Training time cap of each refresh (default: ``max_train_minutes``)."""
    watch_every: int = Field(0, ge=0, le=1_000_000)
    """Every K GRPO steps roll the policy out on the judge split and compare its verifier
    reward with the SFT start's (``trainer/judge_split_watch.py``); the guard stops a run whose
    policy is shown worse there. A ``judge_split`` refresh does this anyway; 0 = only then."""

    @model_validator(mode="after")
    def _init_judge_to_check(self) -> JudgeTrainSection:
        if not self.train and not self.init_judge:
            raise ValueError("train = false checks an existing judge: set init_judge")
        return self


class TrainConfig(_Section):
    name: str | None = None
    seed: int = Field(0, ge=0, le=2**63 - 1)
    steps: int = Field(8, ge=1, le=1_000_000)
    out_dir: str = Field("runs/train", min_length=1)
    """Checkpoints, the final adapter and ``run.json`` go here."""
    store: str | None = Field(None, min_length=1)
    """SQLite store path; default ``<out_dir>/store.db``."""
    keep_checkpoints: int = Field(2, ge=1, le=1000)
    env: EnvSection = Field(default_factory=EnvSection)
    policy: PolicySection = Field(default_factory=PolicySection)
    lora: LoraSection = Field(default_factory=LoraSection)
    judge: JudgeSection = Field(default_factory=JudgeSection)
    reward: RewardSection = Field(default_factory=RewardSection)
    loss: LossSection = Field(default_factory=LossSection)
    optim: OptimSection = Field(default_factory=OptimSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    sft: SFTSection | None = None
    """A supervised warm start before the first GRPO step (off unless the section is present)."""
    judge_train: JudgeTrainSection | None = None
    """Train a judge on the SFT policy's own groups before GRPO (off unless present)."""
    vllm: VLLMSection | None = None
    """Roll out through a vLLM server with one LoRA adapter per step (``adapter_sync.py``)."""
    router: RouterConfig | None = None
    """LiteLLM Router for the judge: deployments, fallbacks, rpm/tpm, retry budget."""
    monitor: MonitorSection = Field(default_factory=MonitorSection)
    """Judge-vs-verifier agreement every step, and the guard that stops a judge-only run."""

    @property
    def store_path(self) -> str:
        return self.store or str(Path(self.out_dir) / "store.db")

    @model_validator(mode="after")
    def _judge_split_carved(self) -> TrainConfig:
        """A stage that reads the judge split needs an env that carves one."""
        if self.judge_train is not None and self.env.kwargs.get("judge_split", True) is False:
            raise ValueError(
                "judge_train learns from the env's judge split, but env.kwargs.judge_split = "
                "false carves none (and GRPO would draw the judge's tasks): remove it"
            )
        if self.sft is not None and self.sft.judge_split:
            kwargs = self.env.kwargs if self.sft.env_kwargs is None else self.sft.env_kwargs
            if kwargs.get("judge_split", True) is False:
                raise ValueError(
                    "sft.judge_split = true adds the judge split's demonstrations, but the env "
                    "is made with judge_split = false (train already holds every task): drop "
                    "one of them"
                )
        return self

    @model_validator(mode="after")
    def _fit_needs_a_trained_judge(self) -> TrainConfig:
        """``judge_threshold = "fit"`` fits the cut of the judge ``[judge_train]`` trains."""
        if self.reward.judge_threshold == "fit" and not (self.judge_train and self.judge_train.use):
            raise ValueError(
                'reward.judge_threshold = "fit" fits the cut of the judge the [judge_train] '
                "stage trains, but this config has no [judge_train] section with use = true: "
                "add one, or give the cut as a number (e.g. 0.5)"
            )
        return self


def load_train_config(path: str | Path) -> TrainConfig:
    """Read and validate a training TOML file (errors name the key)."""
    return load_config(path, TrainConfig)
