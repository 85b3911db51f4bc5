"""Optimizers (PaddlePaddle's `paddle.optimizer`), appended to the program as ops.

    opt = pg.optimizer.Adam(learning_rate=1e-3, weight_decay=1e-4,
                            grad_clip=pg.nn.ClipGradByGlobalNorm(1.0))
    opt.minimize(loss)   # backward ops, clipping, regularization, then one update op per parameter

What `minimize` appends reads like PaddlePaddle's training programs: the learning rate is
a persistable 0-d variable `learning_rate_N` set by a `fill_constant` in the startup
program (and rewritten before each run by the executor when it follows a schedule, see
program/lr.py); accumulators (`<param>_moment1_0`, `<param>_velocity_0`,
`<param>_beta1_pow_acc_0`, ...) are persistable variables initialized in the startup
program; update ops are in place (`ParamOut` = `Param`), one per parameter in sorted
name order, with `op_role = 2` and `op_role_var = [param, grad]`.
"""
from __future__ import annotations

import numpy as np

from keel.program import callsite, default, dtypes, dygraph, op_role, unique_name
from keel.program import lr  # noqa: F401  (paddle.optimizer.lr.StepDecay, ... as PaddlePaddle spells them)
from keel.program.backward import append_backward
from keel.program.errors import ProgramError
from keel.program.ops.registry import grad_name
from keel.program.gradient_clip import ClipGradBase
from keel.program.lr import LRScheduler
from keel.program import lr  # noqa: F401,E402  (paddle.optimizer.lr: the schedules' module)
from keel.program.regularizer import append_regularization, as_regularizer
from keel.program.tensor import Tensor

_LOW_PRECISION = (dtypes.to_code("float16"), dtypes.to_code("bfloat16"))

__all__ = ["Optimizer", "SGD", "Momentum", "Adam", "AdamW", "Lamb", "RMSProp", "Adagrad"]


class Optimizer:
    """Base class. `learning_rate`: a float or an LRScheduler. `weight_decay`: a float
    (L2) or an L1Decay/L2Decay. `grad_clip`: a ClipGradBy* object. `parameters`: the
    parameters to train (default: every trainable parameter the loss depends on).

    Examples:
        >>> import keel as paddle
        >>> linear = paddle.nn.Linear(10, 10)
        >>> opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=linear.parameters())
        >>> for _ in range(3):                         # the eager training step every optimizer shares
        ...     loss = paddle.mean(linear(paddle.rand([4, 10])))
        ...     loss.backward()
        ...     opt.step()
        ...     opt.clear_grad()
        >>> opt.get_lr()
        0.1
        >>> opt.set_lr(0.01)
        >>> opt.get_lr()
        0.01
    """

    _op_type = ""
    # Set by program.amp.decorate (PaddlePaddle's `_set_multi_precision`): a float16/bfloat16
    # parameter is updated through a float32 master copy, with float32 accumulators.
    _multi_precision = False

    def __init__(self, learning_rate=0.001, parameters=None, weight_decay=None, grad_clip=None,
                 name=None):
        if not isinstance(learning_rate, (int, float, LRScheduler)):
            raise TypeError(f"learning_rate must be a float or an LRScheduler, got {learning_rate!r}")
        if grad_clip is not None and not isinstance(grad_clip, ClipGradBase):
            raise TypeError(f"grad_clip must be a ClipGradByValue/ByNorm/ByGlobalNorm, got {grad_clip!r}")
        self._learning_rate = learning_rate
        self._parameter_list = list(parameters) if parameters is not None else None
        self.regularization = self._regularizer(weight_decay)
        self._grad_clip = grad_clip
        self._name = name
        self._lr_vars: dict[int, tuple] = {}  # id(program) -> (program, its learning-rate variable)
        self._accumulators: dict[tuple, object] = {}  # (accumulator name, param name) -> var
        self._master_weights: dict[str, object] = {}  # param name -> its float32 master copy
        self._loaded_state: dict = {}  # set_state_dict's eager state not yet taken by a step

    def _regularizer(self, weight_decay):
        return as_regularizer(weight_decay)

    # -- learning rate -----------------------------------------------------------------
    def get_lr(self) -> float:
        lr = self._learning_rate
        return lr() if isinstance(lr, LRScheduler) else float(lr)

    def set_lr(self, value: float) -> None:
        """Set a constant learning rate. It takes effect at the next run of the program: the
        executor writes the optimizer's current rate into the LR variable before each run."""
        if isinstance(self._learning_rate, LRScheduler):
            raise RuntimeError("this optimizer follows an LRScheduler; call scheduler.step() instead")
        self._learning_rate = float(value)
        for program, var in self._lr_vars.values():
            program.lr_schedules[var.name] = self.get_lr

    def _lr_var(self, program, startup):
        if id(program) in self._lr_vars:
            return self._lr_vars[id(program)][1]
        name = unique_name.generate("learning_rate")
        var = program.global_block().create_var(name, [], "float32", persistable=True, stop_gradient=True)
        svar = startup.global_block().create_var(name, [], "float32", persistable=True, stop_gradient=True)
        value = self.get_lr()
        startup.global_block().append_op("fill_constant", outputs={"Out": [svar]},
                                         attrs={"shape": [], "dtype": svar.dtype, "value": value,
                                                "str_value": repr(float(value))})
        if isinstance(self._learning_rate, LRScheduler):
            program.lr_schedules[name] = self._learning_rate
        self._lr_vars[id(program)] = (program, var)
        return var

    def _param_lr(self, param, block, lr):
        """The learning rate of one parameter: the global one times its ParamAttr's scale."""
        scale = float(getattr(param, "optimize_attr", {}).get("learning_rate", 1.0))
        if scale == 1.0:
            return lr
        out = block.create_var(unique_name.generate(f"{param.name}_lr"), [], "float32")
        block.append_op("scale", {"X": [lr]}, {"Out": [out]}, {"scale": scale, "bias": 0.0})
        return out

    # -- accumulators ------------------------------------------------------------------
    def _add_accumulator(self, name, param, startup, *, fill_value=0.0, shape=None, dtype=None):
        """A persistable `<param>_<name>_N` initialized to `fill_value` in the startup program."""
        key = (name, param.name)
        if key in self._accumulators:
            return self._accumulators[key]
        owner = self._master_weights.get(param.name, param)  # PaddlePaddle names them after the master
        var_name = unique_name.generate(f"{owner.name}_{name}")
        shape = list(param.shape) if shape is None else list(shape)
        dtype = owner.dtype if dtype is None else dtype
        var = param.block.create_var(var_name, shape, dtype, persistable=True, stop_gradient=True)
        sblock = startup.global_block()
        svar = sblock.create_var(var_name, shape, dtype, persistable=True, stop_gradient=True)
        sblock.append_op("fill_constant", outputs={"Out": [svar]},
                         attrs={"shape": shape, "dtype": dtype, "value": float(fill_value),
                                "str_value": repr(float(fill_value))})
        self._accumulators[key] = var
        return var

    def _create_master_weight(self, param, startup):
        """A persistable float32 `<param>_fp32_master_N`, set from the parameter by a cast in
        the startup program (PaddlePaddle's names and ops)."""
        if param.name not in self._master_weights:
            name = unique_name.generate(param.name + "_fp32_master")
            var = param.block.create_var(name, list(param.shape), "float32", persistable=True, stop_gradient=True)
            sblock = startup.global_block()
            svar = sblock.create_var(name, list(param.shape), "float32", persistable=True, stop_gradient=True)
            sparam = sblock.find_var(param.name) or param
            sblock.append_op("cast", {"X": [sparam]}, {"Out": [svar]},
                             {"in_dtype": param.dtype, "out_dtype": svar.dtype})
            self._master_weights[param.name] = var
        return self._master_weights[param.name]

    def _use_master_weight(self, op, param) -> None:
        """Make update op `op` keep `param` in its float32 master copy (multi_precision)."""
        master = self._master_weights[param.name]
        if "MasterParam" not in op.opdef.input_slots:
            raise ProgramError(f"{type(self).__name__}: {op.type} has no MasterParam, so float16/bfloat16 "
                               f"parameter {param.name} cannot be updated through a float32 master copy")
        op.set_input("MasterParam", [master])
        op.set_output("MasterParamOut", [master])
        op.set_attr("multi_precision", True)

    def _create_accumulators(self, param, startup):
        """Create the accumulators of one parameter (moments, velocity, beta powers)."""

    def _append_update(self, block, param, grad, lr):
        """Append the update op of one parameter."""
        raise NotImplementedError

    # -- the public steps ----------------------------------------------------------------
    def backward(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        """Append the gradient ops; return [(param, grad)]."""
        _refuse_second_backward(loss)
        params = parameters if parameters is not None else self._parameter_list
        return append_backward(loss, parameter_list=params, no_grad_set=no_grad_set)

    def apply_gradients(self, params_grads, startup_program=None):
        """Append clipping, regularization and the update ops; return the update ops."""
        block, program, startup = update_context(params_grads, startup_program)
        params_grads = sorted(params_grads, key=lambda pg: pg[0].name)
        with op_role.role_guard(program, op_role.OPTIMIZE):
            if self._grad_clip is not None:
                params_grads = self._grad_clip(params_grads, block)
            params_grads = append_regularization(params_grads, self.regularization, block)
            lr = self._lr_var(program, startup)
            ops = []
            for param, grad in params_grads:
                if grad is None:
                    continue
                master = self._multi_precision and dtypes.to_code(param.dtype) in _LOW_PRECISION
                if master:
                    self._create_master_weight(param, startup)
                self._create_accumulators(param, startup)
                op = self._append_update(block, param, grad, self._param_lr(param, block, lr))
                if master:
                    self._use_master_weight(op, param)
                op.set_attr("op_role_var", [param.name, grad.name])
                ops.append(op)
        return ops

    # -- eager mode --------------------------------------------------------------------
    def _eager_parameters(self, api: str) -> list:
        if not dygraph.in_dynamic_mode():
            raise RuntimeError(f"optimizer.{api}() updates eager parameters; in a static program call "
                               "minimize(loss) and run the program")
        if self._parameter_list is None:
            raise ValueError(f"optimizer.{api}(): give the optimizer its parameters "
                             "(parameters=model.parameters()), as PaddlePaddle's dygraph mode requires")
        return self._parameter_list

    def step(self) -> None:
        """Update every parameter that has a gradient (eager mode), through this optimizer's
        update ops: clipping, weight decay, the learning rate (and its scheduler) as in a
        static program (keel/executor/eager_update.py)."""
        params = [p for p in self._eager_parameters("step") if not p.stop_gradient and p.grad is not None]
        if params:
            dygraph.engine().optimizer_step(self, params)

    def clear_grad(self, set_to_zero: bool = True) -> None:
        """Reset the parameters' gradients (to zeros, or to None with set_to_zero=False)."""
        for p in self._eager_parameters("clear_grad"):
            p.clear_gradient(set_to_zero)

    clear_gradients = clear_grad

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        """backward + apply_gradients. Returns (update ops, [(param, grad)]). In eager mode:
        loss.backward() and step()."""
        if dygraph.in_dynamic_mode() and isinstance(loss, Tensor):
            loss.backward()
            self.step()
            return None, [(p, p.grad) for p in self._parameter_list or () if p.grad is not None]
        params_grads = self.backward(loss, startup_program, parameters, no_grad_set)
        ops = self.apply_gradients(params_grads, startup_program)
        return ops, params_grads

    def state_dict(self) -> dict:
        """The optimizer's state: in eager mode its accumulators (moments, velocities, ...)
        as Tensors by their variable names and the float32 master weights under
        "master_weights", as PaddlePaddle's; the LR schedule under "LR_Scheduler". In a
        static program the accumulators live in the scope (static.save writes them)."""
        state = {}
        if dygraph._engine is not None:
            for name, value in dygraph.engine().optimizer_state(self).items():
                state[name] = ({param: Tensor(v) for param, v in value.items()} if name == "master_weights"
                               else Tensor(value, name=name))
        lr = self._learning_rate
        if isinstance(lr, LRScheduler):
            state["LR_Scheduler"] = lr.state_dict()
        return state

    def set_state_dict(self, state: dict) -> None:
        """Take a state_dict: the LR schedule at once; the accumulators and master weights by
        name, now where they exist, otherwise at the step that creates them (so a fresh
        optimizer resumes where the saved one stopped)."""
        if "LR_Scheduler" in state and isinstance(self._learning_rate, LRScheduler):
            self._learning_rate.set_state_dict(state["LR_Scheduler"])
        for name, value in state.items():
            if name == "master_weights":
                self._loaded_state.setdefault(name, {}).update({p: _host_array(v) for p, v in value.items()})
            elif name != "LR_Scheduler":
                self._loaded_state[name] = _host_array(value)
        if self._loaded_state and dygraph._engine is not None:
            dygraph.engine().load_optimizer_state(self, self._loaded_state)


def _host_array(value):
    """The array of a state_dict entry (a Tensor's own value, else a numpy array)."""
    return value.value if isinstance(value, Tensor) else np.asarray(value)


def update_context(params_grads, startup_program):
    """(block, program, startup program) the update ops of `params_grads` go to: the
    program's current block, as PaddlePaddle's (a conditional block when an update is
    conditional, GradientMergeOptimizer's)."""
    if not params_grads:
        raise ValueError("no parameter receives a gradient from the loss: nothing to optimize")
    program = params_grads[0][0].block.program
    return program.current_block(), program, startup_program or default.default_startup_program()


def _refuse_second_backward(loss) -> None:
    """A loss is minimized once. PaddlePaddle appends a second backward pass and a second set
    of updates when `minimize` is called again on the same loss (every parameter is then
    updated twice per step, the second pass reading parameters the first already moved);
    that is never what the user meant, so it is an error here. Found from the program
    itself (the op that seeds loss@GRAD), so it also holds for clones and loaded programs."""
    seed_role = op_role.BACKWARD | op_role.LOSS
    target = grad_name(loss.name)
    for op in loss.block.ops:
        if op.attr("op_role") == seed_role and target in op.output_arg_names:
            here = callsite.describe(callsite.user_frame_lines()) or "this call"
            raise ProgramError(
                f"minimize: loss {loss.name} was already minimized in this program, at "
                f"{op.callsite or 'an earlier call'}; the call at {here} would append a second backward "
                f"pass and update every parameter twice per step. Call minimize once per loss: train "
                f"parameter groups at different rates with ParamAttr(learning_rate=...), or choose them "
                f"with minimize(loss, parameters=[...]) in that one call.")


class SGD(Optimizer):
    """param -= lr * grad.

    Examples:
        >>> import numpy as np
        >>> import keel.program as pg
        >>> from keel.executor import Executor
        >>> main, startup = pg.Program(), pg.Program()
        >>> with pg.program_guard(main, startup):
        ...     x = pg.data("x", [-1, 4])
        ...     loss = pg.mean(pg.square(pg.nn.fc(x, 1) - 3.0))
        ...     _ = pg.optimizer.SGD(learning_rate=0.01).minimize(loss)
        >>> exe = Executor()
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.ones((8, 4), "float32")}
        >>> losses = [float(exe.run(main, feed=feed, fetch_list=[loss])[0]) for _ in range(20)]
        >>> losses[-1] < losses[0]
        True

        Eagerly, on a layer's parameters:

        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)
        >>> opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=linear.parameters())
        >>> loss = paddle.mean(linear(paddle.to_tensor([[1.0, 2.0]])))
        >>> loss.backward()
        >>> opt.step()
        >>> opt.clear_grad()
        >>> print(linear.weight.numpy().ravel().round(4))      # 0.5 - 0.1 * [1, 2]
        [0.4 0.3]
    """

    def _append_update(self, block, param, grad, lr):
        return block.append_op("sgd", {"Param": [param], "Grad": [grad], "LearningRate": [lr]},
                               {"ParamOut": [param]}, {"multi_precision": False})


class Momentum(Optimizer):
    """velocity = momentum * velocity + grad; param -= lr * velocity (Nesterov:
    param -= lr * (grad + momentum * velocity)).

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)     # w = [[0.5], [0.5]], b = [0]
        >>> x = paddle.to_tensor([[1.0, 2.0]])                     # d mean(linear(x)) / dw = [1, 2]
        >>> opt = paddle.optimizer.Momentum(learning_rate=0.1, momentum=0.9, parameters=linear.parameters())
        >>> for _ in range(2):
        ...     loss = paddle.mean(linear(x))
        ...     loss.backward()
        ...     opt.step()
        ...     opt.clear_grad()
        >>> print(linear.weight.numpy().ravel().round(4))      # velocity g, then 1.9 g
        [ 0.21 -0.08]
    """

    def __init__(self, learning_rate=0.001, momentum=0.9, parameters=None, use_nesterov=False,
                 weight_decay=None, grad_clip=None, rescale_grad=1.0, name=None):
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
        self._momentum, self._use_nesterov, self._rescale_grad = float(momentum), bool(use_nesterov), float(rescale_grad)

    def _create_accumulators(self, param, startup):
        self._add_accumulator("velocity", param, startup)

    def _append_update(self, block, param, grad, lr):
        velocity = self._accumulators[("velocity", param.name)]
        return block.append_op(
            "momentum",
            {"Param": [param], "Grad": [grad], "Velocity": [velocity], "LearningRate": [lr]},
            {"ParamOut": [param], "VelocityOut": [velocity]},
            {"mu": self._momentum, "use_nesterov": self._use_nesterov, "regularization_method": "",
             "regularization_coeff": 0.0, "multi_precision": False, "rescale_grad": self._rescale_grad})


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction through the beta-power accumulators.

    Examples:
        >>> import numpy as np
        >>> import keel.program as pg
        >>> from keel.executor import Executor
        >>> main, startup = pg.Program(), pg.Program()
        >>> with pg.program_guard(main, startup):
        ...     x = pg.data("x", [-1, 4])
        ...     loss = pg.mean(pg.square(pg.nn.fc(x, 1) - 3.0))
        ...     schedule = pg.lr.CosineDecay(0.01, T_max=20)   # the LR is a variable of the program
        ...     opt = pg.optimizer.Adam(learning_rate=schedule, grad_clip=pg.nn.ClipGradByGlobalNorm(1.0))
        ...     _ = opt.minimize(loss)
        >>> exe = Executor()
        >>> _ = exe.run(startup)
        >>> losses = []
        >>> for step in range(20):
        ...     losses += exe.run(main, feed={"x": np.ones((8, 4), "float32")}, fetch_list=[loss])
        ...     schedule.step()
        >>> bool(losses[-1] < losses[0])
        True

        Eagerly, on a layer's parameters:

        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)
        >>> opt = paddle.optimizer.Adam(learning_rate=0.1, parameters=linear.parameters())
        >>> loss = paddle.mean(linear(paddle.to_tensor([[1.0, 2.0]])))
        >>> loss.backward()
        >>> opt.step()
        >>> opt.clear_grad()
        >>> print(linear.weight.numpy().ravel().round(4))      # Adam's first step is lr * sign(grad)
        [0.4 0.4]
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, parameters=None,
                 weight_decay=None, grad_clip=None, lazy_mode=False, amsgrad=False, name=None):
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
        self._beta1, self._beta2, self._epsilon = float(beta1), float(beta2), float(epsilon)
        self._lazy_mode, self._amsgrad = bool(lazy_mode), bool(amsgrad)

    def _create_accumulators(self, param, startup):
        self._add_accumulator("moment1", param, startup)
        self._add_accumulator("moment2", param, startup)
        if self._amsgrad:
            self._add_accumulator("moment2_max", param, startup)
        self._add_accumulator("beta1_pow_acc", param, startup, fill_value=self._beta1, shape=[1])
        self._add_accumulator("beta2_pow_acc", param, startup, fill_value=self._beta2, shape=[1])

    def _adam_slots(self, param, grad, lr):
        acc = lambda n: [self._accumulators[(n, param.name)]]  # noqa: E731
        inputs = {"Param": [param], "Grad": [grad], "LearningRate": [lr], "Moment1": acc("moment1"),
                  "Moment2": acc("moment2"), "Beta1Pow": acc("beta1_pow_acc"), "Beta2Pow": acc("beta2_pow_acc")}
        outputs = {"ParamOut": [param], "Moment1Out": acc("moment1"), "Moment2Out": acc("moment2"),
                   "Beta1PowOut": acc("beta1_pow_acc"), "Beta2PowOut": acc("beta2_pow_acc")}
        if self._amsgrad:
            inputs["Moment2Max"] = outputs["Moment2MaxOut"] = acc("moment2_max")
        attrs = {"beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon,
                 "lazy_mode": self._lazy_mode, "min_row_size_to_use_multithread": 1000,
                 "multi_precision": False, "use_global_beta_pow": False, "amsgrad": self._amsgrad}
        return inputs, outputs, attrs

    def _append_update(self, block, param, grad, lr):
        return block.append_op("adam", *self._adam_slots(param, grad, lr))


class AdamW(Adam):
    """Adam with decoupled weight decay: param *= 1 - lr * coeff before the Adam step.
    `weight_decay` is that coeff (default 0.01), not an L2 term added to the gradient;
    `apply_decay_param_fun(name) -> bool` picks the parameters that decay.

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)     # w = [[0.5], [0.5]], b = [0]
        >>> x = paddle.to_tensor([[1.0, 2.0]])                     # d mean(linear(x)) / dw = [1, 2]
        >>> opt = paddle.optimizer.AdamW(learning_rate=0.1, weight_decay=0.01, parameters=linear.parameters())
        >>> loss = paddle.mean(linear(x))
        >>> loss.backward()
        >>> opt.step()
        >>> opt.clear_grad()
        >>> print(linear.weight.numpy().ravel().round(4))      # 0.5 * (1 - 0.1 * 0.01) - 0.1
        [0.3995 0.3995]
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, parameters=None,
                 weight_decay=0.01, lr_ratio=None, apply_decay_param_fun=None, grad_clip=None,
                 lazy_mode=False, amsgrad=False, name=None):
        if not isinstance(weight_decay, (int, float)):
            raise TypeError(f"AdamW: weight_decay is the decoupled decay coefficient (a float), got {weight_decay!r}")
        self._coeff = float(weight_decay)
        self._apply_decay = apply_decay_param_fun
        self._lr_ratio = lr_ratio
        super().__init__(learning_rate, beta1, beta2, epsilon, parameters, None, grad_clip,
                         lazy_mode, amsgrad, name)

    def _append_update(self, block, param, grad, lr):
        inputs, outputs, attrs = self._adam_slots(param, grad, lr)
        decays = self._apply_decay is None or bool(self._apply_decay(param.name))
        ratio = float(self._lr_ratio(param)) if self._lr_ratio is not None else 1.0
        attrs.update({"coeff": self._coeff, "with_decay": decays, "lr_ratio": ratio})
        return block.append_op("adamw", inputs, outputs, attrs)


class Lamb(Optimizer):
    """LAMB: Adam's update scaled per parameter by the trust ratio ||param|| / ||update||,
    with decoupled weight decay `lamb_weight_decay`.

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)     # w = [[0.5], [0.5]], b = [0]
        >>> x = paddle.to_tensor([[1.0, 2.0]])                     # d mean(linear(x)) / dw = [1, 2]
        >>> opt = paddle.optimizer.Lamb(learning_rate=0.1, lamb_weight_decay=0.01, parameters=linear.parameters())
        >>> loss = paddle.mean(linear(x))
        >>> loss.backward()
        >>> opt.step()
        >>> opt.clear_grad()
        >>> print(linear.weight.numpy().ravel().round(4))      # the step scaled by ||w|| / ||update||
        [0.45 0.45]
    """

    def __init__(self, learning_rate=0.001, lamb_weight_decay=0.01, beta1=0.9, beta2=0.999,
                 epsilon=1e-6, parameters=None, grad_clip=None, exclude_from_weight_decay_fn=None,
                 always_adapt=False, name=None):
        super().__init__(learning_rate, parameters, None, grad_clip, name)
        self._wd, self._beta1, self._beta2 = float(lamb_weight_decay), float(beta1), float(beta2)
        self._epsilon, self._exclude, self._always_adapt = float(epsilon), exclude_from_weight_decay_fn, bool(always_adapt)

    def _create_accumulators(self, param, startup):
        self._add_accumulator("moment1", param, startup)
        self._add_accumulator("moment2", param, startup)
        self._add_accumulator("beta1_pow_acc", param, startup, fill_value=self._beta1, shape=[1])
        self._add_accumulator("beta2_pow_acc", param, startup, fill_value=self._beta2, shape=[1])

    def _append_update(self, block, param, grad, lr):
        acc = lambda n: [self._accumulators[(n, param.name)]]  # noqa: E731
        wd = 0.0 if self._exclude is not None and self._exclude(param) else self._wd
        return block.append_op(
            "lamb",
            {"Param": [param], "Grad": [grad], "LearningRate": [lr], "Moment1": acc("moment1"),
             "Moment2": acc("moment2"), "Beta1Pow": acc("beta1_pow_acc"), "Beta2Pow": acc("beta2_pow_acc")},
            {"ParamOut": [param], "Moment1Out": acc("moment1"), "Moment2Out": acc("moment2"),
             "Beta1PowOut": acc("beta1_pow_acc"), "Beta2PowOut": acc("beta2_pow_acc")},
            {"weight_decay": wd, "beta1": self._beta1, "beta2": self._beta2, "epsilon": self._epsilon,
             "always_adapt": self._always_adapt, "multi_precision": False})


class RMSProp(Optimizer):
    """RMSProp with optional momentum and centering.

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)     # w = [[0.5], [0.5]], b = [0]
        >>> x = paddle.to_tensor([[1.0, 2.0]])                     # d mean(linear(x)) / dw = [1, 2]
        >>> opt = paddle.optimizer.RMSProp(learning_rate=0.1, rho=0.95, parameters=linear.parameters())
        >>> loss = paddle.mean(linear(x))
        >>> loss.backward()
        >>> opt.step()
        >>> opt.clear_grad()
        >>> print(linear.weight.numpy().ravel().round(4))      # 0.5 - 0.1 * g / sqrt(0.05 * g * g)
        [0.0528 0.0528]
    """

    def __init__(self, learning_rate, rho=0.95, epsilon=1e-6, momentum=0.0, centered=False,
                 parameters=None, weight_decay=None, grad_clip=None, name=None):
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
        self._rho, self._epsilon, self._momentum, self._centered = float(rho), float(epsilon), float(momentum), bool(centered)

    def _create_accumulators(self, param, startup):
        for name in ("momentum", "mean_square", "mean_grad"):
            self._add_accumulator(name, param, startup)

    def _append_update(self, block, param, grad, lr):
        acc = lambda n: [self._accumulators[(n, param.name)]]  # noqa: E731
        return block.append_op(
            "rmsprop",
            {"Param": [param], "Grad": [grad], "LearningRate": [lr], "Moment": acc("momentum"),
             "MeanSquare": acc("mean_square"), "MeanGrad": acc("mean_grad")},
            {"ParamOut": [param], "MomentOut": acc("momentum"), "MeanSquareOut": acc("mean_square"),
             "MeanGradOut": acc("mean_grad")},
            {"epsilon": self._epsilon, "decay": self._rho, "momentum": self._momentum,
             "centered": self._centered, "multi_precision": False})


class Adagrad(Optimizer):
    """Adagrad: moment += grad^2; param -= lr * grad / (sqrt(moment) + epsilon).

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)     # w = [[0.5], [0.5]], b = [0]
        >>> x = paddle.to_tensor([[1.0, 2.0]])                     # d mean(linear(x)) / dw = [1, 2]
        >>> opt = paddle.optimizer.Adagrad(learning_rate=0.1, parameters=linear.parameters())
        >>> loss = paddle.mean(linear(x))
        >>> loss.backward()
        >>> opt.step()
        >>> opt.clear_grad()
        >>> print(linear.weight.numpy().ravel().round(4))      # 0.5 - 0.1 * g / sqrt(g * g)
        [0.4 0.4]
    """

    def __init__(self, learning_rate, epsilon=1e-6, parameters=None, weight_decay=None, grad_clip=None,
                 initial_accumulator_value=0.0, name=None):
        super().__init__(learning_rate, parameters, weight_decay, grad_clip, name)
        self._epsilon, self._initial = float(epsilon), float(initial_accumulator_value)

    def _create_accumulators(self, param, startup):
        self._add_accumulator("moment", param, startup, fill_value=self._initial)

    def _append_update(self, block, param, grad, lr):
        moment = [self._accumulators[("moment", param.name)]]
        return block.append_op("adagrad", {"Param": [param], "Grad": [grad], "LearningRate": [lr],
                                           "Moment": moment},
                               {"ParamOut": [param], "MomentOut": moment},
                               {"epsilon": self._epsilon, "multi_precision": False})
