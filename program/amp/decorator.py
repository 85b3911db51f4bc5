"""PaddlePaddle's static AMP decorator (python/paddle/static/amp/decorator.py):
`decorate(optimizer, ...)` returns an optimizer whose `minimize`

- rewrites the forward program for mixed precision (program/amp/rewrite.py);
- multiplies the (float32) loss by the persistable `loss_scaling_N` and differentiates that;
- unscales the gradients with `check_finite_and_unscale`, which also says whether any is
  Inf or NaN (`find_infinite_scale.tmp_N`);
- with dynamic loss scaling (float16), appends `update_loss_scaling`: on an overflow the
  gradients are zeroed and, after `decr_every_n_nan_or_inf` such steps, the scale shrinks by
  `decr_ratio`; after `incr_every_n_steps` finite steps it grows by `incr_ratio`;
- gives Adam/AdamW/Lamb the overflow flag as `SkipUpdate`, so an overflowing step leaves
  parameters and moments untouched (other optimizers step with the zeroed gradients, as in
  PaddlePaddle);
- under O2, updates float16/bfloat16 parameters through float32 master copies
  (`<param>_fp32_master_N`, `multi_precision`), with float32 accumulators.

Under O2 the parameters are float16 in the main program but the startup program makes them
float32: call `amp_init(place, scope=...)` after running the startup program, as with
PaddlePaddle, to convert them.
"""
from __future__ import annotations

import warnings

import numpy as np

from keel.program import default, dtypes, op_role, unique_name
from keel.program.amp.lists import AutoMixedPrecisionLists, check_amp_dtype
from keel.program.amp.rewrite import FP32, cast_model_to_fp16
from keel.program.errors import ProgramError
from keel.program.global_var import create_global_var

__all__ = ["decorate", "OptimizerWithMixedPrecision"]

_SKIP_UPDATE_OPS = ("adam", "adamw", "lamb")  # ops whose SkipUpdate takes the overflow flag


class OptimizerWithMixedPrecision:
    """The optimizer `decorate` returns (see the module's docstring)."""

    def __init__(self, optimizer, amp_lists, level, dtype, init_loss_scaling, use_dynamic_loss_scaling,
                 incr_every_n_steps, decr_every_n_nan_or_inf, incr_ratio, decr_ratio, use_amp_guard=None,
                 use_master_grad=False, use_promote=False):
        self._optimizer = optimizer
        self._amp_lists = amp_lists
        # Where each rank checks only its shard of the gradients (fleet's sharding): the
        # ring over which any rank's overflow makes every rank skip the step.
        self._found_inf_ring = None
        self._init_loss_scaling = float(init_loss_scaling)
        self._use_dynamic_loss_scaling = bool(use_dynamic_loss_scaling)
        if dtype == "bfloat16" and use_dynamic_loss_scaling:
            warnings.warn("Dynamic loss scaling for bfloat16 amp training is disabled, and the "
                          "init_loss_scaling is changed to 1.0 automatically (as PaddlePaddle does).")
            self._use_dynamic_loss_scaling = False
            self._init_loss_scaling = 1.0
        self._amp_dtype = dtype
        self._amp_vartype = dtypes.to_code(dtype)
        self._use_pure_fp16 = level == "O2"
        self._use_master_grad = bool(use_master_grad) and self._use_pure_fp16
        self._amp_level = level
        self._use_fp16_guard = use_amp_guard
        self._incr_every_n_steps = int(incr_every_n_steps)
        self._decr_every_n_nan_or_inf = int(decr_every_n_nan_or_inf)
        self._incr_ratio = float(incr_ratio)
        self._decr_ratio = float(decr_ratio)
        self.use_promote = use_promote
        self._loss_scaling = self._num_good_steps = self._num_bad_steps = None
        self._scaled_loss = None
        self._train_program = None
        self._to_fp16_var_names = None
        self._startup = None

    def get_loss_scaling(self):
        """The loss-scaling variable (after minimize)."""
        if self._loss_scaling is None:
            raise ProgramError("Please call minimize() before calling get_loss_scaling().")
        return self._loss_scaling

    def get_scaled_loss(self):
        return self._scaled_loss

    def _init_amp_var(self):
        def global_var(name, value, dtype):
            return create_global_var([1], value, dtype, True, name=unique_name.generate(name),
                                     main_program=self._train_program, startup_program=self._startup)
        self._loss_scaling = global_var("loss_scaling", self._init_loss_scaling, "float32")
        if self._use_dynamic_loss_scaling:
            self._num_good_steps = global_var("num_good_steps", 0, "int32")
            self._num_bad_steps = global_var("num_bad_steps", 0, "int32")

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, callbacks=None):
        """Rewrite the forward program, scale the loss, append the backward pass; return
        [(param, scaled grad)]."""
        self._train_program = loss.block.program
        self._startup = startup_program or default.default_startup_program()
        self._init_amp_var()
        level = "O2" if self._use_pure_fp16 else self._amp_level
        self._to_fp16_var_names = cast_model_to_fp16(
            self._train_program, self._amp_lists, bool(self._use_fp16_guard) if self._use_pure_fp16 else False,
            self._amp_vartype, level=level, use_promote=self.use_promote)
        block = loss.block
        if loss.dtype != FP32:
            loss = _append(block, "cast", {"X": [loss]}, f"{loss.name}.cast_fp32", list(loss.shape), FP32,
                           {"in_dtype": loss.dtype, "out_dtype": FP32})
        if self._use_dynamic_loss_scaling or self._init_loss_scaling != 1.0:
            shape = [1] if not loss.shape else list(loss.shape)
            self._scaled_loss = _append(block, "elementwise_mul", {"X": [loss], "Y": [self._loss_scaling]},
                                        unique_name.generate("tmp"), shape, FP32, {"axis": -1})
        else:
            self._scaled_loss = loss
        return self._optimizer.backward(self._scaled_loss, self._startup, parameter_list, no_grad_set)

    def amp_init(self, place=None, scope=None, test_program=None, use_fp16_test=False):
        """Convert the float32 values the startup program gave the O2 parameters to the
        low-precision type (PaddlePaddle's amp_init). Keel's bfloat16 values are uint16 bit
        patterns, rounded to nearest even."""
        if self._train_program is None:
            raise ProgramError("amp_init: call minimize() first")
        if not self._use_pure_fp16:
            return
        if scope is None:
            scope = default.global_scope()
        for param in self._train_program.global_block().all_parameters():
            if param.name not in self._to_fp16_var_names or not scope.has(param.name):
                continue
            value = scope.get(param.name)
            scope.set(param.name, _to_low_precision(value, self._amp_vartype))
        if test_program is not None and use_fp16_test:
            cast_model_to_fp16(test_program, self._amp_lists, bool(self._use_fp16_guard), self._amp_vartype,
                               level="O2", use_promote=self.use_promote)

    def restore_master_weights(self, scope=None):
        """Under O2, put each parameter's float32 master weight back under the parameter's
        name in `scope` (the training updates the masters; the parameters hold their
        low-precision copies), so that what is saved or exported afterwards is the trained
        float32 model. Under O1 the parameters are float32 already: nothing to do."""
        if scope is None:
            scope = default.global_scope()
        for name, master in self._optimizer._master_weights.items():
            scope.set(name, scope.get(master.name).copy())

    def _append_cast_to_master_grad_op(self, params_grads):
        if not self._use_master_grad:
            return params_grads
        block = self._train_program.global_block()
        out = []
        for param, grad in params_grads:
            if grad.dtype in (dtypes.to_code("float16"), dtypes.to_code("bfloat16")):
                master = block.create_var(unique_name.generate(grad.name + "_fp32_master"), list(grad.shape),
                                          FP32, stop_gradient=True)
                block.append_op("cast", {"X": [grad]}, {"Out": [master]},
                                {"in_dtype": grad.dtype, "out_dtype": FP32})
                out.append((param, master))
            else:
                out.append((param, grad))
        return out

    def apply_gradients(self, params_grads, startup_program=None):
        """Unscale and check the gradients, update the loss scale, then the parameters."""
        program = self._train_program
        startup = startup_program or self._startup
        with op_role.role_guard(program, op_role.OPTIMIZE):
            params_grads = self._append_cast_to_master_grad_op(params_grads)
            if not self._use_dynamic_loss_scaling and self._init_loss_scaling == 1.0:
                return self._apply_inner(params_grads, startup, None)
            found_inf = self._check_finite_and_unscale(params_grads)
            if self._found_inf_ring is not None:
                found_inf = self._found_on_any_rank(found_inf)
            if self._use_dynamic_loss_scaling and self._amp_dtype == "float16":
                self._add_dynamic_loss_scaling(params_grads, found_inf)
            return self._apply_inner(params_grads, startup, found_inf)

    def _apply_inner(self, params_grads, startup, found_inf):
        opt = self._optimizer
        saved = opt._multi_precision
        opt._multi_precision = self._use_pure_fp16 or saved
        try:
            ops = opt.apply_gradients(params_grads, startup)
        finally:
            opt._multi_precision = saved
        if found_inf is not None:
            for op in ops:
                if op.type in _SKIP_UPDATE_OPS:
                    op.set_input("SkipUpdate", [found_inf])
        return ops

    def _split_grads(self, params_grads):
        grads = [g for _, g in params_grads]
        fp32 = [g for g in grads if g.dtype == FP32]
        low = [g for g in grads if g.dtype == self._amp_vartype]
        if len(fp32) + len(low) != len(grads):
            raise ProgramError("Data types of all grads must be either fp16/bf16 or fp32.")
        return grads, fp32, low

    def _check(self, grads, name):
        block = self._train_program.global_block()
        found = block.create_var(unique_name.generate(name + ".tmp"), [1], "bool", stop_gradient=True)
        block.append_op("check_finite_and_unscale", {"X": grads, "Scale": [self._loss_scaling]},
                        {"Out": grads, "FoundInfinite": [found]})
        return found

    def _check_finite_and_unscale(self, params_grads):
        grads, fp32, low = self._split_grads(params_grads)
        if not self._use_pure_fp16:
            return self._check(grads, "find_infinite_scale")
        found = []
        if fp32:
            found.append(self._check(fp32, "find_infinite_scale_fp32"))
        if low:
            found.append(self._check(low, "find_infinite_scale_fp16"))
        if len(found) == 1:
            return found[0]
        block = self._train_program.global_block()
        both = _append(block, "concat", {"X": found}, unique_name.generate("concat.tmp"), [len(found)], "bool",
                       {"axis": 0})
        return _append(block, "reduce_any", {"X": [both]}, unique_name.generate("reduce_any.tmp"), [], "bool",
                       {"dim": [], "keep_dim": False, "reduce_all": True})

    def _found_on_any_rank(self, found_inf):
        """found_inf of every rank or-ed together (as int32: MPI has no max over bools), so
        all ranks skip the same steps and keep the same loss scale (PaddlePaddle's sharding
        does the same)."""
        block = self._train_program.global_block()
        shape = list(found_inf.shape)
        as_int = _append(block, "cast", {"X": [found_inf]}, unique_name.generate("found_inf_int"), shape, "int32",
                         {"in_dtype": found_inf.dtype, "out_dtype": dtypes.to_code("int32")})
        block.append_op("c_allreduce_max", {"X": [as_int]}, {"Out": [as_int]},
                        {"ring_id": self._found_inf_ring, "use_calc_stream": True})
        return _append(block, "cast", {"X": [as_int]}, unique_name.generate("found_inf_any"), shape, "bool",
                       {"in_dtype": as_int.dtype, "out_dtype": dtypes.to_code("bool")})

    def _update_loss_scaling(self, grads, found_inf, stop_update):
        self._train_program.global_block().append_op(
            "update_loss_scaling",
            {"X": grads, "FoundInfinite": [found_inf], "PrevLossScaling": [self._loss_scaling],
             "InGoodSteps": [self._num_good_steps], "InBadSteps": [self._num_bad_steps]},
            {"Out": grads, "LossScaling": [self._loss_scaling], "OutGoodSteps": [self._num_good_steps],
             "OutBadSteps": [self._num_bad_steps]},
            {"incr_every_n_steps": self._incr_every_n_steps,
             "decr_every_n_nan_or_inf": self._decr_every_n_nan_or_inf,
             "incr_ratio": self._incr_ratio, "decr_ratio": self._decr_ratio, "stop_update": stop_update})

    def _add_dynamic_loss_scaling(self, params_grads, found_inf):
        grads, fp32, low = self._split_grads(params_grads)
        if not self._use_pure_fp16:
            self._update_loss_scaling(grads, found_inf, False)
            return
        stop_update = False
        for group in (fp32, low):  # the scale is updated once: by the first group
            if group:
                self._update_loss_scaling(group, found_inf, stop_update)
                stop_update = True

    def apply_optimize(self, loss, startup_program, params_grads):
        return self.apply_gradients(params_grads, startup_program)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """backward + apply_gradients. Returns (update ops, [(param, scaled grad)])."""
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        return self.apply_optimize(loss, startup_program, params_grads), params_grads


def _append(block, op_type, inputs, out_name, shape, dtype, attrs):
    out = block.create_var(out_name, shape, dtype)
    block.append_op(op_type, inputs, {"Out": [out]}, attrs)
    return out


def _to_low_precision(value, code):
    """A float32 host array as float16, or as bfloat16 bit patterns rounded to nearest even
    (the cast kernel's rounding; program/ may not import kernels/). Values already
    converted are returned as they are."""
    array = np.asarray(value)
    if code != dtypes.to_code("bfloat16"):
        return array.astype(dtypes.to_numpy(code))
    if array.dtype == np.uint16:
        return array
    u = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
    bits = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    return np.where(np.isnan(array), np.uint16(0x7FC0), bits)


def decorate(optimizer, amp_lists=None, level="O1", dtype="float16", master_weight=None, master_grad=False,
             init_loss_scaling=2 ** 16, incr_every_n_steps=2000, decr_every_n_nan_or_inf=1, incr_ratio=2.0,
             decr_ratio=0.5, use_dynamic_loss_scaling=None, use_amp_guard=False, use_promote=False):
    """PaddlePaddle 3.3.1's `paddle.static.amp.decorate` (its defaults). `level`: "O1" (white
    ops in low precision, black in float32, gray following their inputs), "O2" (everything in
    low precision but the kept-float32 ops, parameters too, with float32 master weights
    unless master_weight=False), "OD" (white ops only). `use_dynamic_loss_scaling` defaults
    to True for float16 and False for bfloat16."""
    level = level.upper()
    if level not in ("O0", "OD", "O1", "O2"):
        raise ValueError("level should be O0, OD, O1 or O2.")
    amp_dtype = check_amp_dtype(dtype)
    if amp_lists is None or level == "OD":
        amp_lists = AutoMixedPrecisionLists(dtype=amp_dtype)
    if level == "OD":
        amp_lists.black_list = amp_lists.all_list - amp_lists.white_list
    if use_dynamic_loss_scaling is None:
        use_dynamic_loss_scaling = amp_dtype == "float16"
    if optimizer is not None:
        optimizer._multi_precision = master_weight is not False and level == "O2"
    return OptimizerWithMixedPrecision(
        optimizer, amp_lists, level=level, dtype=amp_dtype, init_loss_scaling=init_loss_scaling,
        use_dynamic_loss_scaling=use_dynamic_loss_scaling, incr_every_n_steps=incr_every_n_steps,
        decr_every_n_nan_or_inf=decr_every_n_nan_or_inf, incr_ratio=incr_ratio, decr_ratio=decr_ratio,
        use_amp_guard=use_amp_guard, use_promote=use_promote, use_master_grad=master_grad)
