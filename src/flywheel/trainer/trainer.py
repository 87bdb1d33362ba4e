"""The policy trainer: one process holding the model, its optimiser, and (when the algorithm needs
them) a frozen reference model and a critic. A Ray actor in a run.

It does not know which algorithm it runs: the loss comes from ``algorithms.select``.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoModelForTokenClassification

from flywheel.algorithms.aggregation import aggregate, token_mean
from flywheel.algorithms.kl import kl_penalty
from flywheel.algorithms.off_policy import masked_is_keep, truncated_is_weights
from flywheel.algorithms.select import policy_loss
from flywheel.algorithms.value_loss import clipped_value_loss
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
        self.algorithm = config.algorithm
        self.transport = transport
        dtype = getattr(torch, config.model.dtype)
        self.model = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=dtype)
        self.model.train()
        tc = config.trainer
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=tc.lr, betas=tc.betas, weight_decay=tc.weight_decay)
        self.loss_fn = policy_loss(config.algorithm)
        # A reference model exists only when a KL term uses it: no memory is spent on it otherwise.
        self.reference = None
        if self.algorithm.kl_beta > 0:
            self.reference = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=dtype).eval().requires_grad_(False)
        self.critic = None
        if self.algorithm.advantage == "gae":
            self.critic = AutoModelForTokenClassification.from_pretrained(config.model.path, num_labels=1, dtype=dtype)
            self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=self.algorithm.critic_lr, betas=tc.betas)
        self.version = 0

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
        return (kl_penalty(self.logprobs(batch), reference, self.algorithm.kl_estimator) * batch.loss_mask).sum(-1)

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        """One training step: ``trainer.minibatches`` optimiser steps over the batch; version += 1.

        The proximal (old-policy) logprobs of the PPO ratio are recomputed here, not taken from the
        engine; the engine's behaviour logprobs measure the trainer/engine mismatch and feed the
        optional off-policy correction (``algorithm.off_policy``).
        """
        old = self.logprobs(batch)
        log_ratio = old - batch.behaviour_logprobs  # trainer vs engine, same weights, same tokens
        metrics = {
            "mismatch/kl": token_mean(torch.exp(log_ratio) - log_ratio - 1.0, batch.loss_mask).item(),
            "mismatch/abs_diff": token_mean(log_ratio.abs(), batch.loss_mask).item(),
        }
        parts = self.config.trainer.minibatches
        sums: dict[str, float] = {}
        for mb, mb_old, mb_log_ratio in zip(batch.split(parts), old.tensor_split(parts), log_ratio.tensor_split(parts)):
            step_metrics = self._policy_step(mb, mb_old, mb_log_ratio)
            if self.critic is not None:
                step_metrics |= self._critic_step(mb)
            for key, value in step_metrics.items():
                sums[key] = sums.get(key, 0.0) + value / parts
        self.version += 1
        return metrics | sums

    def _policy_step(self, mb: TrainBatch, old: torch.Tensor, log_ratio: torch.Tensor) -> dict[str, float]:
        """One optimiser step of the policy; log_ratio = proximal (old) minus behaviour logprobs."""
        a = self.algorithm
        mask, is_metrics = mb.loss_mask, {}
        if a.off_policy == "mis":
            mask, is_metrics = masked_is_keep(log_ratio, mask, a.is_level, a.is_low, a.is_high)
        new, entropy = token_logprobs(self.model, mb.tokens, mb.attention_mask, with_entropy=True)
        per_token, metrics = self.loss_fn(new, old, mb.advantages, mask)
        if a.off_policy == "tis":
            weights, is_metrics = truncated_is_weights(log_ratio, mask, a.is_level, a.is_cap)
            per_token = per_token * weights
        metrics |= is_metrics
        norm = self.config.rollout.max_new_tokens
        loss = aggregate(per_token, mask, a.aggregation, norm_tokens=norm)
        if a.entropy_coef > 0:
            loss = loss - a.entropy_coef * aggregate(entropy, mask, a.aggregation, norm_tokens=norm)
        if self.reference is not None:
            with torch.no_grad():
                reference = token_logprobs(self.reference, mb.tokens, mb.attention_mask)
            kl = kl_penalty(new, reference, a.kl_estimator)
            metrics["kl/reference"] = token_mean(kl.detach(), mask).item()
            if a.kl_placement == "loss":
                loss = loss + a.kl_beta * aggregate(kl, mask, a.aggregation, norm_tokens=norm)
        grad_norm, skipped = self._apply(loss, self.model, self.optimizer, self.config.trainer.max_grad_norm)
        return metrics | {
            "loss": loss.item(), "grad_norm": grad_norm, "entropy": token_mean(entropy.detach(), mask).item(),
            "train/nonfinite_skipped": float(skipped),
        }

    def _critic_step(self, mb: TrainBatch) -> dict[str, float]:
        with torch.no_grad():
            old_values = self._values(mb)
        loss, metrics = clipped_value_loss(self._values(mb), old_values, mb.returns, mb.loss_mask, self.algorithm.value_clip)
        grad_norm, skipped = self._apply(loss, self.critic, self.critic_optimizer, self.config.trainer.max_grad_norm)
        return metrics | {"critic/loss": loss.item(), "critic/grad_norm": grad_norm, "critic/nonfinite_skipped": float(skipped)}

    def _apply(self, loss: torch.Tensor, model: torch.nn.Module, optimizer: torch.optim.Optimizer, max_norm: float) -> tuple[float, bool]:
        """Backward, clip, step; returns (grad norm, skipped). A non-finite loss or gradient is never
        applied: the gradients are dropped and the step is reported as skipped."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm).item()
        if not (math.isfinite(loss.item()) and math.isfinite(grad_norm)):
            optimizer.zero_grad(set_to_none=True)
            return grad_norm, True
        optimizer.step()
        return grad_norm, False

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
