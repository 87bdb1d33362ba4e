"""flywheel's vLLM weight-transfer engine, backend "flywheel": it receives any flywheel ``WeightUpdate``
(the file transport's file, the collective transport's gloo broadcast) inside vLLM's native update
session, in every engine worker.

vLLM creates a worker's transfer engine from ``WeightTransferEngineFactory`` when the worker loads its
model; flywheel's vLLM plugin (engines/vllm_plugin.py, entry point ``vllm.general_plugins``) registers
this class there under the backend name in every vLLM process.

The session: ``update_weights`` feeds the update's tensors (under every name, tied ones included), each
checked against the trainer's digest first (``WeightUpdate.verified``), to vLLM's layerwise reload
(``model_runner.reload_weights``'s steps: the model's ``load_weights`` between
``initialize_layerwise_reload`` and ``finalize_layerwise_reload``, which repacks the CPU GEMM weights).
Without a shadow it reloads the live model while the engine is paused, and ``finish_weight_update`` has
nothing left to do. With one (``UpdateInfo.shadow``) it returns at once and a background thread reloads
the model's shadow (engines/vllm_shadow.py) while the live model generates; the front end polls
``flywheel_load_state`` (``WorkerMethods``) and then, paused, ``finish_weight_update`` trades the live
weights for the shadow's; ``flywheel_roll_back`` trades them back.

A receive that fails (a member of the group died mid-send, a tensor arrived corrupt) shuts this worker's end of the group down,
so that members waiting on it fail at once rather than at the timeout, and finalises the reload, so
that the model holds whole layers again (old or new; see weights/collective.py): the live model before
generation resumes, or the shadow, which is then not traded. The router re-forms the group and the
update arrives again.
"""

from __future__ import annotations

import pickle
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
from vllm.config import get_current_vllm_config, set_current_vllm_config
from vllm.distributed.weight_transfer.base import WeightTransferEngine, WeightTransferInitInfo, WeightTransferUpdateInfo
from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload

from flywheel.engines.vllm_shadow import shadow_of, trade
from flywheel.weights.base import WeightUpdate

LOADER = ThreadPoolExecutor(1, thread_name_prefix="flywheel-shadow-load")  # one shadow load at a time per worker


@dataclass
class JoinInfo(WeightTransferInitInfo):
    update: bytes  # a pickled WeightUpdate whose group the worker joins
    rank_offset: int  # the group rank of the engine's first worker


@dataclass
class UpdateInfo(WeightTransferUpdateInfo):
    update: bytes  # the pickled WeightUpdate to receive
    shadow: bool = False  # into the model's shadow, in a background thread, while the live model generates


class FlywheelTransferEngine(WeightTransferEngine[JoinInfo, UpdateInfo]):
    init_info_cls = JoinInfo
    update_info_cls = UpdateInfo
    supports_draft_weight_update = False

    link: Any = None  # what the update's ``join`` returned (the process group), None before any
    shadow: torch.nn.Module | None = None  # the model's twin that shadow loads fill (engines/vllm_shadow.py), made at the first
    loading: Future | None = None  # the shadow load in flight or done, until ``finish_weight_update``

    def init_transfer_engine(self, init_info: JoinInfo) -> None:
        """Joins the update's group as this worker's rank (vLLM's rule: data-parallel index × workers
        per replica + worker rank, after ``rank_offset``)."""
        p = self.parallel_config
        self.shutdown()  # the previous group's end, if any
        self.link = pickle.loads(init_info.update).join(init_info.rank_offset + p.data_parallel_index * p.world_size + p.rank)

    def start_weight_update(self) -> None:
        """Nothing yet: the load itself starts vLLM's layerwise reload, on the live model or its shadow."""

    def update_weights(self, update_info: dict[str, Any]) -> None:
        # The base class's version also calls torch.accelerator.synchronize(), which raises on a
        # machine without an accelerator (vLLM-CPU); load_weights copies synchronously anyway.
        self.receive_weights(self.parse_update_info(update_info))

    def receive_weights(self, update_info: UpdateInfo) -> None:
        update = pickle.loads(update_info.update)
        if not update_info.shadow:
            self.load(self.model, update)
            return
        config = get_current_vllm_config()  # the worker's, set around this call; the loading thread sets it too

        def load_shadow() -> None:
            with set_current_vllm_config(config):
                if self.shadow is None:
                    self.shadow = shadow_of(self.model)
                self.load(self.shadow, update)

        self.loading = LOADER.submit(load_shadow)

    def load(self, model: torch.nn.Module, update: WeightUpdate) -> None:
        """vLLM's layerwise reload of ``update`` into ``model``, each tensor checked against its digest first."""
        initialize_layerwise_reload(model)
        try:
            model.load_weights(update.verified(self.link))
        except Exception:
            self.shutdown()
            raise
        finally:  # whole layers again (old or new) before ``model`` serves or trades
            finalize_layerwise_reload(model, self.model_config)

    def load_state(self) -> str | None:
        """The shadow load's state: None while it runs, "" once it succeeded, the error's text if it failed."""
        if self.loading is None or not self.loading.done():
            return None
        error = self.loading.exception()
        return "" if error is None else f"{type(error).__name__}: {error}"

    def finish_weight_update(self) -> None:
        """After a shadow load: the live model trades weights with the shadow (the load must be over, see
        ``load_state``). A failed shadow load trades nothing: the live model keeps its version."""
        loading, self.loading = self.loading, None
        if loading is not None and loading.exception() is None:
            trade(self.model, self.shadow)

    def roll_back(self) -> None:
        """The live model takes back the version it served before the last trade (which the shadow holds)."""
        trade(self.model, self.shadow)

    def shutdown(self) -> None:
        link, self.link = self.link, None
        if hasattr(link, "shutdown"):  # a process group: its connections close
            link.shutdown()


class WorkerMethods:
    """What flywheel adds to every vLLM worker (vLLM's ``worker_extension_cls``), for ``collective_rpc``."""

    weight_transfer_engine: FlywheelTransferEngine

    def flywheel_load_state(self) -> str | None:
        return self.weight_transfer_engine.load_state()

    def flywheel_roll_back(self) -> None:
        self.weight_transfer_engine.roll_back()
