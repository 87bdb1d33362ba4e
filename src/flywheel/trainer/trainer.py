"""One rank of the policy trainer: a Ray actor holding 1/N of the model (FSDP2), of its optimiser
and, when the algorithm needs them, of a frozen reference model and a critic. ``TrainerGroup``
(trainer/group.py) runs N of them behind the one-trainer API; one rank is a group of one.

It is algorithm-blind: the loss comes from the algorithm object, the advantages, loss mask and
loss weights from the batch. Each rank gets its share of the rows of every minibatch and cuts it
into micro-batches of at most ``trainer.max_tokens_per_microbatch`` tokens (packed without padding
when ``trainer.packing``); all ranks run the same number of micro-batches (FSDP's collectives run
in each), and every loss divides by counts of the whole optimiser step over all ranks, so a step
does not depend on how it was cut:

    forward_backward(micro, totals)  accumulates gradients of a micro-batch's share of the step's loss
    optim_step()                     clips, applies (or skips when non-finite), zeroes gradients
    train_step(parts)                proximal logprobs of the minibatches after the first, then per
                                     minibatch: forward_backward per micro-batch + optim_step

train_step returns a ``StepResult`` (types.py): the step's metrics, its forward / backward /
optimizer spans for the run's timeline, and, after ``keep_logprobs()``, the proximal logprobs (the
policy's before the step's update) of its rows, taken from the passes the step computes anyway.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import fields, replace
from pathlib import Path

import ray.cloudpickle as cloudpickle
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from safetensors.torch import save_file
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.aggregation import LossTotals, token_mean
from flywheel.algorithms.kl import kl_penalty
from flywheel.config import Config
from flywheel.trainer.allocator import reuse_freed_memory
from flywheel.trainer.distributed import all_gather, combine_metrics, full_state_dict, join, load_sharded
from flywheel.trainer.logprobs import token_logprobs, token_values
from flywheel.trainer.lora import lora_scaling, merge_lora
from flywheel.trainer.packing import plan_microbatches
from flywheel.types import StepResult, TrainBatch
from flywheel.weights.base import WeightTransport, WeightUpdate, split_aliases
from flywheel.weights.probe import TOLERANCE, Probe, probe_of, probe_tokens

# A user's loss (``Session.forward_backward``): (micro-batch, its policy logprobs [b, T] with gradients, the
# counts of the whole call) -> the micro-batch's share of the loss, alone or with metrics.
LossFn = Callable[[TrainBatch, torch.Tensor, LossTotals], "torch.Tensor | tuple[torch.Tensor, dict[str, float]]"]

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")


class Trainer:
    def __init__(self, config: Config, transport: WeightTransport, rank: int = 0, ranks: int = 1, store: str | None = None, device: int = 0) -> None:
        """Rank ``rank`` of ``ranks`` meeting at the TCP store ``store`` ("host:port"; one rank needs none); ``device``:
        its GPU index where there are GPUs."""
        torch.manual_seed(config.run.seed)
        tc = config.trainer
        if tc.cpu_affinity is not None:
            os.sched_setaffinity(0, tc.cpu_affinity)
        torch.set_num_threads(tc.threads)
        self.config, self.transport, self.rank = config, transport, rank
        self.algorithm = make_algorithm(config.algorithm)
        mesh = join(rank, ranks, store, device)
        self.device = mesh.device_type
        if self.device == "cpu" and tc.reuse_freed_memory:
            reuse_freed_memory()  # each step's large tensors reuse the last step's pages
        self.model = load_sharded(AutoModelForCausalLM, config, mesh, adapters=tc.lora if tc.lora.rank else None)
        self.model.train()
        trained = [p for p in self.model.parameters() if p.requires_grad]  # the adapters alone with LoRA
        self.optimizer = torch.optim.AdamW(trained, lr=tc.lr, betas=tc.betas, weight_decay=tc.weight_decay, fused=True)
        # A reference model exists only when a KL term uses it: no memory is spent on it otherwise.
        self.reference = None
        if self.algorithm.needs_reference:
            self.reference = load_sharded(AutoModelForCausalLM, config, mesh).eval().requires_grad_(False)
        self.critic = None
        if self.algorithm.needs_critic:
            self.critic = load_sharded(AutoModelForTokenClassification, config, mesh, num_labels=1)
            self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=config.algorithm.critic_lr, betas=tc.betas, fused=True)
        self.version = 0
        self._probe: Probe | None = None  # the latest published version's
        self._nonfinite: set[str] = set()  # losses of the accumulated micro-batches that were not finite
        self._spans: list[tuple[str, float, float]] = []  # (stage, start, end) of the step under way
        self._kept: list[torch.Tensor] | None = None  # the step's proximal logprobs, micro-batch by micro-batch, when kept
        self._reward_kl: torch.Tensor | None = None  # set by sequence_kl, reported by the next train_step

    @contextmanager
    def _span(self, stage: str):
        start = time.time()
        yield
        self._spans.append((stage, start, time.time()))

    def keep_logprobs(self) -> None:
        """The next train_step returns its proximal logprobs too (for a rollout dump)."""
        self._kept = []

    # --- forward passes over this rank's rows ----------------------------------------------------------
    def _logprobs(self, model: torch.nn.Module, micro: TrainBatch, with_entropy: bool = False):
        return token_logprobs(model, micro.tokens, micro.attention_mask, with_entropy, packed=self.config.trainer.packing)

    def _values(self, micro: TrainBatch) -> torch.Tensor:
        return token_values(self.critic, micro.tokens, micro.attention_mask, packed=self.config.trainer.packing)

    def _plan(self, parts: list[TrainBatch]) -> tuple[list[list[list[int]]], torch.Tensor]:
        """The rows of each part's micro-batches within the token budget, and [world, parts, 3]: every
        rank's (loss tokens, rows, micro-batches) of each part (one all-gather)."""
        budget = self.config.trainer.max_tokens_per_microbatch
        plans = [plan_microbatches(p.attention_mask.sum(dim=1).tolist(), budget) for p in parts]
        local = [[p.loss_mask.sum().item(), len(p), len(plan)] for p, plan in zip(parts, plans)]
        return plans, all_gather(torch.tensor(local, dtype=torch.float64))

    def _cut(self, part: TrainBatch, rows: list[list[int]], count: int) -> list[TrainBatch]:
        """``part``'s micro-batches of the planned ``rows``, padded with idle ones to the ``count`` all ranks agreed on."""
        micros = [_trimmed(part.select(r)) for r in rows] + [_idle(part)] * (count - len(rows))
        return [micro.to(self.device) for micro in micros]

    @torch.no_grad()
    def _rowwise(self, batch: TrainBatch, compute) -> torch.Tensor:
        """``compute(micro)`` [b, ...] over this rank's rows, micro-batch by micro-batch -> [len(batch), ...]."""
        [rows], counts = self._plan([batch])
        micros = self._cut(batch, rows, int(counts[:, 0, 2].max().item()))
        outs = [compute(micro).cpu() for micro in micros]  # idle passes too: FSDP's collectives run in each
        result = torch.zeros(batch.tokens.shape if outs[0].dim() > 1 else (len(batch),))
        for r, out in zip(rows, outs):  # the idle passes' outputs come last and are dropped
            if out.dim() > 1:
                result[r, : out.shape[1]] = out  # a micro-batch is trimmed to its longest row
            else:
                result[r] = out
        return result

    def logprobs(self, batch: TrainBatch) -> torch.Tensor:
        """The current policy's logprobs of this rank's rows of batch.tokens, [B, T]."""
        return self._rowwise(batch, lambda micro: self._logprobs(self.model, micro))

    def values(self, batch: TrainBatch) -> torch.Tensor:
        """Critic value of each state, [B, T], aligned like logprobs."""
        return self._rowwise(batch, self._values)

    def sequence_kl(self, batch: TrainBatch) -> torch.Tensor:
        """Per-episode sum of the KL estimator to the reference over the loss tokens, [B]. The next
        train_step reports its token mean as ``loss/kl_reference`` (the loss itself runs no reference
        pass when the KL is placed in the reward)."""
        self._reward_kl = torch.zeros(2, dtype=torch.float64)  # (KL summed over loss tokens, loss tokens) of this rank's rows

        def kl(micro: TrainBatch) -> torch.Tensor:
            estimate = kl_penalty(self._logprobs(self.model, micro), self._logprobs(self.reference, micro), self.config.algorithm.kl_estimator)
            sums = (estimate * micro.loss_mask).sum(-1)
            self._reward_kl += torch.stack([sums.sum(), micro.loss_mask.sum()]).double().cpu()
            return sums

        return self._rowwise(batch, kl)

    # --- training ----------------------------------------------------------------------------------
    def train_step(self, parts: list[TrainBatch]) -> StepResult:
        """One training step: an optimiser step per minibatch, of which ``parts`` are this rank's
        rows; version += 1. The same metrics come back on every rank; the kept logprobs are this
        rank's rows, part after part.

        The proximal (old-policy) logprobs of the PPO ratio are the trainer's at the start of the
        step, not the engine's. The first minibatch trains on those very weights, so its proximal
        logprobs come from its training forward itself; the later minibatches' rows get one no-grad
        pass before the first optimiser step (none at all with one minibatch, stale or not).
        """
        plans, counts = self._plan(parts)
        totals = [
            LossTotals(counts[:, m, 0].sum().item(), int(counts[:, m, 1].sum().item()), self.config.rollout.max_new_tokens) for m in range(len(parts))
        ]
        cuts = [self._cut(part, rows, int(counts[:, m, 2].max().item())) for m, (part, rows) in enumerate(zip(parts, plans))]
        with torch.no_grad(), self._span("forward"):
            cuts[1:] = [[replace(micro, old_logprobs=self._logprobs(self.model, micro)) for micro in micros] for micros in cuts[1:]]
        steps = []
        for micros, step_totals in zip(cuts, totals):
            metrics = combine_metrics([(self.forward_backward(micro, step_totals), micro.loss_mask.sum().item()) for micro in micros])
            with self._span("optimizer"):
                steps.append(metrics | self.optim_step())
        self.version += 1
        means = {key: sum(step.get(key, 0.0) for step in steps) / len(steps) for key in steps[0]}
        if self._reward_kl is not None:  # the KL the batch's rewards were charged, over all ranks
            dist.all_reduce(self._reward_kl)
            means["loss/kl_reference"] = (self._reward_kl[0] / self._reward_kl[1].clamp(min=1)).item()
            self._reward_kl = None
        kept = None if self._kept is None else torch.cat(_by_row(parts, plans, [len(micros) for micros in cuts], self._kept))
        result = StepResult(means | {"train/padding_frac": self._padding_frac([micro for micros in cuts for micro in micros])}, self._spans, kept)
        self._spans, self._kept = [], None
        return result

    def _padding_frac(self, micros: list[TrainBatch]) -> float:
        """The share of the positions the step's forward passes computed, over all ranks, that were padding."""
        real = sum(micro.attention_mask.sum().item() for micro in micros)
        computed = real if self.config.trainer.packing else sum(micro.attention_mask.numel() for micro in micros)
        both = torch.tensor([real, computed], dtype=torch.float64)
        dist.all_reduce(both)
        return 1.0 - (both[0] / both[1]).item()

    def forward_backward(self, micro: TrainBatch, totals: LossTotals) -> dict[str, float]:
        """Accumulates the gradients of ``micro``'s share of the step's loss (policy, and critic when
        the batch carries returns). ``micro.old_logprobs`` None: no optimiser step has been taken
        since the step began, the proximal logprobs are the current ones. The behaviour correction
        (off-policy masks or weights) is applied here, per token, from the proximal vs the engine's
        logprobs."""
        with self._span("forward"):
            new, entropy = self._logprobs(self.model, micro, with_entropy=True)
            old = new.detach() if micro.old_logprobs is None else micro.old_logprobs
            reference = None
            if self.algorithm.loss_uses_reference:
                with torch.no_grad():
                    reference = self._logprobs(self.reference, micro)
        if self._kept is not None:
            self._kept.append(old.cpu())
        log_ratio = old - micro.behaviour_logprobs  # proximal vs engine: a stale token's policy lag, plus numeric mismatch
        kl = torch.exp(log_ratio) - log_ratio - 1.0
        metrics: dict = {"train/behaviour_kl": token_mean(kl, micro.loss_mask).item()}
        same_weights = micro.loss_mask if micro.weight_versions is None else micro.loss_mask * (micro.weight_versions == self.version)
        if tokens := same_weights.sum().item():  # trainer vs engine on the very weights: numeric mismatch only
            metrics["train/mismatch_kl"] = (token_mean(kl, same_weights).item(), tokens)
            metrics["train/mismatch_abs_diff"] = (token_mean(log_ratio.abs(), same_weights).item(), tokens)
        mask, weights, is_metrics = self.algorithm.behaviour_correction(log_ratio, micro.loss_mask)
        loss, loss_metrics = self.algorithm.loss(new, entropy, reference, old, micro.advantages, mask, weights, totals)
        with self._span("backward"):
            loss.backward()
        metrics |= is_metrics | loss_metrics | {"loss/policy": loss.item(), "train/entropy": token_mean(entropy.detach(), mask).item()}
        if micro.returns is not None:
            with self._span("forward"):
                values = self._values(micro)
            value_loss, value_metrics = self.algorithm.value_loss(values, micro.old_values, micro.returns, mask)
            with self._span("backward"):
                value_loss.backward()
            metrics |= value_metrics | {"loss/critic": value_loss.item()}
        self._nonfinite |= {name for name in ("loss/policy", "loss/critic") if not math.isfinite(metrics.get(name, 0.0))}
        return metrics

    def forward_backward_with(self, part: TrainBatch, pickled_loss: bytes) -> dict[str, float]:
        """Accumulates the gradients of a ``Session``'s own loss (a ``LossFn``, pickled by value) over this
        rank's rows ``part``: the rows are cut into micro-batches as a step's are, and ``loss_fn(micro, logprobs,
        totals)`` returns each micro-batch's share of the loss (``totals``: counts over every rank's rows),
        alone or with a dict of metrics. Metrics come back averaged over the loss tokens of every rank, but
        ``loss/user``: the shares summed, the loss of the whole batch."""
        loss_fn: LossFn = cloudpickle.loads(pickled_loss)
        [rows], counts = self._plan([part])
        totals = LossTotals(counts[:, 0, 0].sum().item(), int(counts[:, 0, 1].sum().item()), self.config.rollout.max_new_tokens)
        local = []
        for micro in self._cut(part, rows, int(counts[:, 0, 2].max().item())):
            out = loss_fn(micro, self._logprobs(self.model, micro), totals)
            loss, metrics = out if isinstance(out, tuple) else (out, {})
            loss.backward()
            metrics = {name: float(value) for name, value in metrics.items()} | {"loss/user": loss.item()}
            if not math.isfinite(metrics["loss/user"]):
                self._nonfinite.add("loss/policy")  # the policy's update is skipped, as for the built-in loss
            local.append((metrics, micro.loss_mask.sum().item()))
        return combine_metrics(local)

    def apply_gradients(self) -> dict[str, float]:
        """``optim_step`` of a ``Session``: the weights after it are the next version."""
        metrics = self.optim_step()
        self.version += 1
        return metrics

    def optim_step(self) -> dict[str, float]:
        """Clips and applies the accumulated gradients, then zeroes them. A non-finite loss or
        gradient on any rank is never applied: the step is reported as skipped."""
        flags = torch.tensor([float("loss/policy" in self._nonfinite), float("loss/critic" in self._nonfinite)])
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        grad_norm, skipped = self._apply(self.model, self.optimizer, not flags[0])
        metrics = {"train/grad_norm": grad_norm, "train/nonfinite_skipped": float(skipped)}
        if self.critic is not None:
            grad_norm, skipped = self._apply(self.critic, self.critic_optimizer, not flags[1])
            metrics |= {"train/critic_grad_norm": grad_norm, "train/critic_nonfinite_skipped": float(skipped)}
        self._nonfinite = set()
        return metrics

    def _apply(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, finite_loss: bool) -> tuple[float, bool]:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), self.config.trainer.max_grad_norm)
        grad_norm = (norm.full_tensor() if hasattr(norm, "full_tensor") else norm).item()
        skipped = not (finite_loss and math.isfinite(grad_norm))
        if not skipped:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return grad_norm, skipped

    # --- weights and checkpoints -------------------------------------------------------------------
    def _full_weights(self) -> dict[str, torch.Tensor]:
        """The policy's full weights under the base model's names in ``model.dtype`` (LoRA: merged
        W + s·B·A) on rank 0, empty elsewhere; a collective."""
        state = full_state_dict(self.model)
        if self.config.trainer.lora.rank:
            state = merge_lora(state, lora_scaling(self.model))
        return {name: tensor.to(getattr(torch, self.config.model.dtype)) for name, tensor in state.items()}

    def publish_weights(self) -> WeightUpdate | None:
        """Gathers the full weights (every rank takes part) in the engines' dtype and computes the
        version's probe (weights.probe); rank 0 publishes them through the transport and returns the
        handle engines load, with the probe (None on other ranks)."""
        state = self._full_weights()
        self._probe = self._probe_logprobs() if self.config.weights.probe else None
        return replace(self.transport.publish(state, self.version), probe=self._probe) if self.rank == 0 else None

    def _probe_logprobs(self) -> Probe:
        """The policy's logprobs of the probe sequences (a forward on every rank)."""
        w = self.config.weights
        tokens = probe_tokens(self.model.config.vocab_size)
        with torch.no_grad():
            logprobs = token_logprobs(self.model, tokens, torch.ones_like(tokens))
        return probe_of(tokens, logprobs, w.probe_tolerance or TOLERANCE[self.config.model.dtype])

    def rejoin_weights(self, replicas: list[int]) -> WeightUpdate | None:
        """Rank 0: the transport re-forms its group with these engine replica slots and re-sends the
        latest version to it (``CollectiveTransport.rejoin``); returns its new handle (with its probe)."""
        update = self.transport.rejoin(replicas)
        return None if update is None else replace(update, probe=self._probe)

    def save_checkpoint(self, directory: str, resumable: bool = True) -> None:
        """HF-format weights (``model.dtype``) with the config and tokenizer files of the initial
        model directory, written by rank 0; when ``resumable``, also the sharded trainer state
        (torch.distributed.checkpoint: model, optimiser, critic; each rank writes its shards) and
        trainer_state.pt (version, every rank's RNG state) for an exact resume."""
        out = Path(directory)
        weights = self._full_weights()
        if self.rank == 0:
            out.mkdir(parents=True, exist_ok=True)
            save_file(split_aliases(weights)[0], str(out / "model.safetensors"), metadata={"format": "pt"})
            self.model.config.save_pretrained(out)
            for name in TOKENIZER_FILES:
                source = Path(self.config.model.path) / name
                if source.is_file() and not (out / name).exists():
                    shutil.copy(source, out / name)
        if resumable:
            dcp.save(self._sharded_state(), checkpoint_id=out / "trainer")
            rng: list = [None] * dist.get_world_size()
            dist.all_gather_object(rng, torch.get_rng_state())
            if self.rank == 0:
                torch.save({"version": self.version, "rng": rng}, out / "trainer_state.pt")
        dist.barrier()

    def restore(self, directory: str) -> int:
        """Loads a checkpoint written by save_checkpoint (with any number of ranks); returns its version."""
        state = self._sharded_state()
        dcp.load(state, checkpoint_id=Path(directory) / "trainer")
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
        if self.critic is not None:
            set_state_dict(self.critic, self.critic_optimizer, model_state_dict=state["critic"], optim_state_dict=state["critic_optimizer"])
        saved = torch.load(Path(directory) / "trainer_state.pt", weights_only=True)
        if len(saved["rng"]) == dist.get_world_size():
            torch.set_rng_state(saved["rng"][self.rank])
        self.version = saved["version"]
        return self.version

    def _sharded_state(self) -> dict:
        model, optimizer = get_state_dict(self.model, self.optimizer)
        state = {"model": model, "optimizer": optimizer}
        if self.critic is not None:
            critic, critic_optimizer = get_state_dict(self.critic, self.critic_optimizer)
            state |= {"critic": critic, "critic_optimizer": critic_optimizer}
        return state

    def close(self) -> None:
        """Removes the weights the transport published."""
        if self.rank == 0:
            self.transport.close()


def _by_row(parts: list[TrainBatch], plans: list[list[list[int]]], sizes: list[int], kept: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each part's [rows, T] logprobs from its micro-batches' (``sizes[m]`` of part m, computed in order;
    the idle ones, last in each part, dropped)."""
    outs, result = iter(kept), []
    for part, rows, size in zip(parts, plans, sizes):
        logprobs = torch.zeros(part.tokens.shape)
        for r, out in zip(rows, [next(outs) for _ in range(size)]):
            logprobs[r, : out.shape[1]] = out
        result.append(logprobs)
    return result


def _trimmed(micro: TrainBatch) -> TrainBatch:
    """``micro`` without the padding columns none of its rows needs."""
    return micro.narrow(int(micro.attention_mask.sum(dim=1).max()) if len(micro) else 1)


def _idle(like: TrainBatch) -> TrainBatch:
    """A 2-token row that trains nothing (zero loss mask), with the fields ``like`` has."""
    zeros = {f.name: None if getattr(like, f.name) is None else torch.zeros(1, 2, dtype=getattr(like, f.name).dtype) for f in fields(like)}
    return TrainBatch(**zeros | {"attention_mask": torch.ones(1, 2, dtype=torch.long)})
