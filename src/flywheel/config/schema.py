"""The sections of a config and the whole ``Config``: one home per default, every field documented here."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from flywheel.config.algorithms import ALGORITHM_CONFIGS, AnyAlgorithmConfig
from flywheel.config.engine import EngineConfig, VLLMConfig
from flywheel.config.weights import FileTransportConfig, TransportConfig


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(Section):
    path: str = Field("assets/tiny-adder", description="Hugging Face model directory of the initial policy.")
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32",
        description="Compute dtype of trainer and engine. bfloat16: mixed precision in the trainer (fp32 master weights and optimiser state, "
        "bf16 forward and backward, fp32 gradient reduction and logprobs), bf16 weights in the engine. On a CPU without bf16 matrix "
        "instructions (AVX-512 bf16 or AMX) torch emulates bf16 and float32 trains faster (bench/bf16_matmul.md); the run's log says so.",
    )


class TaskConfig(Section):
    name: str = Field(
        "arithmetic",
        description="A registered environment: arithmetic (the quickstart's n-digit addition), calculator, python_code, math, reasoning_gym, or your own.",
    )
    env_args: dict[str, Any] = Field({}, description="Keyword arguments of the environment (make_env(name, **env_args)).")
    imports: list[str] = Field([], description="Python modules imported before the environment is made: where your own @register_env classes live.")
    train_size: int = Field(5000, ge=1, description="Tasks in the train split (with task.dataset: unused, every row of the file trains).")
    eval_size: int = Field(
        200, ge=1, description="Tasks in the held-out eval split (with task.dataset: rows held out of it, or at most this many of task.eval_dataset)."
    )
    seed: int = Field(0, description="Seed of the splits.")
    dataset: str | None = Field(
        None,
        description="Train on the rows of this file (JSONL, Parquet, CSV, or a datasets save_to_disk directory) with the 'dataset' environment; "
        "task.name may then be left out.",
    )
    eval_dataset: str | None = Field(
        None, description="The held-out rows, in a file like task.dataset; null: task.eval_size rows of task.dataset, by task.seed."
    )
    prompt_column: str = Field("prompt", min_length=1, description="Column of the prompt: text, or a list of {role, content} chat messages.")
    answer_column: str | None = Field("answer", description="Column of the reference answer; null: none (a judge or your own grader).")
    system_prompt: str | None = Field(
        None, description="System message rendered first through the model's chat template (unless a prompt has its own)."
    )
    grader: str = Field(
        "exact",
        min_length=1,
        description="What scores an answer: exact, numeric, math, code, judge, or 'module:function' (fn(answer, reference, row) -> float); "
        "a grader that raises or outlives the episode's time limit (env_args.time_limit_s, 60 s) makes that episode invalid.",
    )
    grader_args: dict[str, Any] = Field(
        {},
        description="Keyword arguments of the grader: numeric (rel_tol, abs_tol), math (timeout_s), code (function_column, cases_column, sandbox_cgroup).",
    )
    answer_extraction: Literal["boxed", "tag", "last_number", "gsm8k", "whole"] = Field(
        "whole",
        description="Where the answer is in the model's final message: the last \\boxed{}, the last <answer_tag>, the last number, the #### line, or all of it.",
    )
    answer_tag: str = Field("answer", min_length=1, description="The tag of the 'tag' extraction: <answer>...</answer> by default.")
    reference_extraction: Literal["boxed", "tag", "last_number", "gsm8k", "whole"] = Field(
        "whole", description="Where the reference is in the answer column's text (gsm8k: GSM8K's worked solution ending in '#### N')."
    )
    long_prompts: Literal["skip", "refuse"] = Field(
        "skip",
        description="A row of task.dataset whose prompt leaves less than rollout.max_new_tokens of the model's context: skipped and counted "
        "(rollout/long_prompts_skipped and a line at the start), or refused at load (one sentence naming the row).",
    )

    @model_validator(mode="before")
    @classmethod
    def _dataset_names_its_env(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("dataset") is not None and "name" not in data:
            return {**data, "name": "dataset"}
        return data

    @model_validator(mode="after")
    def _dataset_keys_fit(self) -> TaskConfig:
        fields = type(self).model_fields
        if self.dataset is None:
            unused = [key for key in (*DATASET_KEYS, "long_prompts") if getattr(self, key) != fields[key].default]
            if unused:
                raise ValueError(f"task.{unused[0]} does nothing without task.dataset; set task.dataset to the file of prompts and answers")
            if self.name == "dataset":
                raise ValueError("task.name 'dataset' needs task.dataset: the path of a JSONL, Parquet or CSV file or a save_to_disk directory")
            return self
        if self.name != "dataset":
            raise ValueError(f"task.dataset is read by the 'dataset' environment, not {self.name!r}: leave task.name out (or set it to 'dataset')")
        if self.train_size != fields["train_size"].default:
            raise ValueError("task.train_size does nothing with task.dataset (every row of the file is a train task); remove it")
        if "tag" not in (self.answer_extraction, self.reference_extraction) and self.answer_tag != fields["answer_tag"].default:
            raise ValueError("task.answer_tag does nothing unless task.answer_extraction or task.reference_extraction is 'tag'")
        if both := sorted(set(self.env_args) & {"dataset", *DATASET_KEYS}):
            raise ValueError(f"task.env_args.{both[0]}: set task.{both[0]} instead")
        return self

    def env_kwargs(self) -> dict[str, Any]:
        """What make_env(task.name, ...) receives: env_args, and with task.dataset the dataset keys."""
        if self.dataset is None:
            return dict(self.env_args)
        return {**self.env_args, "dataset": self.dataset, **{key: getattr(self, key) for key in DATASET_KEYS}}


#: TaskConfig keys read by the 'dataset' environment besides task.dataset.
DATASET_KEYS = (
    "eval_dataset", "prompt_column", "answer_column", "system_prompt", "grader", "grader_args", "answer_extraction", "answer_tag", "reference_extraction",
)  # fmt: skip


class RolloutConfig(Section):
    prompts_per_step: int = Field(64, ge=1, description="Distinct prompts sampled per training step.")
    group_size: int = Field(8, ge=2, description="Completions sampled per prompt (the GRPO group).")
    temperature: float = Field(1.0, gt=0, le=2, description="Sampling temperature of training rollouts (vLLM accepts at most 2).")
    max_new_tokens: int = Field(8, ge=1, description="Completion length limit in tokens.")
    engines: int = Field(1, ge=1, description="Engine replicas behind the router (least outstanding work first).")
    max_staleness: int = Field(
        0, ge=0, description="Weight versions a trained token may lag the trainer by: 0 is synchronous, more overlaps generation with training."
    )
    min_valid_episodes: int = Field(
        2, ge=1, description="A group with fewer valid episodes (environment error or timeout, non-finite reward) is dropped and replaced."
    )
    invalid_alert_rate: float = Field(0.2, ge=0, le=1, description="Alert when a step's share of invalid episodes exceeds this.")
    stop_on_invalid: bool = Field(False, description="Stop the run at the first invalid-episode alert.")
    stall_steps: int = Field(
        5,
        ge=1,
        description="The run stops (exit code 5) once this many steps' worth of groups in a row (stall_steps * prompts_per_step * the "
        "algorithm's sampling rounds) were admitted and none trained: all invalid, too stale or uninformative.",
    )
    stall_timeout_s: float = Field(
        900.0,
        gt=0,
        description="The run stops (exit code 5) when no group finishes for this long, no held-out episode does, or the engines take "
        "this long to load a weight version (an engine that never answers); time with no live engine replica is not counted.",
    )
    max_engine_restarts: int = Field(
        3,
        ge=0,
        description="Engine replicas started in place of dead ones, at most, in one run (0: a dead replica stays dead). A replacement loads the "
        "latest weights before it takes requests; when every replica is dead and none may restart, the run ends.",
    )
    workers: int = Field(
        0,
        ge=0,
        description="Rollout worker actors that run whole groups off the driver: episodes, environment steps and tools, sandboxes, graders, "
        "reward functions, guards and the algorithm's shaping, calling the engines directly (the driver keeps admission, batching, training "
        "and checkpoints). 0: every group runs in the driver. A worker that dies has its groups run again (same seeds) and is restarted.",
    )


class LoraConfig(Section):
    rank: int = Field(
        0,
        ge=0,
        description="LoRA rank r of the adapters; 0: off (full fine-tuning). When on, only the adapters train and the engines receive merged weights W + (alpha/r)·B·A.",
    )
    alpha: float = Field(32.0, gt=0, description="LoRA alpha: the adapter's update is scaled by alpha / rank.")
    dropout: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="Dropout on the adapters' input while training (nonzero makes the trainer's logprobs random, so the trainer/engine mismatch metrics too).",
    )
    target_modules: tuple[str, ...] = Field(
        ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        min_length=1,
        description="Names (last component) of the linear layers that get adapters: by default the attention and MLP projections (Qwen2 / Llama naming).",
    )

    @model_validator(mode="after")
    def _only_when_on(self) -> LoraConfig:
        unused = [key for key, field in type(self).model_fields.items() if key != "rank" and getattr(self, key) != field.default]
        if self.rank == 0 and unused:
            raise ValueError(f"trainer.lora.{unused[0]} does nothing while trainer.lora.rank is 0 (off); set trainer.lora.rank to use LoRA")
        return self


class TrainerConfig(Section):
    lr: float = Field(2e-4, gt=0, description="AdamW learning rate.")
    betas: tuple[float, float] = Field((0.9, 0.99), description="AdamW betas.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW decoupled weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradients are clipped to this global L2 norm.")
    minibatches: int = Field(2, ge=1, description="Optimiser steps per training step (the batch is split into this many slices).")
    ranks: int = Field(1, ge=1, description="Trainer processes (one per GPU; CPU bundles without one), the model sharded over them with FSDP2.")
    max_tokens_per_microbatch: int = Field(
        4096,
        ge=2,
        description="Token budget of one forward/backward pass on a rank; a rank's share of a minibatch is cut into micro-batches within it.",
    )
    packing: bool = Field(True, description="Pack a micro-batch's sequences into one row without padding (attention stays within each sequence).")
    activation_checkpointing: bool = Field(
        False, description="Recompute each decoder layer's activations in the backward pass (less memory, more compute)."
    )
    threads: int = Field(2, ge=1, description="Torch CPU threads of each trainer rank.")
    cpu_affinity: list[int] | None = Field(None, description="CPU cores each trainer process may run on (None: any).")
    reuse_freed_memory: bool = Field(
        True,
        description="On CPU, malloc keeps freed memory for the next step instead of mapping fresh pages (resident size stays at the step's peak).",
    )
    lora: LoraConfig = LoraConfig()


class EvalConfig(Section):
    every: int = Field(20, ge=1, description="Evaluate on the held-out split every N steps (and at step 0).")
    temperature: float = Field(1.0, ge=0, le=2, description="Sampling temperature of eval/accuracy (one sample per problem; vLLM accepts at most 2).")
    greedy: bool = Field(True, description="Also report eval/greedy_accuracy (temperature 0).")
    engines: int = Field(
        0,
        ge=0,
        description="Engine replicas of the eval's own (0: the run's engines): they load an eval step's weights and evaluate while training goes on; results are rows of their own in metrics.jsonl. Needs weights.name=file.",
    )
    environments: dict[str, TaskConfig] = Field(
        {},
        description="More held-out sets evaluated with the run's (same sampling, same engines), each a task section logged as eval/<key>/<metric>, e.g. {add4: {name: arithmetic, env_args: {digits: 4}}}.",
    )

    @model_validator(mode="after")
    def _plain_keys(self) -> EvalConfig:
        bad = [key for key in self.environments if not re.fullmatch(r"[A-Za-z0-9_.-]+", key)]
        if bad:
            raise ValueError(f"eval.environments key {bad[0]!r} must be letters, digits, '_', '-' or '.': it names metrics eval/<key>/...")
        return self


ALERT_KINDS = ("entropy_collapse", "mismatch_spike", "nonfinite", "reward_stagnation", "invalid_rise", "engines_lost", "invalid_episodes", "hacking")


class AlertsConfig(Section):
    """Health alerts on each step's metrics (src/flywheel/monitor/alerts.py): terminal, alerts.jsonl, alerts/fired."""

    entropy_drop: float = Field(0.1, gt=0, lt=1, description="Entropy collapse: train/entropy below this fraction of its first value.")
    mismatch_kl_max: float = Field(0.05, gt=0, description="Mismatch spike: train/mismatch_kl above this (nats/token).")
    mismatch_spike_factor: float = Field(10.0, gt=1, description="Mismatch spike: train/mismatch_kl above this multiple of its running baseline.")
    mismatch_kl_floor: float = Field(1e-4, gt=0, description="Baselines below this count as this (fp32 noise is no spike).")
    stagnation_steps: int = Field(100, ge=1, description="Reward stagnation: steps without reward/mean passing its best by stagnation_delta.")
    stagnation_delta: float = Field(0.01, ge=0, description="Improvement of reward/mean that counts as progress.")
    invalid_rise: float = Field(0.1, gt=0, le=1, description="Rising environment errors: rollout/invalid_frac above its running baseline by this.")
    decay: float = Field(0.9, ge=0, lt=1, description="Decay of the running baselines (EMA).")
    stop_on: list[Literal[ALERT_KINDS]] = Field(  # type: ignore[valid-type]
        [], description=f"Alert kinds that stop the run (exit code 3): any of {', '.join(ALERT_KINDS)}."
    )


class RunConfig(Section):
    name: str = Field("quickstart", min_length=1, description="Run directory name under output_dir (suffixed -1, -2... if taken).")
    output_dir: str = Field("runs", description="Parent directory of run directories.")
    steps: int = Field(400, ge=0, description="Training steps (rollout, train, weight sync).")
    checkpoint_every: int = Field(100, ge=1, description="Save an HF-format checkpoint every N steps.")
    seed: int = Field(0, description="Seed of prompt order, sampling and training.")
    progress: bool = Field(True, description="Show a live progress bar on the terminal.")
    dump_rollouts: bool = Field(
        False, description="Write every admitted group (tokens, rewards, versions, fate) to rollouts.jsonl in the run directory."
    )
    resume: str | None = Field(None, description="Run directory to continue from its latest checkpoint, exactly as if never stopped.")
    supervise: bool = Field(
        False,
        description="When a trainer rank dies, start a new trainer group and resume from the latest checkpoint in the same run directory "
        "(the engines stay up); each restart is a line in restarts.log.",
    )
    max_restarts: int = Field(3, ge=0, description="With run.supervise: restarts allowed before the run ends (exit code 4).")
    checkpoint_on_stop: bool = Field(
        True, description="On SIGTERM, SIGINT or SIGUSR1, checkpoint the last step done before exiting (exit code 6); a second signal stops at once."
    )
    stop_timeout_s: float = Field(
        60.0,
        gt=0,
        description="On SIGTERM, SIGINT or SIGUSR1, the whole stop ends within this: the step in flight gets half of it (then it is abandoned); a stop still under way at the end (a checkpoint being written, a hung shutdown) is cut short, the run's processes killed (exit code 6). Fit it to the grace period.",
    )

    @model_validator(mode="after")
    def _restarts_need_supervise(self) -> RunConfig:
        if not self.supervise and self.max_restarts != type(self).model_fields["max_restarts"].default:
            raise ValueError("run.max_restarts does nothing while run.supervise is false; set run.supervise=true to restart after a trainer death")
        return self


Tracker = Literal["jsonl", "tensorboard", "mlflow", "wandb", "prometheus"]


class MonitorConfig(Section):
    trackers: list[Tracker] = Field(
        ["jsonl"],
        description="Where each step's metrics go: jsonl (metrics.jsonl, always on), tensorboard (tensorboard/), mlflow (a file store in mlflow/), "
        "wandb (offline, wandb/), prometheus (an HTTP endpoint of gauges).",
    )
    prometheus_host: str = Field("127.0.0.1", min_length=1, description="Address the Prometheus endpoint binds to.")
    prometheus_port: int = Field(0, ge=0, le=65535, description="Port of the Prometheus endpoint; 0: a free one, written to prometheus.txt.")
    dump_every: int = Field(10, ge=0, description="Write the trained episodes of every N-th step to rollouts/step_NNNNNN.parquet (0: never).")
    timeline: bool = Field(True, description="Write every actor's spans (generate, train, sync...) of each step to timeline.jsonl.")


class JudgeConfig(Section):
    enabled: bool = Field(False, description="Add an LLM judge's score (weighted) to the reward.")
    engine: Literal["endpoint", "policy", "own"] = Field(
        "endpoint",
        description="Where the judge runs: an OpenAI-compatible endpoint (base_url), the policy's own vLLM engine, or a vLLM engine of its own in the run serving model_path.",
    )
    model_path: str | None = Field(None, description="Hugging Face model directory of the judge when engine is 'own'.")
    base_url: str = Field("http://127.0.0.1:8000/v1", description="OpenAI-compatible endpoint of the judge (vLLM's server, a hosted API).")
    model: str = Field("judge", min_length=1, description="Model name sent to the endpoint.")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key (never logged); null: no key.")
    weight: float = Field(1.0, allow_inf_nan=False, description="Weight of the judge's score in the reward.")
    structured_output: bool = Field(
        True,
        description="Constrain the judge's decoding to the verdict's JSON schema, so that no reply is free text (the run's engines always can; an endpoint must support response_format, as vLLM's server does).",
    )
    max_block_chars: int = Field(
        8000,
        ge=100,
        description="Characters of the question, the reference and the candidate answer the judge reads at most: a longer text reaches it as its first and last halves, so an answer cannot bury the judge's instructions under padding.",
    )
    concurrency: int = Field(8, ge=1, description="Judge requests in flight at once.")
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout in seconds.")
    max_retries: int = Field(3, ge=0, description="Retries of a failed request (connection error, timeout, 429, 5xx) before the run fails.")
    backoff_s: float = Field(1.0, ge=0, description="Back-off before retry i is backoff_s * 2**i seconds.")
    max_tokens: int = Field(256, ge=1, description="Token limit of the judge's reply.")

    @model_validator(mode="after")
    def _engine_has_a_model(self) -> JudgeConfig:
        if self.engine == "own" and not self.model_path:
            raise ValueError("reward.judge.engine 'own' needs reward.judge.model_path (the judge model's directory)")
        return self


class RewardModelConfig(Section):
    path: str | None = Field(None, description="Hugging Face sequence-classification model (1 label) scoring prompt+completion; null: none.")
    weight: float = Field(1.0, allow_inf_nan=False, description="Weight of the reward model's score in the reward.")
    batch_size: int = Field(16, ge=1, description="Texts per forward pass.")
    max_length: int = Field(2048, ge=1, description="Longer texts keep their last max_length tokens.")


class RewardFunctionConfig(Section):
    name: str = Field(
        min_length=1,
        description="A TRL-style reward function, 'module:function' or 'path/to/file.py:function': fn(prompts, completions, completion_ids, "
        "trainer_state, **columns) -> list[float | None].",
    )
    weight: float = Field(1.0, allow_inf_nan=False, description="Its weight in the reward (TRL's reward_weights).")

    @property
    def metric(self) -> str:
        """Its sub-score's name: the function's name, as TRL logs reward/<name>/mean."""
        return self.name.rpartition(":")[2]


class RewardConfig(Section):
    functions: list[RewardFunctionConfig] = Field(
        [],
        description="TRL reward functions added to the reward, each 'module:function' (weight 1) or {name: 'module:function', weight: w}; "
        "None for a sample adds nothing (TRL's rule).",
    )
    guards: tuple[str, ...] | None = Field(
        None,
        description="Reward-hacking guards to run on every completion, by name (flywheel.rewards.guards); null: the environment's own (code guards for python_code) plus the judge guards when the judge is on.",
    )
    guard_mode: Literal["flag", "penalize", "zero"] = Field(
        "penalize", description="What a flagged completion gets: its reward (flag), reward - guard_penalty, or 0."
    )
    guard_penalty: float = Field(1.0, ge=0, description="Subtracted from a flagged completion's reward in 'penalize' mode.")
    alert_threshold: float = Field(0.1, ge=0, le=1, description="Alert when a hacking/<guard>_rate exceeds this.")
    alert_rise: float = Field(0.05, ge=0, description="Alert when a rate exceeds its running baseline (EMA) by more than this.")
    alert_decay: float = Field(0.9, ge=0, lt=1, description="Decay of the running baseline of each rate.")
    stop_on_hacking: bool = Field(False, description="Stop the run at the first hacking alert.")
    function_timeout_s: float = Field(
        60.0,
        gt=0,
        description="Time limit of one call of a reward function (one call per group): past it, or when it raises, the group's episodes "
        "are invalid (reward/timeouts, reward/errors) and the run goes on.",
    )
    check_rows: int = Field(
        0,
        ge=0,
        description="At load, call each reward function and a 'module:function' task.grader on this many rows of task.dataset (their "
        "reference answers as the completions) and refuse the config, in one sentence, when one raises, times out or returns the wrong "
        "shape; 0: off.",
    )
    check: Literal["warn", "stop", "off"] = Field(
        "warn",
        description="At the start of flywheel train, score honest answers and adversarial completions (candidate lists, hedges, echoes "
        "of the question, unevaluated forms, padding, injections, empty answers) built from reward.check_tasks tasks with the configured "
        "reward, as flywheel check-reward does: warn when an adversarial form earns reward, or stop before anything starts (exit 2); off: skip.",
    )
    check_tasks: int = Field(8, ge=1, description="Tasks whose probes reward.check scores at the start of a run.")
    check_timeout_s: float = Field(60.0, gt=0, description="reward.check is abandoned, with a warning, when it takes longer than this.")
    judge: JudgeConfig = JudgeConfig()
    reward_model: RewardModelConfig = RewardModelConfig()

    @field_validator("functions", mode="before")
    @classmethod
    def _plain_names(cls, value: Any) -> Any:
        return [{"name": item} if isinstance(item, str) else item for item in value] if isinstance(value, list) else value

    @model_validator(mode="after")
    def _unique_guards(self) -> RewardConfig:
        if self.guards is not None and len(set(self.guards)) != len(self.guards):
            raise ValueError(f"reward.guards names a guard twice: {list(self.guards)}")
        names = [f.metric for f in self.functions]
        taken = [n for i, n in enumerate(names) if n in names[:i] or n in ("task", "judge", "reward_model")]
        if taken:
            raise ValueError(f"reward.functions: the name {taken[0]!r} is taken (metrics are reward/<function name>/mean); rename the function")
        return self


class ClusterConfig(Section):
    address: str | None = Field(
        None,
        description="The Ray cluster to run on: null starts a local one-node Ray; 'auto' joins the cluster `ray start` started on this machine; "
        "'host:port' joins the cluster whose head listens there (with Ray's token authentication on, set RAY_AUTH_MODE=token).",
    )
    placement: Literal["colocated", "disaggregated"] = Field(
        "colocated",
        description="colocated: engines and trainer ranks share nodes (and a GPU, half each, where there are GPUs); disaggregated: engines never "
        "run on a trainer rank's node, and each engine replica and trainer rank takes a whole GPU where there are GPUs.",
    )
    trainer_labels: dict[str, str] = Field(
        {},
        description="Ray label selector the trainer ranks' nodes must match, e.g. {flywheel-role: trainer} for nodes started with "
        "`ray start --labels flywheel-role=trainer` (values: v, !v, in(a,b), !in(a,b)); {}: any node.",
    )
    engine_labels: dict[str, str] = Field(
        {}, description="Ray label selector the engine replicas' nodes must match (as trainer_labels); {}: any node."
    )
    rollout_labels: dict[str, str] = Field(
        {}, description="Ray label selector the rollout workers' nodes must match (as trainer_labels); {}: any node."
    )
    rollout_cpus: float = Field(
        1.0,
        gt=0,
        description="Logical CPUs each rollout worker (rollout.workers) reserves on its node of a cluster; more for environments that run "
        "code or tools in the worker's sandboxes. On a local Ray the workers share the run's CPUs.",
    )

    @model_validator(mode="after")
    def _joins_to_place(self) -> ClusterConfig:
        if self.address is not None and self.address != "auto" and not re.fullmatch(r"[^\s:/]+:\d{1,5}", self.address):
            raise ValueError(f"cluster.address must be null (a local Ray), 'auto' or the head node's host:port (got {self.address!r})")
        if self.address is None:
            if self.placement == "disaggregated":
                raise ValueError("cluster.placement 'disaggregated' needs several nodes: set cluster.address to join a Ray cluster")
            for key in ("trainer_labels", "engine_labels", "rollout_labels"):
                if getattr(self, key):
                    raise ValueError(f"cluster.{key} needs cluster.address: the node of a local Ray has no labels to select")
        return self


class Config(Section):
    model: ModelConfig = ModelConfig()
    task: TaskConfig = TaskConfig()
    rollout: RolloutConfig = RolloutConfig()
    engine: EngineConfig = VLLMConfig()
    weights: TransportConfig = FileTransportConfig()
    algorithm: AnyAlgorithmConfig = Field(
        default_factory=lambda: ALGORITHM_CONFIGS["grpo"](),
        description="The algorithm, chosen by algorithm.name; its fields are those of that algorithm.",
    )
    trainer: TrainerConfig = TrainerConfig()
    eval: EvalConfig = EvalConfig()
    alerts: AlertsConfig = AlertsConfig()
    reward: RewardConfig = RewardConfig()
    run: RunConfig = RunConfig()
    cluster: ClusterConfig = ClusterConfig()
    monitor: MonitorConfig = MonitorConfig()

    @model_validator(mode="after")
    def _consistent(self) -> Config:
        buffer = getattr(self.algorithm, "overlong_buffer", 0)
        if buffer > self.rollout.max_new_tokens:
            raise ValueError(f"algorithm.overlong_buffer ({buffer}) must not exceed rollout.max_new_tokens ({self.rollout.max_new_tokens})")
        if self.task.dataset is not None and self.task.grader == "judge" and not self.reward.judge.enabled:
            raise ValueError("task.grader 'judge' scores with the LLM judge: set reward.judge.enabled=true (and its endpoint or engine)")
        return self
