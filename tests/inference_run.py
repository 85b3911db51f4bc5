"""Running an inference program (feed/fetch ops, parameters as a dict) in a fresh scope."""
from keel.executor import Executor, Scope


def run(program, params, feed):
    """The fetch targets' values, in `col` order."""
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    fetches = sorted((op for op in program.global_block().ops if op.type == "fetch"),
                     key=lambda op: op.attr("col"))
    return Executor().run(program, feed=feed, fetch_list=[op.input("X")[0] for op in fetches], scope=scope)
