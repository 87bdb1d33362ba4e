"""vLLM engine: with engines/vllm_transfer.py and engines/vllm_plugin.py, the only modules of flywheel that import vllm.

The engine is vLLM's ``AsyncLLM``. A weight update lands while requests are being generated, through
vLLM's weight-transfer session on every worker (``init_weight_transfer_engine`` once per group, then
``start_weight_update``, ``update_weights``, ``finish_weight_update``, which labels the new weights with
their version). With a shadow (``weights.shadow``, the default) the workers load the version into a
shadow of the model while the live one generates, and the scheduler pauses (keeping the running
requests, dropping the prefix cache: it holds keys of the old weights) only for the trade between two
steps; without one it pauses for the whole load. Each worker checks every tensor against the trainer's
digest as it arrives, and the replica then runs the version's probe (weights/probe.py); a refused
version (``WeightsCorrupt``) reaches no completion: completions holding tokens of a version whose probe
fails are sampled again. With a shadow the replica goes on with the version before (a corrupt copy is
not traded, a failed probe trades back); without one, generation stays paused until a good copy lands. The transfer engine is
vLLM's own NCCL engine for the collective transport on GPU (no shadow there), flywheel's
(engines/vllm_transfer.py) otherwise. vLLM's engine core stamps every step's outputs with
the label of the weights that computed them, and a finished request carries them as spans of its
tokens (``CompletionOutput.weight_versions``): a completion that spans an update says exactly which
tokens came from which weights, so a request is answered once, when it ends (``FINAL_ONLY``).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle

import torch

from flywheel.config.engine import VLLMConfig
from flywheel.engines.base import Loaded
from flywheel.engines.heap import freeze_startup_heap
from flywheel.engines.remote import ServesBatches
from flywheel.engines.spec import EngineSpec
from flywheel.engines.vllm_plugin import BACKEND
from flywheel.types import Completion
from flywheel.weights.base import WeightsCorrupt, WeightUpdate
from flywheel.weights.probe import worst_gap


def on_cpu() -> bool:
    """Whether this process's engine runs on vLLM-CPU (no CUDA device visible)."""
    return not torch.cuda.is_available()


def engine_env(options: VLLMConfig, cpu: bool) -> dict[str, str]:
    """Environment variables of the engine's processes (set before vllm is imported); the CPU-only
    ``options`` only on CPU."""
    env = {"VLLM_LOGGING_LEVEL": "WARNING", "TOKENIZERS_PARALLELISM": "false"}
    if cpu:
        env |= {"VLLM_CPU_KVCACHE_SPACE": str(options.kv_cache_gib), "VLLM_CPU_OMP_THREADS_BIND": options.cpu_bind}
        # the model runs in the engine-core process (vLLM's one-process executor): vLLM-CPU otherwise spawns a
        # worker process that imports vLLM a third time, 9 of an engine's 28 s of start-up here
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    return env


SHADOW_POLL_S = 0.01  # how often the front end asks the workers whether their shadow load is over


def cpu_list(spec: str) -> set[int]:
    """The cores of a Linux CPU list such as '0', '0-3' or '0,2-3'."""
    cores: set[int] = set()
    for part in spec.split(","):
        first, _, last = part.partition("-")
        cores.update(range(int(first), int(last or first) + 1))
    return cores


def engine_args(spec: EngineSpec, cpu: bool) -> dict:
    """vLLM's engine arguments for generation (the weight-transfer hooks aside): what bench/rollout.py
    gives bare vLLM too."""
    from vllm.config import StructuredOutputsConfig

    # A seeded request whose prefill is split across steps makes vLLM-CPU 0.32 rewind its sampling
    # generator, which CPU generators cannot do (the engine dies): no splitting on CPU.
    device_args = {"enable_chunked_prefill": False} if cpu else {"gpu_memory_utilization": spec.options.gpu_memory_utilization}
    # vLLM's stats are computed every step for its own logs only (``vllm.LLM`` turns them off too)
    return {
        "model": spec.model,
        "dtype": spec.dtype,
        "seed": spec.seed,
        "enforce_eager": True,
        "max_num_seqs": spec.options.max_num_seqs,
        "max_num_batched_tokens": spec.options.max_num_batched_tokens,
        "disable_log_stats": True,
        # a schema-constrained reply is compact JSON: whitespace between its tokens would let a weak model run
        # to its token limit without writing a value (a random one does)
        "structured_outputs_config": StructuredOutputsConfig(backend="xgrammar", disable_any_whitespace=True),
        **device_args,
    }


#: the label vLLM's engine core gives its weights until the first ``finish_weight_update`` names a version
VLLM_INITIAL_LABEL = "default"


def label_version(label: str) -> int:
    """The weight version a vLLM weights label names: ``"<version>"``, or ``"<version>.<load>"`` for a
    load proven by a probe (``VLLMEngine.load_weights``); 0 for the initial weights."""
    return 0 if label == VLLM_INITIAL_LABEL else int(label.partition(".")[0])


def token_versions(spans, tokens: int) -> tuple[int, ...]:
    """The weight version of each of a completion's ``tokens`` from vLLM's spans (``WeightVersionSpan``:
    tokens ``[start, end)`` were sampled by the weights labelled ``version``); 0 for the initial weights."""
    versions = tuple(label_version(span.version) for span in spans for _ in range(span.start, span.end))
    if len(versions) != tokens:
        raise RuntimeError(f"vLLM labelled {len(versions)} of a completion's {tokens} tokens with a weight version")
    return versions


class VLLMEngine(ServesBatches):
    """One vLLM replica, the ``spec.replica``-th of its group. A Ray async actor in a run: its methods are coroutines."""

    def __init__(self, spec: EngineSpec) -> None:
        cpu = on_cpu()
        os.environ.update(engine_env(spec.options, cpu))
        if cpu and spec.options.cpu_bind != "auto":  # the front end and the engine-core process it starts, too
            os.sched_setaffinity(0, cpu_list(spec.options.cpu_bind))
        from vllm import AsyncEngineArgs
        from vllm.usage.usage_lib import UsageContext
        from vllm.v1.engine.async_llm import AsyncLLM

        self.backend = spec.weights.engine_backend(cuda=not cpu)  # vLLM's weight-transfer backend
        self.shadow = spec.weights.shadow and self.backend == BACKEND  # loads into a shadow while generating (vllm_transfer.py)
        self.llm = AsyncLLM.from_engine_args(
            AsyncEngineArgs(
                **engine_args(spec, cpu),
                weight_transfer_config={"backend": self.backend},
                worker_extension_cls="flywheel.engines.vllm_transfer.WorkerMethods",
            ),
            # vLLM's batch-generation defaults for what the config leaves to vLLM, as ``vllm.LLM`` gets them
            # (on CPU 4096 tokens per step, not the 2048 of an engine context): a rollout is a batch job
            usage_context=UsageContext.LLM_CLASS,
        )
        self.replica = spec.replica
        self.group: str | None = None  # the weight-transfer group the workers have joined
        self.weight_version = 0
        self.label = VLLM_INITIAL_LABEL  # the label of the weights the replica serves
        self.request_ids = itertools.count()  # unique within this engine, which is all vLLM asks of an id
        self.loads = itertools.count(1)
        self.proofs: dict[str, asyncio.Future[bool]] = {}  # weights label -> whether its probe passed: pending, or refused
        freeze_startup_heap()  # vLLM's engine core does the same; this is its front end

    async def generate(
        self,
        prompts: list[list[int]],
        n: int,
        temperature: float,
        max_tokens: int,
        seed: int,
        stop: list[str] | None = None,
        schema: dict | None = None,
    ) -> list[list[Completion]]:
        """``n`` completions of each prompt; prompt i samples with seed ``seed + i``. A completion also
        ends after any of the ``stop`` strings, which it keeps; with ``schema``, vLLM's structured outputs
        (xgrammar) constrain it to a compact JSON document matching that schema."""
        if len(prompts) == 1:  # a group's call (the common case): no task to gather
            return [await self._complete(prompts[0], n, temperature, max_tokens, seed, stop, schema)]
        requests = (self._complete(p, n, temperature, max_tokens, seed + i, stop, schema) for i, p in enumerate(prompts))
        return list(await asyncio.gather(*requests))

    async def _complete(
        self, prompt: list[int], n: int, temperature: float, max_tokens: int, seed: int, stop: list[str] | None, schema: dict | None
    ) -> list[Completion]:
        from vllm import SamplingParams, TokensPrompt
        from vllm.sampling_params import RequestOutputKind, StructuredOutputsParams

        params = SamplingParams(
            n=n,
            temperature=temperature,
            max_tokens=max_tokens,
            logprobs=0,
            seed=seed,
            stop=stop,
            include_stop_str_in_output=True,
            output_kind=RequestOutputKind.FINAL_ONLY,
            structured_outputs=None if schema is None else StructuredOutputsParams(json=schema),
        )
        async for output in self.llm.generate(TokensPrompt(prompt_token_ids=prompt), params, request_id=str(next(self.request_ids))):
            final = output
        labels = {span.version for sample in final.outputs for span in sample.weight_versions or ()} if self.proofs else ()
        verdicts = [self.proofs[label] for label in labels if label in self.proofs]  # of loads whose probe has not passed
        # some tokens came from a load the probe refused: sampled again, on weights that pass
        if verdicts and not all(await asyncio.gather(*verdicts)):
            return await self._complete(prompt, n, temperature, max_tokens, seed, stop, schema)
        return [
            Completion(
                list(sample.token_ids),
                [step[token].logprob for step, token in zip(sample.logprobs, sample.token_ids)],
                sample.text,
                token_versions(sample.weight_versions or (), len(sample.token_ids)),
                sample.finish_reason == "length",
            )
            for sample in sorted(final.outputs, key=lambda sample: sample.index)
        ]

    async def load_weights(self, update: WeightUpdate) -> Loaded:
        """Loads ``update`` in every worker while requests stay in flight; returns the seconds
        generation was paused and the probe's gap. ``finish_weight_update`` labels the new weights with
        ``update.version`` before generation resumes: every token sampled after it carries that version.

        With a shadow (``weights.shadow``, flywheel's transfer engine) every worker loads the version into
        its shadow while the live model generates, and the pause is the trade between two steps; otherwise
        generation pauses for the whole load. A tensor that arrives corrupt raises ``WeightsCorrupt``: with
        a shadow the replica goes on with the version it serves; without, it stays paused (the model may
        hold some of the new layers) until a good load resumes it. With a probe, the load is labelled
        ``"<version>.<load>"`` and the probe runs once generation resumes; completions holding tokens of
        that label wait for its verdict, and when the probe's gap is over its tolerance the replica rolls
        back to the version before (with a shadow) or pauses again (without), those completions are
        sampled again, and ``WeightsCorrupt`` names the gap.
        """
        label = str(update.version) if update.probe is None else f"{update.version}.{next(self.loads)}"
        shadow = self.shadow
        paused = await (self._trade if shadow else self._stop_and_load)(update, label)
        previous, self.label = self.label, label
        gap = None
        if update.probe is not None:
            self.proofs[label] = asyncio.get_running_loop().create_future()
            try:
                gap = worst_gap(update.probe, await self.score([list(tokens) for tokens in update.probe.tokens]))
            finally:
                proven = gap is not None and gap.size <= update.probe.tolerance
                try:  # a refused version is out of service before the completions waiting on it are sampled again
                    if not proven:
                        await (self._paused(self._roll_back(previous)) if shadow else self._pause())
                finally:
                    self.proofs[label].set_result(proven)
                    if proven:
                        del self.proofs[label]  # a label without a proof is a proven one
            if not proven:
                raise WeightsCorrupt(
                    f"engine replica {self.replica}: weights version {update.version}: the probe's logprob of token {gap.position} of sequence "
                    f"{gap.sequence} is {gap.engine:.6g} on the engine, {gap.trainer:.6g} on the trainer: a gap of {gap.size:.3g}, over "
                    f"the tolerance {update.probe.tolerance:g} (weights.probe_tolerance)"
                    + (f"; the replica went back to weights version {self.weight_version}" if shadow else "")
                )
        self.weight_version = update.version
        return Loaded(paused, None if gap is None else gap.size)

    async def _stop_and_load(self, update: WeightUpdate, label: str) -> float:
        """Pauses generation, loads ``update`` into the live model, resumes; the seconds paused. A corrupt
        copy leaves generation paused: only a good load of some version resumes it."""
        start = await self._pause()
        try:
            await self._begin(update)
            await self.llm.finish_weight_update(label)
        except BaseException as error:
            if isinstance(error, Exception) and (corrupt := WeightsCorrupt.in_error(error)) is not None:
                raise WeightsCorrupt(f"engine replica {self.replica}: {corrupt}") from None
            await self._resume()
            raise
        return await self._resume() - start

    async def _trade(self, update: WeightUpdate, label: str) -> float:
        """Loads ``update`` into every worker's shadow while generation goes on, then pauses for the trade
        only; the seconds paused. A corrupt copy trades nothing: the replica goes on with its version."""
        await self._begin(update, shadow=True)
        while None in (states := await self.llm.collective_rpc("flywheel_load_state")):
            await asyncio.sleep(SHADOW_POLL_S)
        if failed := next((state for state in states if state), None):
            await self.llm.collective_rpc("finish_weight_update")  # ends the session; the live weights stay
            corrupt = WeightsCorrupt.in_error(RuntimeError(failed))
            if corrupt is None:
                raise RuntimeError(f"engine replica {self.replica}: loading weights version {update.version}: {failed}")
            raise WeightsCorrupt(f"engine replica {self.replica}: {corrupt}")
        return await self._paused(self.llm.finish_weight_update(label))

    async def _roll_back(self, label: str) -> None:
        await self.llm.collective_rpc("flywheel_roll_back")
        await self.llm.update_weight_version(label)
        self.label = label

    async def _paused(self, work) -> float:
        """Awaits ``work`` with generation paused; the seconds paused."""
        start = await self._pause()
        try:
            await work
        finally:
            end = await self._resume()
        return end - start

    async def _pause(self) -> float:
        """Pauses the scheduler, keeping requests in flight and dropping the prefix cache (it holds keys
        of the weights before); the time, once no step runs. vLLM's ``pause_generation`` sleeps 20 ms more
        after the engine has paused, for the order of its outputs only."""
        await self.llm.engine_core.pause_scheduler_async(mode="keep", clear_cache=True)
        return asyncio.get_running_loop().time()

    async def _resume(self) -> float:
        end = asyncio.get_running_loop().time()
        await self.llm.resume_generation()
        return end

    async def score(self, sequences: list[list[int]]) -> list[list[float]]:
        """Each sequence's logprobs from position 1 on, from a prefill of it (one output token, not kept)."""
        from vllm import SamplingParams, TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False, output_kind=RequestOutputKind.FINAL_ONLY)

        async def prefill(tokens: list[int]) -> list[float]:
            async for output in self.llm.generate(TokensPrompt(prompt_token_ids=tokens), params, request_id=f"score-{next(self.request_ids)}"):
                final = output
            return [step[token].logprob for step, token in zip(final.prompt_logprobs[1:], tokens[1:])]

        return list(await asyncio.gather(*(prefill(tokens) for tokens in sequences)))

    async def _begin(self, update: WeightUpdate, shadow: bool = False) -> None:
        """Starts vLLM's weight-transfer session for ``update`` on every worker (joining its group first when
        new) and hands it the update; the session stays open for ``finish_weight_update``."""
        from vllm.distributed.weight_transfer.base import WeightTransferInitRequest, WeightTransferUpdateRequest

        payload = pickle.dumps(update)  # vLLM's RPC carries bytes; a dataclass would arrive as a dict
        if update.group is not None and update.group != self.group:
            offset = 1 + self.replica * self.llm.vllm_config.parallel_config.world_size_across_dp
            init = update.nccl_init_info(offset) if self.backend == "nccl" else {"update": payload, "rank_offset": offset}
            await self.llm.init_weight_transfer_engine(WeightTransferInitRequest(init))
            self.group = update.group
        await self.llm.start_weight_update()
        info = update.nccl_update_info() if self.backend == "nccl" else {"update": payload, "shadow": shadow}
        await self.llm.update_weights(WeightTransferUpdateRequest(info))

    def shutdown(self) -> None:
        self.llm.shutdown()
