"""`fleet.DistributedStrategy`: PaddlePaddle's options for collective training, with its
names and defaults, checked as PaddlePaddle checks them.

    strategy = fleet.DistributedStrategy()
    strategy.amp = True
    strategy.amp_configs = {"init_loss_scaling": 1024, "use_pure_fp16": True}
    strategy.recompute = True
    strategy.recompute_configs = {"checkpoints": [h1.name, h2.name]}
    strategy.gradient_merge = True
    strategy.gradient_merge_configs = {"k_steps": 4, "avg": True}
    strategy.sharding = True          # ZeRO-1 over all ranks (sharding_configs: stage 1)

What fleet acts on: the gradient all-reduce's buckets (`fuse_all_reduce_ops`,
`fuse_grad_size_in_MB`), `sync_batch_norm`, `sharding`, and the meta-optimizers `amp`,
`recompute` and `gradient_merge`, which wrap the user's optimizer in Keel's
static.amp.decorate, RecomputeOptimizer and GradientMergeOptimizer (fleet.py). A config dict
assigned is merged into the defaults; a key PaddlePaddle does not have is refused, as is an
option name it does not have (TypeError, PaddlePaddle's answer). PaddlePaddle's options that
would change the training (pipeline, tensor parallelism, DGC, LARS, LAMB, local SGD, ...)
are refused when switched on, never silently ignored; its tuning knobs that leave the
arithmetic alone (NCCL communicator counts, cuDNN search, ...) are accepted and have no
effect here.
"""
from __future__ import annotations

import copy

_OPTIONS = {
    "fuse_all_reduce_ops": True, "fuse_grad_size_in_MB": 32.0, "sync_batch_norm": False,
    "sharding": False, "amp": False, "recompute": False, "gradient_merge": False,
}
_CONFIGS = {
    "amp_configs": {"init_loss_scaling": 32768.0, "incr_every_n_steps": 1000, "decr_every_n_nan_or_inf": 2,
                    "incr_ratio": 2.0, "decr_ratio": 0.8, "use_dynamic_loss_scaling": True,
                    "custom_white_list": [], "custom_black_list": [], "custom_black_varnames": [],
                    "use_pure_fp16": False, "use_fp16_guard": True, "use_optimizer_fp16": False,
                    "use_pure_bf16": False},
    "recompute_configs": {"checkpoints": [], "enable_offload": False, "checkpoint_shape": [],
                          "enable_tuning": False, "refined_ops_patterns": []},
    "gradient_merge_configs": {"k_steps": 1, "avg": True},
    "sharding_configs": {"sharding_segment_strategy": "segment_broadcast_MB", "segment_broadcast_MB": 32.0,
                         "segment_anchors": [], "sharding_degree": 8, "mp_degree": 1, "dp_degree": 1,
                         "hybrid_dp": False, "gradient_merge_acc_step": 1, "optimize_offload": False,
                         "pp_allreduce_in_optimize": False, "pp_degree": 1, "optimize_cast": False,
                         "_dp_as_optimizer_sharding": False, "stage": 1, "enable_tuning": False,
                         "use_calc_stream": False},
}
# PaddlePaddle's options that change what training computes: refused when switched on.
_REFUSED = ("localsgd", "adaptive_localsgd", "dgc", "lars", "lamb", "pipeline", "tensor_parallel",
            "fp16_allreduce", "qat", "asp", "auto", "semi_auto", "elastic", "heter_ccl_mode")
# Its tuning knobs that leave the arithmetic alone: accepted, no effect here.
_NO_EFFECT = {"a_sync": True, "nccl_comm_num": 1, "use_hierarchical_allreduce": False,
              "hierarchical_allreduce_inter_nranks": 1, "sync_nccl_allreduce": True,
              "cudnn_exhaustive_search": False, "conv_workspace_size_limit": 512,
              "cudnn_batchnorm_spatial_persistent": False, "find_unused_parameters": False,
              "fuse_grad_merge": False, "last_comm_group_size_MB": 1.0, "without_graph_optimization": True,
              "build_strategy": None, "execution_strategy": None}


class DistributedStrategy:
    """PaddlePaddle's DistributedStrategy (collective mode). Keyword arguments set options
    at construction (`DistributedStrategy(sharding=True)`), a Keel convenience.

    Examples:
        >>> from keel.distributed import fleet
        >>> strategy = fleet.DistributedStrategy()
        >>> strategy.amp = True
        >>> strategy.amp_configs = {"init_loss_scaling": 1024}    # merged into the defaults
        >>> strategy.sharding = True
        >>> strategy
        DistributedStrategy(fuse_all_reduce_ops, sharding, amp)
        >>> strategy.amp_configs["init_loss_scaling"], strategy.amp_configs["use_dynamic_loss_scaling"]
        (1024, True)
        >>> strategy.pipeline = True                                # what Keel's fleet does not do is refused
        Traceback (most recent call last):
        ...
        NotImplementedError: DistributedStrategy.pipeline: not supported by Keel's fleet ...
    """

    def __init__(self, **options):
        for name, default in {**_OPTIONS, **_NO_EFFECT}.items():
            object.__setattr__(self, name, copy.copy(default))
        for name, defaults in _CONFIGS.items():
            object.__setattr__(self, name, copy.deepcopy(defaults))
        for name in _REFUSED:
            object.__setattr__(self, name, False)
        for name, value in options.items():
            setattr(self, name, value)

    def __setattr__(self, name, value):
        if name in _CONFIGS:
            if not isinstance(value, dict):
                raise TypeError(f"DistributedStrategy.{name} must be a dict, got {type(value).__name__}")
            unknown = sorted(set(value) - set(_CONFIGS[name]))
            if unknown:
                raise KeyError(f"DistributedStrategy.{name}: no key {', '.join(map(repr, unknown))}; the keys are "
                               f"{', '.join(_CONFIGS[name])}")
            value = {**getattr(self, name), **copy.deepcopy(value)}
        elif name in _REFUSED:
            if value:
                raise NotImplementedError(f"DistributedStrategy.{name}: not supported by Keel's fleet (collective "
                                          f"data parallelism with amp, recompute, gradient_merge and sharding)")
        elif name not in _OPTIONS and name not in _NO_EFFECT:
            raise TypeError(f"{name} is not an attribute of DistributedStrategy")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        on = [name for name in _OPTIONS if getattr(self, name) is True]
        return f"DistributedStrategy({', '.join(on) or 'plain data parallelism'})"
