"""Memory levers for a built :class:`~graphtransformer.model.GraphTransformer`: selective activation checkpointing
and FSDP2 parameter / gradient / optimizer-state sharding (``torch.distributed.fsdp.fully_shard``).

Both are applied by :func:`graphtransformer.parallel.parallelize_graph_transformer` after the attention cores are
swapped, in the TorchTitan order (parallel layout -> activation checkpointing -> FSDP), and neither changes the
math: a training step equals the single-process step (tested to 1e-10 in float64 on 2 gloo ranks).

* Activation checkpointing wraps the chosen transformer layers with ``checkpoint_wrapper`` (non-reentrant
  ``torch.utils.checkpoint``): their activations are recomputed in backward, so a checkpointed sequence-parallel
  layer repeats its forward communication (halo exchange / all-to-all / ring) during backward. The wrapper's
  state-dict hooks strip its ``_checkpoint_wrapped_module.`` prefix, so checkpoints stay loadable without it.
* FSDP2 shards every parameter on dim 0 over all ``cp * hp`` ranks (one flat 1-D mesh), one ``fully_shard`` unit
  per transformer layer plus the root. The ranks of a sequence-parallel layout hold *different rows of one graph*,
  so their gradients are partial sums of one loss: the reduce-scatter must **sum** (gradient divide factor 1), not
  average as in data parallelism. Parameters must be identical on every rank before sharding (broadcast first).
  After ``backward`` the gradients are already reduced, so a sharded model gets no DDP
  (:func:`~graphtransformer.parallel.replicate_parameters` is for the replicated one). The optimizer must be built
  over the sharded parameters, after this call.

For the TorchGT-size models (hidden 64, ~100K parameters) FSDP saves little; activations dominate, which is what
checkpointing addresses (the research note, section 3c).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor


def checkpoint_layers(model: nn.Module, layers: Sequence[int]) -> nn.Module:
    """Wrap ``model.layers[i]`` for every i in ``layers`` with non-reentrant activation checkpointing (in place)."""
    num = len(model.layers)
    bad = [i for i in layers if not 0 <= i < num]
    if bad:
        raise ValueError(f"checkpoint_layers: layer indices {bad} out of range; the model has layers 0..{num - 1}")
    for i in sorted(set(layers)):
        model.layers[i] = checkpoint_wrapper(model.layers[i], checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    return model


def world_mesh(device_type: str = "cpu") -> DeviceMesh:
    """A 1-D mesh ("fsdp",) over the whole world (the flattened ("cp", "hp") mesh) for parameter sharding."""
    return init_device_mesh(device_type, (dist.get_world_size(),), mesh_dim_names=("fsdp",))


def shard_parameters(model: nn.Module, mesh: DeviceMesh, reshard_after_forward: bool = True) -> nn.Module:
    """FSDP2 over ``mesh``: one unit per transformer layer and the root; gradients summed over ranks (in place)."""
    if mesh.ndim != 1:
        raise ValueError(f"shard_parameters: need a 1-D mesh, got dims {mesh.mesh_dim_names}; use world_mesh()")
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
    for m in model.modules():
        if isinstance(m, FSDPModule):
            m.set_gradient_divide_factor(1.0)  # partial sums of one loss, not data-parallel replicas
            # A custom divide factor makes FSDP2 pick ReduceOp.PREMUL_SUM for float32 gradients, which gloo rejects
            # ("Cannot use ReduceOp.PREMUL_SUM with Gloo"); plain SUM (then scaling by 1) works on every backend.
            m.set_force_sum_reduction_for_comms(True)
    return model


def is_sharded(p: nn.Parameter) -> bool:
    """True for FSDP2-managed (DTensor) parameters."""
    return isinstance(p, DTensor)


def full_tensor(t):
    """The whole tensor of a DTensor (all-gathered), the tensor itself otherwise."""
    return t.full_tensor() if isinstance(t, DTensor) else t
