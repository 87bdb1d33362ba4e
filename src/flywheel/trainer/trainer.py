"""The policy trainer: one process holding the model, its optimiser, and (when the algorithm needs
them) a frozen reference model and a critic. A Ray actor in a run.

It is algorithm-blind: the loss comes from the algorithm object, the advantages, loss mask and
loss weights from the batch. The API is the one ranks need:

    forward_backward(micro_batch, totals)  accumulates gradients of a micro-batch's share of the step's
                                           loss (``totals`` count the whole optimiser step)
    optim_step()                           clips, applies (or skips when non-finite), zeroes gradients
    train_step(batch)                      proximal logprobs, then per minibatch: forward_backward + optim_step
"""

from __future__ import annotations

import math
import os
import shutil
from dataclasses import replace
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

from flywheel.algorithms import make_algorithm
from flywheel.algorithms.aggregation import LossTotals, token_mean
from flywheel.algorithms.kl import kl_penalty
from flywheel.config import Config
from flywheel.trainer.logprobs import token_logprobs
from flywheel.types import TrainBatch
from flywheel.weights.base import WeightTransport, WeightUpdate


class Trainer:
    def __init__(self, config: Config, transport: WeightTransport) -> None:
        torch.manual_seed(config.run.seed)
        if config.trainer.cpu_affinity is not None:
            os.sched_setaffinity(0, config.trainer.cpu_affinity)
        torch.set_num_threads(config.trainer.threads)
        self.config = config
        self.algorithm = make_algorithm(config.algorithm)
        self.transport = transport
        dtype = getattr(torch, config.model.dtype)
        self.model = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=dtype)
        self.model.train()
        tc = config.trainer
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=tc.lr, betas=tc.betas, weight_decay=tc.weight_decay)
        # A reference model exists only when a KL term uses it: no memory is spent on it otherwise.
        self.reference = None
        if self.algorithm.needs_reference:
            self.reference = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=dtype).eval().requires_grad_(False)
        self.critic = None
        if self.algorithm.needs_critic:
            self.critic = AutoModelForTokenClassification.from_pretrained(config.model.path, num_labels=1, dtype=dtype)
            self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=config.algorithm.critic_lr, betas=tc.betas)
        self.version = 0
        self._nonfinite: set[str] = set()  # losses of the accumulated micro-batches that were not finite

    @torch.no_grad()
    def logprobs(self, batch: TrainBatch) -> torch.Tensor:
        """The current policy's logprobs of batch.tokens, [B, T]."""
        return token_logprobs(self.model, batch.tokens, batch.attention_mask)

    def _values(self, batch: TrainBatch) -> torch.Tensor:
        """Critic value of each state, aligned like logprobs: [:, t] is V(tokens[:, :t]), [:, 0] = 0."""
        out = self.critic(input_ids=batch.tokens, attention_mask=batch.attention_mask).logits[:, :-1, 0].float()
        return torch.nn.functional.pad(out, (1, 0))

    @torch.no_grad()
    def values(self, batch: TrainBatch) -> torch.Tensor:
        return self._values(batch)

    @torch.no_grad()
    def sequence_kl(self, batch: TrainBatch) -> torch.Tensor:
        """Per-episode sum of the KL estimator to the reference over completion tokens, [B]."""
        reference = token_logprobs(self.reference, batch.tokens, batch.attention_mask)
        return (kl_penalty(self.logprobs(batch), reference, self.config.algorithm.kl_estimator) * batch.loss_mask).sum(-1)

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        """One training step: ``trainer.minibatches`` optimiser steps over the batch; version += 1.

        The proximal (old-policy) logprobs of the PPO ratio are recomputed here, not taken from the
        engine; the engine's behaviour logprobs measure the trainer/engine mismatch and feed the
        optional off-policy correction (which masks or weighs tokens before the step is cut).
        """
        old = self.logprobs(batch)
        log_ratio = old - batch.behaviour_logprobs  # trainer vs engine, same weights, same tokens
        metrics = {
            "train/mismatch_kl": token_mean(torch.exp(log_ratio) - log_ratio - 1.0, batch.loss_mask).item(),
            "train/mismatch_abs_diff": token_mean(log_ratio.abs(), batch.loss_mask).item(),
        }
        mask, weights, is_metrics = self.algorithm.behaviour_correction(log_ratio, batch.loss_mask)
        batch = replace(batch, old_logprobs=old, loss_mask=mask, loss_weights=weights)
        parts = self.config.trainer.minibatches
        sums: dict[str, float] = {}
        for minibatch in batch.split(parts):
            totals = LossTotals.of(minibatch.loss_mask, self.config.rollout.max_new_tokens)
            step_metrics = self.forward_backward(minibatch, totals) | self.optim_step()
            for key, value in step_metrics.items():
                sums[key] = sums.get(key, 0.0) + value / parts
        self.version += 1
        return metrics | is_metrics | sums

    def forward_backward(self, micro: TrainBatch, totals: LossTotals) -> dict[str, float]:
        """Accumulates the gradients of ``micro``'s share of the step's loss (policy, and critic when
        the batch carries returns); ``micro.old_logprobs`` must be set."""
        new, entropy = token_logprobs(self.model, micro.tokens, micro.attention_mask, with_entropy=True)
        reference = None
        if self.reference is not None:
            with torch.no_grad():
                reference = token_logprobs(self.reference, micro.tokens, micro.attention_mask)
        mask = micro.loss_mask
        loss, metrics = self.algorithm.loss(new, entropy, reference, micro.old_logprobs, micro.advantages, mask, micro.loss_weights, totals)
        loss.backward()
        metrics |= {"loss/policy": loss.item(), "train/entropy": token_mean(entropy.detach(), mask).item()}
        if micro.returns is not None:
            value_loss, value_metrics = self.algorithm.value_loss(self._values(micro), micro.old_values, micro.returns, micro.loss_mask)
            value_loss.backward()
            metrics |= value_metrics | {"loss/critic": value_loss.item()}
        self._nonfinite |= {name for name in ("loss/policy", "loss/critic") if not math.isfinite(metrics.get(name, 0.0))}
        return metrics

    def optim_step(self) -> dict[str, float]:
        """Clips and applies the accumulated gradients, then zeroes them. A non-finite loss or
        gradient is never applied: the step is reported as skipped."""
        grad_norm, skipped = self._apply(self.model, self.optimizer, "loss/policy" not in self._nonfinite)
        metrics = {"train/grad_norm": grad_norm, "train/nonfinite_skipped": float(skipped)}
        if self.critic is not None:
            grad_norm, skipped = self._apply(self.critic, self.critic_optimizer, "loss/critic" not in self._nonfinite)
            metrics |= {"train/critic_grad_norm": grad_norm, "train/critic_nonfinite_skipped": float(skipped)}
        self._nonfinite = set()
        return metrics

    def _apply(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, finite_loss: bool) -> tuple[float, bool]:
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), self.config.trainer.max_grad_norm).item()
        skipped = not (finite_loss and math.isfinite(grad_norm))
        if not skipped:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return grad_norm, skipped

    def publish_weights(self) -> WeightUpdate:
        """Publishes the current weights through the transport; returns the handle engines load."""
        return self.transport.publish(self.model.state_dict(), self.version)

    def save_checkpoint(self, directory: str, resumable: bool = True) -> None:
        """HF-format model plus the tokenizer files of the initial model directory, and (when
        ``resumable``) trainer_state.pt: optimiser, critic and version, for an exact resume."""
        out = Path(directory)
        self.model.save_pretrained(out, safe_serialization=True)
        if resumable:
            state = {"version": self.version, "optimizer": self.optimizer.state_dict()}
            if self.critic is not None:
                state |= {"critic": self.critic.state_dict(), "critic_optimizer": self.critic_optimizer.state_dict()}
            torch.save(state, out / "trainer_state.pt")
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
            source = Path(self.config.model.path) / name
            if source.is_file() and not (out / name).exists():
                shutil.copy(source, out / name)

    def restore(self, directory: str) -> int:
        """Loads a checkpoint written by save_checkpoint; returns its version."""
        from safetensors.torch import load_file

        self.model.load_state_dict(load_file(str(Path(directory) / "model.safetensors")))
        state = torch.load(Path(directory) / "trainer_state.pt", weights_only=True)
        self.optimizer.load_state_dict(state["optimizer"])
        if self.critic is not None:
            self.critic.load_state_dict(state["critic"])
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.version = state["version"]
        return self.version

    def close(self) -> None:
        """Removes the weights the transport published."""
        self.transport.close()
