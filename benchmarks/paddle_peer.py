"""PaddlePaddle's static-graph executor as a benchmark peer, where it is installed.

Programs are built the legacy way (FLAGS_enable_pir_api=0, as the issues' figures were
measured), with `paddle.static` layers where PaddlePaddle 3.3.1 still accepts legacy
variables and `append` (a plain legacy op) where it does not (matmul_v2, gelu). Each peer
program gets a scope of its own. Not a Keel dependency: without PaddlePaddle, `load()`
returns None and the benchmarks print "not installed".
"""
from __future__ import annotations

import os

from common import predictor_call


def load():
    """The paddle module in static mode, or None where it is not installed."""
    os.environ.setdefault("FLAGS_enable_pir_api", "0")
    try:
        import paddle
    except ImportError:
        return None
    paddle.enable_static()
    return paddle


def append(paddle, op_type: str, inputs: dict, attrs: dict | None = None, out_slot: str = "Out"):
    """Append one legacy op to the current block; its output variable."""
    block = paddle.static.default_main_program().current_block()
    first = next(iter(inputs.values()))
    out = block.create_var(name=paddle.utils.unique_name.generate(op_type), dtype=first.dtype)
    block.append_op(type=op_type, inputs={k: [v] for k, v in inputs.items()}, outputs={out_slot: [out]},
                    attrs=attrs or {})
    return out


def training_step(paddle, build, feed: dict):
    """A zero-argument callable running one training step of the program that `build()`
    makes inside a program guard (it returns the loss, with the optimizer's minimize done)."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    startup.random_seed = 1
    with paddle.static.program_guard(main, startup), paddle.utils.unique_name.guard():
        loss = build()
    exe, scope = paddle.static.Executor(paddle.CPUPlace()), paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe.run(startup)

    def run():
        with paddle.static.scope_guard(scope):
            return exe.run(main, feed=feed, fetch_list=[loss])[0]
    return run


def inference_call(paddle, prefix: str, x, threads: int):
    """A zero-argument callable running Paddle Inference (oneDNN on, `threads` math
    threads) on the inference model at `prefix` with input `x`, returning the first output:
    copy in, run, copy out, as a server does per request."""
    config = paddle.inference.Config(prefix + ".pdmodel", prefix + ".pdiparams")
    config.disable_gpu()
    config.enable_mkldnn()
    config.set_cpu_math_library_num_threads(threads)
    config.disable_glog_info()
    return predictor_call(paddle.inference.create_predictor(config), x)
