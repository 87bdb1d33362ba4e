"""The policy trainer: one process holding the model and optimiser (a Ray actor in a run).

It does not know which algorithm it runs beyond the loss function it is handed by name.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from flywheel.algorithms.aggregation import token_mean
from flywheel.algorithms.ppo_clip import ppo_clip_loss
from flywheel.config import Config
from flywheel.trainer.logprobs import token_logprobs
from flywheel.types import TrainBatch
from flywheel.weights import shm

LOSSES = {"ppo_clip": ppo_clip_loss}


class NonFiniteError(RuntimeError):
    """A loss or gradient was NaN/inf; the step was not applied."""


class Trainer:
    def __init__(self, config: Config, weights_dir: str) -> None:
        torch.manual_seed(config.run.seed)
        torch.set_num_threads(config.trainer.threads)
        self.config = config
        self.weights_dir = Path(weights_dir)
        dtype = getattr(torch, config.model.dtype)
        self.model = AutoModelForCausalLM.from_pretrained(config.model.path, dtype=dtype)
        self.model.train()
        tc = config.trainer
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=tc.lr, betas=tc.betas, weight_decay=tc.weight_decay
        )
        self.loss_fn = LOSSES[config.algorithm.loss]
        self.version = 0

    @torch.no_grad()
    def logprobs(self, batch: TrainBatch) -> torch.Tensor:
        """The current policy's logprobs of batch.tokens, [B, T]."""
        return token_logprobs(self.model, batch.tokens, batch.attention_mask)

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        """One training step: ``trainer.minibatches`` optimiser steps over the batch; version += 1.

        The old-policy logprobs of the PPO ratio are recomputed here (not taken from the engine);
        the engine's behaviour logprobs only measure the trainer/engine mismatch.
        """
        old = self.logprobs(batch)
        mask = batch.loss_mask
        log_ratio = old - batch.behaviour_logprobs  # trainer vs engine, same weights, same tokens
        mismatch = {
            "mismatch/kl": token_mean(torch.exp(log_ratio) - log_ratio - 1.0, mask).item(),
            "mismatch/abs_diff": token_mean(log_ratio.abs(), mask).item(),
        }
        sums: dict[str, float] = {}
        parts = self.config.trainer.minibatches
        for mb, mb_old in zip(batch.split(parts), old.split(len(batch) // parts)):
            new, entropy = token_logprobs(self.model, mb.tokens, mb.attention_mask, with_entropy=True)
            loss, metrics = self.loss_fn(
                new, mb_old, mb.advantages[:, None].expand_as(new), mb.loss_mask, self.config.algorithm.clip_eps
            )
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.trainer.max_grad_norm)
            if not (math.isfinite(loss.item()) and math.isfinite(grad_norm.item())):
                self.optimizer.zero_grad(set_to_none=True)
                raise NonFiniteError(f"non-finite loss {loss.item()} or grad norm {grad_norm.item()} at version {self.version}")
            self.optimizer.step()
            metrics |= {"loss": loss.item(), "grad_norm": grad_norm.item(), "entropy": token_mean(entropy.detach(), mb.loss_mask).item()}
            for key, value in metrics.items():
                sums[key] = sums.get(key, 0.0) + value / parts
        self.version += 1
        return sums | mismatch

    def publish_weights(self) -> tuple[str, int]:
        """Writes the current weights for the engines; returns (path, version)."""
        return str(shm.publish(self.model.state_dict(), self.weights_dir, self.version)), self.version

    def save_checkpoint(self, directory: str) -> None:
        """HF-format model plus the tokenizer files of the initial model directory."""
        out = Path(directory)
        self.model.save_pretrained(out, safe_serialization=True)
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"):
            source = Path(self.config.model.path) / name
            if source.is_file() and not (out / name).exists():
                shutil.copy(source, out / name)

    def close(self) -> None:
        shutil.rmtree(self.weights_dir, ignore_errors=True)
