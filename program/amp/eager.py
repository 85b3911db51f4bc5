"""Eager automatic mixed precision (PaddlePaddle's `paddle.amp.auto_cast` and
`paddle.amp.GradScaler`), on the op lists static AMP uses (program/amp/lists.py).

    scaler = keel.amp.GradScaler(init_loss_scaling=1024)
    with keel.amp.auto_cast(dtype="float16"):
        loss = loss_fn(model(x), y)              # white-list ops (matmul, conv2d, ...) in float16
    scaler.scale(loss).backward()
    scaler.step(optimizer)                       # unscale + overflow check + step if finite
    scaler.update()                              # the dynamic loss scale
    optimizer.clear_grad()

Under `auto_cast` the eager engine casts an op's floating inputs before running it
(`cast_inputs`): level O1 runs white-list ops in the low precision, black-list ops in
float32, and any other op that mixes the two in float32; level O2 runs every op but the
black list in the low precision. The casts are ordinary recorded ops, so gradients flow back
to the float32 parameters through them. The scaler's unscale and loss-scale update are the
`check_finite_and_unscale` and `update_loss_scaling` ops a static AMP program appends.
"""
from __future__ import annotations

import contextlib

import numpy as np

from keel.program import dtypes, dygraph
from keel.program.amp.lists import AutoMixedPrecisionLists
from keel.program.layers.helper import LayerHelper
from keel.program.tensor import Tensor

_F32 = dtypes.to_code("float32")


class _AutoCast:
    """The state `auto_cast` puts in place: which ops run in which precision."""

    def __init__(self, lists: AutoMixedPrecisionLists, level: str):
        self.low = dtypes.to_code(lists.amp_dtype)
        self.white, self.black = frozenset(lists.white_list), frozenset(lists.black_list)
        self.level = level

    def target(self, op_type: str, floats: set) -> int | None:
        """The dtype an op's floating inputs are cast to, or None to leave them."""
        if op_type in self.black:
            return _F32 if self.low in floats else None
        if op_type in self.white or self.level == "O2":
            return self.low if _F32 in floats else None
        return _F32 if len(floats) > 1 else None  # mixed precisions: float32


def cast_inputs(op_type: str, inputs: dict, state: _AutoCast, cast) -> dict:
    """`inputs` with the floating Tensors cast as `state` says (`cast(tensor, dtype)` makes one
    cast); the others unchanged."""
    if op_type == "cast":
        return inputs
    floats = {t._dtype for v in inputs.values() for t in (v if isinstance(v, (list, tuple)) else [v])
              if isinstance(t, Tensor) and t._dtype in (_F32, state.low)}
    target = state.target(op_type, floats)
    if target is None:
        return inputs

    def convert(t):
        return cast(t, target) if isinstance(t, Tensor) and t._dtype in floats and t._dtype != target else t
    return {slot: [convert(t) for t in v] if isinstance(v, (list, tuple)) else convert(v)
            for slot, v in inputs.items()}


@contextlib.contextmanager
def auto_cast(enable: bool = True, custom_white_list=None, custom_black_list=None, level: str = "O1",
              dtype: str = "float16", use_promote: bool = True):
    """Run the ops inside in mixed precision (eager mode; for a static program use
    `static.amp.decorate`). `level`: "O1" (white list in `dtype`) or "O2" (all but the black
    list); "O0" or enable=False: float32.

    Examples:
        >>> import keel as paddle
        >>> x, w = paddle.rand([2, 4]), paddle.rand([4, 3])
        >>> with paddle.amp.auto_cast():
        ...     y = paddle.matmul(x, w)                   # a white-list op: float16
        ...     z = paddle.nn.functional.softmax(y)       # a black-list op: float32
        >>> y.dtype, z.dtype
        (paddle.float16, paddle.float32)
        >>> with paddle.amp.auto_cast(enable=False):
        ...     print(paddle.matmul(x, w).dtype)
        paddle.float32
    """
    if level not in ("O0", "O1", "O2", "OD"):
        raise ValueError(f"auto_cast: level must be 'O0', 'O1', 'O2' or 'OD', got {level!r}")
    previous = dygraph.autocast_state
    if enable and level != "O0":
        lists = AutoMixedPrecisionLists(custom_white_list, custom_black_list, dtype=dtype)
        dygraph.autocast_state = _AutoCast(lists, "O1" if level == "OD" else level)
    else:
        dygraph.autocast_state = None
    try:
        yield
    finally:
        dygraph.autocast_state = previous


amp_guard = auto_cast


class GradScaler:
    """Loss scaling for eager mixed-precision training (paddle.amp.GradScaler): `scale(loss)`
    multiplies the loss; `step(optimizer)` unscales the gradients (check_finite_and_unscale)
    and steps only when they are finite; `update()` grows or shrinks the scale
    (update_loss_scaling); `minimize(optimizer, scaled_loss)` is step + update.

    Examples:
        >>> import keel as paddle
        >>> model = paddle.nn.Linear(4, 2)
        >>> opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters())
        >>> scaler = paddle.amp.GradScaler(init_loss_scaling=1024)
        >>> with paddle.amp.auto_cast():
        ...     loss = model(paddle.ones([3, 4])).mean()
        >>> scaled = scaler.scale(loss)             # loss * 1024
        >>> scaled.backward()
        >>> _ = scaler.minimize(opt, scaled)        # unscale, step if finite, update the scale
        >>> opt.clear_grad()
        >>> float(scaled) == float(loss) * 1024
        True
    """

    def __init__(self, enable: bool = True, init_loss_scaling: float = 65536.0, incr_ratio: float = 2.0,
                 decr_ratio: float = 0.5, incr_every_n_steps: int = 2000, decr_every_n_nan_or_inf: int = 1,
                 use_dynamic_loss_scaling: bool = True):
        self._enable = bool(enable)
        self._dynamic = bool(use_dynamic_loss_scaling)
        self._incr_ratio, self._decr_ratio = float(incr_ratio), float(decr_ratio)
        self._incr_every, self._decr_every = int(incr_every_n_steps), int(decr_every_n_nan_or_inf)
        self._scale = Tensor(np.array([init_loss_scaling], np.float32))
        self._good = Tensor(np.zeros([1], np.int32))
        self._bad = Tensor(np.zeros([1], np.int32))
        self._found_inf = Tensor(np.zeros([1], bool))
        self._unscaled = False

    def scale(self, var):
        """`var` times the loss scale (unchanged when the scaler is disabled)."""
        return var * float(self._scale.numpy()[0]) if self._enable else var

    def unscale_(self, optimizer) -> None:
        """Divide the gradients by the loss scale, and note whether any is Inf/NaN."""
        if not self._enable or self._unscaled:
            return
        params = [p for p in optimizer._eager_parameters("unscale_") if p.grad is not None]
        if params:
            helper = LayerHelper("check_finite_and_unscale")
            outs = [helper.create_tmp(p.grad.dtype) for p in params]
            found = helper.create_tmp("bool")
            with np.errstate(all="ignore"):  # Inf/NaN gradients are what this looks for
                helper.append_op("check_finite_and_unscale", {"X": [p.grad for p in params], "Scale": self._scale},
                                 {"Out": outs, "FoundInfinite": found})
            for p, g in zip(params, outs):
                p.grad = g
            self._found_inf = found
        self._unscaled = True

    def step(self, optimizer) -> None:
        """Unscale (unless done) and step the optimizer when the gradients are finite."""
        if not self._enable:
            optimizer.step()
            return
        self.unscale_(optimizer)
        if not bool(self._found_inf.numpy().any()):
            optimizer.step()

    def update(self) -> None:
        """Grow the scale after incr_every_n_steps finite steps, shrink it after
        decr_every_n_nan_or_inf bad ones (dynamic loss scaling)."""
        if self._enable and self._dynamic:
            helper = LayerHelper("update_loss_scaling")
            scale, good, bad = (helper.create_tmp(t.dtype) for t in (self._scale, self._good, self._bad))
            helper.append_op("update_loss_scaling",
                             {"X": [], "FoundInfinite": self._found_inf, "PrevLossScaling": self._scale,
                              "InGoodSteps": self._good, "InBadSteps": self._bad},
                             {"Out": [], "LossScaling": scale, "OutGoodSteps": good, "OutBadSteps": bad},
                             {"incr_every_n_steps": self._incr_every, "decr_every_n_nan_or_inf": self._decr_every,
                              "incr_ratio": self._incr_ratio, "decr_ratio": self._decr_ratio})
            self._scale, self._good, self._bad = scale, good, bad
        self._found_inf = Tensor(np.zeros([1], bool))
        self._unscaled = False

    def minimize(self, optimizer, *args, **kwargs):
        """step(optimizer) and update() (the scaled loss's backward has run already)."""
        self.step(optimizer)
        self.update()
        return None, []

    # -- PaddlePaddle's accessors ----------------------------------------------------------
    def is_enable(self) -> bool:
        return self._enable

    def is_use_dynamic_loss_scaling(self) -> bool:
        return self._dynamic

    def get_loss_scaling(self) -> float:
        return float(self._scale.numpy()[0])

    def state_dict(self) -> dict:
        return {"scale": self._scale.numpy().copy(), "incr_ratio": self._incr_ratio,
                "decr_ratio": self._decr_ratio, "incr_every_n_steps": self._incr_every,
                "decr_every_n_nan_or_inf": self._decr_every, "incr_count": int(self._good.numpy()[0]),
                "decr_count": int(self._bad.numpy()[0]), "use_dynamic_loss_scaling": self._dynamic}

    def load_state_dict(self, state: dict) -> None:
        self._scale = Tensor(np.asarray(state["scale"], np.float32).reshape([1]))
        self._good = Tensor(np.array([state.get("incr_count", 0)], np.int32))
        self._bad = Tensor(np.array([state.get("decr_count", 0)], np.int32))
        self._incr_ratio, self._decr_ratio = float(state["incr_ratio"]), float(state["decr_ratio"])
        self._incr_every = int(state["incr_every_n_steps"])
        self._decr_every = int(state["decr_every_n_nan_or_inf"])
        self._dynamic = bool(state["use_dynamic_loss_scaling"])
