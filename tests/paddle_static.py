"""Running a program Keel built in PaddlePaddle's own static executor (legacy IR), for the
paddle-marked tests: the program is serialized by Keel, parsed by PaddlePaddle, and run
from the values Keel's startup program produced."""
import os

import numpy as np

os.environ.setdefault("FLAGS_enable_pir_api", "0")


def legacy_ir(paddle):
    """PaddlePaddle's legacy IR (Program/Block/Operator, what Keel writes), whatever
    FLAGS_enable_pir_api said when paddle was first imported in this process: PaddlePaddle
    3.x's default is PIR, whose Program has no parse_from_string and whose static layers
    take no legacy dtypes."""
    return paddle.pir_utils.OldIrGuard()


def run_in_paddle(paddle, main, initial: dict, batches: list, fetch_names: list):
    """Run Keel's `main` once per feed dict of `batches` in a fresh PaddlePaddle scope set to
    `initial` ({name: array}); return ([fetched values per run], {name: final value})."""
    paddle.enable_static()
    with legacy_ir(paddle), paddle.static.scope_guard(paddle.static.Scope()):
        program = paddle.static.Program.parse_from_string(main.serialize_to_string())
        exe = paddle.static.Executor(paddle.CPUPlace())
        scope = paddle.static.global_scope()
        for name, value in initial.items():
            scope.var(name).get_tensor().set(np.asarray(value), paddle.CPUPlace())
        fetched = [[np.asarray(v) for v in exe.run(program, feed=b, fetch_list=list(fetch_names))]
                   for b in batches]
        final = {n: np.array(scope.find_var(n).get_tensor()) for n in initial}
    return fetched, final


def persistable_values(main, scope) -> dict:
    """{name: a copy of its value} for every persistable variable of `main` the scope holds."""
    out = {}
    for var in main.global_block().vars.values():
        if var.persistable and scope.has(var.name):
            out[var.name] = np.array(scope.get(var.name))
    return out
