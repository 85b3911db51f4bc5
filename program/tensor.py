"""`Tensor`: a value, computed now (eager mode), that layer functions take like a Variable.

A Tensor is a Variable whose shape and dtype come from the array it holds (numpy, or cupy
on a GPU), so every layer function and every Python operator that appends an op to a
program (`a + b`, `a @ b`, `a[1:]`, `pg.relu(a)`) runs that op at once on Tensors, through
the eager engine (keel/executor/eager.py, registered in program/dygraph.py), with the
kernels and gradient rules a program uses.

`stop_gradient` is True for data (`to_tensor`) and False for parameters and for what is
computed from a tensor that needs a gradient; `backward()` fills `.grad` of the leaves.
"""
from __future__ import annotations

import numpy as np

from keel.program import dtypes, dygraph, unique_name
from keel.program.variable import Variable

_T_DENSE = 7  # pb.VarType.DENSE_TENSOR


class Tensor(Variable):
    """An eager tensor (paddle.Tensor). Build one with `keel.to_tensor(data)`.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]], stop_gradient=False)
        >>> x.shape, x.dtype, x.ndim
        ([2, 2], paddle.float32, 2)
        >>> y = (x * x).sum()
        >>> y.backward()
        >>> print(x.grad.numpy())
        [[2. 4.]
         [6. 8.]]
        >>> x[0].tolist(), float(x.sum())
        ([1.0, 2.0], 10.0)
    """

    eager = True
    # Defaults at class level: an op makes a Tensor per output, and most keep these.
    grad = None          # a Tensor, after backward(), for a leaf that needs one
    _node = None         # the tape entry of the op that computed this tensor
    _hooks = None        # functions of the gradient, run when it is complete
    _retain_grad = False
    _version = 0         # bumped by in-place writes, checked by backward
    _name = None
    _persistable = False
    _pinned = False      # in page-locked host memory (pin_memory())
    _grad_cleared = False  # clear_gradient() ran since the last backward (PaddlePaddle's fake-empty gradient)

    def __init__(self, value=None, dtype=None, *, name: str | None = None, stop_gradient: bool = True,
                 persistable: bool = False):
        self._value = value
        if dtype is not None:
            self._dtype = dtype if type(dtype) is int else dtypes.to_code(dtype)
        else:
            self._dtype = None if value is None else dtypes.to_code(value.dtype)
        self._stop_gradient = stop_gradient
        if name is not None:
            self._name = name
        if persistable:
            self._persistable = True

    # -- what a Variable reads from its VarDesc --------------------------------------------
    @property
    def value(self):
        """The array (numpy or cupy); an error for a tensor no op has written yet."""
        if self._value is None:
            raise RuntimeError(f"tensor {self.name} holds no value yet")
        return self._value

    @property
    def name(self) -> str:
        if self._name is None:
            self._name = unique_name.generate("generated_tensor")
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = str(value)

    @property
    def block(self):
        return dygraph.engine().block

    @property
    def type(self) -> int:
        return _T_DENSE

    @property
    def shape(self) -> list[int]:
        """The dims as a list (PaddlePaddle's Tensor.shape)."""
        return list(self.value.shape)

    @shape.setter
    def shape(self, shape) -> None:
        """Layer functions set the shape they infer; a Tensor's comes from its value, which
        must agree (-1: any size)."""
        if self._value is not None:
            actual = self._value.shape
            if len(shape) != len(actual) or any(d >= 0 and d != a for d, a in zip(shape, actual)):
                raise RuntimeError(f"tensor {self.name}: the op computed shape {list(actual)}, "
                                   f"its layer function expects {list(shape)}")

    @property
    def ndim(self) -> int:
        return self.value.ndim

    def dim(self) -> int:
        return self.value.ndim

    @property
    def size(self) -> int:
        return int(self.value.size)

    @property
    def dtype(self) -> int:
        return dtypes.dtype_of(self._dtype)

    @dtype.setter
    def dtype(self, dtype) -> None:
        code = dtypes.to_code(dtype)
        if self._value is not None and self._value.dtype != dtypes.to_numpy(code):
            raise RuntimeError(f"tensor {self.name}: the op computed {self._value.dtype}, "
                               f"its layer function expects {dtypes.name(code)}")
        self._dtype = code

    @property
    def lod_level(self) -> int:
        return 0

    persistable = property(lambda self: self._persistable,
                           lambda self, v: setattr(self, "_persistable", bool(v)))
    need_check_feed = property(lambda self: False, lambda self, v: None)

    @property
    def stop_gradient(self) -> bool:
        return self._stop_gradient

    @stop_gradient.setter
    def stop_gradient(self, value) -> None:
        self._stop_gradient = bool(value)

    @property
    def is_leaf(self) -> bool:
        """Made by the user (or a parameter), not computed by a recorded op."""
        return self._node is None

    def _tensor_desc(self, create: bool = False):
        raise TypeError(f"tensor {self.name} is an eager value, not a program variable")

    # -- values -----------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A host numpy array of the value (a copy from a GPU; the array itself on the CPU)."""
        value = self.value
        return value if isinstance(value, np.ndarray) else value.get()

    def __array__(self, dtype=None, copy=None):
        value = self.numpy()
        return value if dtype is None else value.astype(dtype)

    def item(self, *index):
        return self.numpy().item(*index)

    def tolist(self):
        return self.numpy().tolist()

    def __len__(self) -> int:
        if self.value.ndim == 0:
            raise TypeError("len() of a 0-D tensor")
        return self.value.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __bool__(self) -> bool:
        if self.value.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.shape} is ambiguous; "
                             "use .any() or .all()")
        return bool(self.numpy().reshape(()))

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if not dtypes.is_integer(self._dtype):
            raise TypeError(f"only integer tensors can be used as an index, not {dtypes.name(self._dtype)}")
        return int(self.item())

    def __format__(self, spec: str) -> str:
        return format(self.item(), spec) if self.value.size == 1 and spec else repr(self)

    def __repr__(self):
        flags = f", stop_gradient={self.stop_gradient}"
        if self._value is None:
            return f"Tensor(name={self.name}, no value{flags})"
        body = np.array2string(self.numpy(), separator=", ", prefix="       ")
        return (f"Tensor(shape={self.shape}, dtype={dtypes.name(self._dtype)}, place={self.place}{flags},\n"
                f"       {body})")

    __str__ = __repr__

    # -- places (keel/executor/eager_places.py) ---------------------------------------------
    @property
    def place(self):
        """CPUPlace(), CUDAPlace(i) or CUDAPinnedPlace(): where the value lives."""
        return dygraph.engine().tensor_place(self)

    @property
    def is_cuda(self) -> bool:
        return self.place.device == "gpu"

    def cpu(self) -> "Tensor":
        """This tensor on the CPU: itself when it is there, else a copy, a new leaf with this
        tensor's stop_gradient (as PaddlePaddle's: backward does not cross the copy)."""
        return dygraph.engine().move(self, "cpu")

    def cuda(self, device_id=None, blocking: bool = True) -> "Tensor":
        """This tensor on GPU `device_id` (None: set_device's GPU, else GPU 0), as cpu()."""
        engine = dygraph.engine()
        return engine.move(self, engine.cuda_place(device_id))

    def pin_memory(self, blocking: bool = True) -> "Tensor":
        """A copy in page-locked host memory (CUDAPinnedPlace), as cpu(); needs cupy."""
        return dygraph.engine().move(self, "gpu_pinned")

    def to(self, *args, **kwargs) -> "Tensor":
        """`to(device)`, `to(dtype)`, `to(device, dtype)`, `to(other_tensor)` (its place and
        dtype), with an optional `blocking`: a dtype change is a (recorded) cast, a place
        change a copy as cpu()/cuda() make; unchanged, the tensor itself.

        Examples:
            >>> import keel as paddle
            >>> x = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
            >>> x.to("cpu") is x
            True
            >>> y = x.to("float64")
            >>> y.dtype, y.is_leaf
            (paddle.float64, False)
            >>> (y * y).sum().backward()
            >>> x.grad.numpy().tolist()
            [2.0, 4.0]
        """
        return dygraph.engine().to(self, args, kwargs)

    # -- autograd ---------------------------------------------------------------------------
    def backward(self, grad_tensor=None, retain_graph: bool = False) -> None:
        """Gradients of this tensor (a scalar loss, or seeded by `grad_tensor`) into `.grad`
        of every leaf that needs one, accumulated over calls."""
        dygraph.engine().backward([self], [grad_tensor], retain_graph)

    def clear_gradient(self, set_to_zero: bool = True) -> None:
        """The gradient back to zeros (or to None with set_to_zero=False), as PaddlePaddle's;
        the next backward writes its gradient in place of them rather than adding to them
        (PaddlePaddle's "fake empty" gradient: a value set into .grad in between is replaced
        too), which saves a pass over every parameter per training step."""
        if self.grad is not None and set_to_zero:
            value = self.grad.value
            # zeros(), not value * 0 (Inf * 0) nor zeros_like (which writes every page):
            # fresh zero pages a backward replaces are never touched
            self.grad._value = dygraph.engine().array_module(value).zeros(value.shape, value.dtype)
            self._grad_cleared = True
        else:
            self.grad = None

    clear_grad = clear_gradient

    def register_hook(self, hook):
        """`hook(grad)` runs when this tensor's gradient is complete; a Tensor it returns
        replaces the gradient. Returns a handle whose remove() takes it away."""
        if self.stop_gradient:
            raise RuntimeError(f"cannot register a hook on tensor {self.name}: it has stop_gradient=True")
        if self._hooks is None:
            self._hooks = {}
        key = max(self._hooks, default=0) + 1
        self._hooks[key] = hook
        return _HookRemover(self._hooks, key)

    def retain_grads(self) -> None:
        """Keep the gradient of this non-leaf tensor in `.grad` after backward."""
        self._retain_grad = True

    def detach(self) -> "Tensor":
        """The same value, cut from the tape (stop_gradient=True)."""
        return Tensor(self.value, self._dtype)

    def clone(self) -> "Tensor":
        """A copy that gradients flow through (op assign)."""
        from keel.program.layers.tensor import assign
        return assign(self)

    def set_value(self, value) -> None:
        """Replace the value in place (same shape and dtype), as PaddlePaddle's set_value."""
        array = value.value if isinstance(value, Tensor) else value
        array = dygraph.engine().as_array(array, like=self._value, dtype=self._dtype)
        if self._value is not None and tuple(array.shape) != tuple(self._value.shape):
            raise ValueError(f"set_value: shape {list(array.shape)} does not match tensor "
                             f"{self.name}'s {list(self._value.shape)}")
        self._value = array
        self._version += 1

    def __setitem__(self, item, value) -> None:
        """`x[index] = value` in place, as PaddlePaddle's eager Tensor: a set_value op from
        x's value before the write (moved to a Tensor of its own, which keeps x's place on
        the tape) to x, so gradients flow through the write to what x was computed from and
        to a Tensor value. x's version goes up: backward refuses an op that read x before
        the write (its gradient would need the old value)."""
        from keel.program.layers.indexing import setitem
        engine = dygraph.engine()
        if not self._stop_gradient and self._node is None and engine.grad_enabled:
            raise RuntimeError(f"x[index] = value on {self.name}, a leaf tensor that needs a gradient: write "
                               "it under keel.no_grad(), or into a copy (x = x.clone())")
        before = Tensor.__new__(Tensor)
        before.__dict__.update(self.__dict__)
        before._hooks, before._retain_grad, before.grad = None, False, None
        before._name = None
        if self._node is not None:  # the op that computed x now computed `before`
            for ts in self._node.outputs.values():
                ts[:] = [before if t is self else t for t in ts]
        setitem(before, item, value, output=self)
        self._version += 1

    def _set_value_from_op(self, array) -> None:
        if isinstance(array, np.generic):  # a kernel's numpy scalar: a 0-d array, as the executor keeps it
            array = np.asarray(array)
        self._value = array
        self._dtype = dtypes.to_code(array.dtype) if self._dtype is None or array.dtype != dtypes.to_numpy(
            self._dtype) else self._dtype

    @property
    def T(self):
        from keel.program.layers.tensor import transpose
        return transpose(self, list(range(self.ndim))[::-1])


def _operator(op_type: str, reverse: bool = False):
    """A Python operator of Tensor: the eager engine's direct path for its common cases,
    else Variable's (the layer function a program uses)."""
    def method(self, other):
        if isinstance(other, Variable) and not other.eager and not dygraph.in_dynamic_mode():
            return NotImplemented  # building a program: the Variable's operator, whose op refuses a Tensor
        out = dygraph._engine.operator(self, other, op_type, reverse)
        return out if out is not None else Variable._binary(self, other, op_type, reverse)
    method.__name__ = f"{op_type}{' (reversed)' if reverse else ''}"
    return method


for _name, _op, _reverse in (("__add__", "elementwise_add", False), ("__radd__", "elementwise_add", True),
                             ("__sub__", "elementwise_sub", False), ("__rsub__", "elementwise_sub", True),
                             ("__mul__", "elementwise_mul", False), ("__rmul__", "elementwise_mul", True),
                             ("__truediv__", "elementwise_div", False),
                             ("__rtruediv__", "elementwise_div", True)):
    setattr(Tensor, _name, _operator(_op, _reverse))


class _HookRemover:
    def __init__(self, hooks, key):
        self._hooks, self._key = hooks, key

    def remove(self) -> bool:
        return self._hooks.pop(self._key, None) is not None
