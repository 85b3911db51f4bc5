"""PaddlePaddle's `paddle.static.create_global_var`: a variable of the main program's global
block set to a constant by the startup program (loss scales, step counters)."""
from __future__ import annotations

from keel.program import default


def create_global_var(shape, value, dtype, persistable=False, force_cpu=False, name=None, *,
                      main_program=None, startup_program=None):
    """A `shape` variable named `name` in the main program, filled with `value` by a
    `fill_constant` in the startup program (the default programs unless given).
    `force_cpu` is accepted for PaddlePaddle's signature; Keel places every value alike.

    Examples:
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     step = paddle.static.create_global_var([1], value=0.0, dtype="float32", persistable=True, name="step")
        >>> exe = paddle.static.Executor()
        >>> _ = exe.run(startup)
        >>> exe.run(main, fetch_list=[step])
        [array([0.], dtype=float32)]
    """
    main = main_program or default.default_main_program()
    startup = startup_program or default.default_startup_program()
    shape = [int(d) for d in shape]
    var = main.global_block().create_var(name, shape, dtype, persistable=persistable, stop_gradient=True)
    sblock = startup.global_block()
    svar = sblock.create_var(var.name, shape, dtype, persistable=persistable, stop_gradient=True)
    sblock.append_op("fill_constant", outputs={"Out": [svar]},
                     attrs={"shape": shape, "dtype": svar.dtype, "value": float(value),
                            "str_value": repr(float(value))})
    return var
