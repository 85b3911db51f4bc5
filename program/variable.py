"""Variables and parameters: named, typed tensors of a block, as views over `VarDesc`."""
from __future__ import annotations

from typing import TYPE_CHECKING

from keel.program import dtypes
from keel.proto import pb

if TYPE_CHECKING:
    from keel.program.block import Block

_T = pb.VarType
# Var kinds whose shape/dtype live in a TensorDesc, and which field holds it.
_TENSOR_FIELD = {_T.DENSE_TENSOR: "dense_tensor", _T.DENSE_TENSOR_ARRAY: "tensor_array",
                 _T.SELECTED_ROWS: "selected_rows"}


class Variable:
    """A named tensor of a block. Shape uses -1 for dims unknown until run time.

    Arithmetic on variables appends ops: `a + b` (elementwise_add), `a @ b` (matmul_v2),
    `a < b` (less_than), `-a` (scale), `a[1:, ::2]` (slice/strided_slice), ...

    Examples:
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 4], "float32")
        ...     y = x * 2 + 1                                # operators append ops
        >>> isinstance(y, paddle.static.Variable), x.name, x.shape, x.dtype
        (True, 'x', (-1, 4), paddle.float32)
        >>> [op.type for op in main.global_block().ops]
        ['scale', 'scale']
    """

    is_parameter = False
    eager = False  # a Tensor (program/tensor.py) holds a value instead

    def __init__(self, block: "Block", desc: pb.VarDesc):
        self.block = block
        self.desc = desc

    # -- identity and type ----------------------------------------------------------
    @property
    def name(self) -> str:
        return self.desc.name

    @property
    def type(self) -> int:
        """The var kind: pb.VarType.DENSE_TENSOR, FEED_MINIBATCH, FETCH_LIST, ..."""
        return self.desc.type.type

    def _tensor_desc(self, create: bool = False):
        field = _TENSOR_FIELD.get(self.desc.type.type)
        if field is None:
            if create:  # a feed/fetch list, a scope list, a reader: it holds no tensor
                from keel.program.errors import ProgramError
                kind = pb.VarType.Type.Name(self.type) if self.type in pb.VarType.Type.values() else str(self.type)
                raise ProgramError(f"variable {self.name!r} is a {kind}, which has no shape or dtype "
                                   f"(an op may only write tensors to it)")
            return None
        holder = getattr(self.desc.type, field)
        if field == "selected_rows":
            return holder
        if not create and not holder.HasField("tensor"):
            return None
        return holder.tensor

    @property
    def shape(self) -> tuple[int, ...] | None:
        # Any negative dim means "unknown", as in PaddlePaddle: 3.3.1 writes instance_norm's
        # saved mean/variance as [-1 * C] (e.g. [-8]). The file's value stays in the desc
        # (`raw_dims`); every reader of the shape sees -1.
        t = self._tensor_desc()
        return None if t is None else tuple(d if d >= 0 else -1 for d in t.dims)

    @property
    def raw_dims(self) -> tuple[int, ...] | None:
        """The dims exactly as the desc holds them (a file may write any negative for unknown)."""
        t = self._tensor_desc()
        return None if t is None else tuple(t.dims)

    @shape.setter
    def shape(self, shape) -> None:
        t = self._tensor_desc(create=True)
        if tuple(t.dims) != tuple(shape):
            del t.dims[:]
            t.dims.extend(int(d) for d in shape)
            self.block._mutated()

    @property
    def ndim(self) -> int:
        return len(self.shape or ())

    @property
    def dtype(self) -> int | None:
        """The element type: its VarType number as a `dtypes.DType` (prints `paddle.float32`)."""
        t = self._tensor_desc()
        return None if t is None else dtypes.dtype_of(t.data_type)

    @dtype.setter
    def dtype(self, dtype) -> None:
        t = self._tensor_desc(create=True)
        code = dtypes.to_code(dtype)
        if not t.HasField("data_type") or t.data_type != code:
            t.data_type = code
            self.block._mutated()

    @property
    def dtype_name(self) -> str:
        return "?" if self.dtype is None else dtypes.name(self.dtype)

    @property
    def lod_level(self) -> int:
        if self.desc.type.type == _T.DENSE_TENSOR:
            return self.desc.type.dense_tensor.legacy_lod_level
        if self.desc.type.type == _T.DENSE_TENSOR_ARRAY:
            return self.desc.type.tensor_array.legacy_lod_level
        return 0

    # -- flags ------------------------------------------------------------------------
    def _flag(self, field: str, value: bool) -> None:
        if not self.desc.HasField(field) or getattr(self.desc, field) != value:
            setattr(self.desc, field, bool(value))
            self.block._mutated()

    persistable = property(lambda self: self.desc.persistable,
                           lambda self, v: self._flag("persistable", v),
                           doc="Kept in the scope across runs and saved in checkpoints.")
    stop_gradient = property(lambda self: self.desc.stop_gradient,
                             lambda self, v: self._flag("stop_gradient", v),
                             doc="No gradient flows into this variable.")
    need_check_feed = property(lambda self: self.desc.need_check_feed,
                               lambda self, v: self._flag("need_check_feed", v),
                               doc="A data variable whose fed values are checked against its shape/dtype.")

    # -- display ----------------------------------------------------------------------
    def type_string(self) -> str:
        if self.shape is None:
            return pb.VarType.Type.Name(self.type) if self.type in pb.VarType.Type.values() else str(self.type)
        return f"{self.dtype_name}{list(self.shape)}"

    def __repr__(self):
        flags = [f for f in ("persistable", "stop_gradient") if getattr(self, f)]
        extra = f" ({', '.join(flags)})" if flags else ""
        kind = "Parameter" if self.is_parameter else "Variable"
        return f"<{kind} {self.name}: {self.type_string()}{extra}>"

    # Variables are compared by identity: `==` builds an `equal` op, as in PaddlePaddle.
    __hash__ = object.__hash__

    # -- operators: each appends ops to the program's current block (see
    # program/layers/math.py `binary_operator` for the rules on Python numbers) -------------
    def _binary(self, other, op_type, reverse=False):
        from keel.program.layers.math import binary_operator
        return binary_operator(self, other, op_type, reverse)

    def __add__(self, other):
        return self._binary(other, "elementwise_add")

    def __radd__(self, other):
        return self._binary(other, "elementwise_add", reverse=True)

    def __sub__(self, other):
        return self._binary(other, "elementwise_sub")

    def __rsub__(self, other):
        return self._binary(other, "elementwise_sub", reverse=True)

    def __mul__(self, other):
        return self._binary(other, "elementwise_mul")

    def __rmul__(self, other):
        return self._binary(other, "elementwise_mul", reverse=True)

    def __truediv__(self, other):
        return self._binary(other, "elementwise_div")

    def __rtruediv__(self, other):
        return self._binary(other, "elementwise_div", reverse=True)

    def __floordiv__(self, other):
        return self._binary(other, "elementwise_floordiv")

    def __rfloordiv__(self, other):
        return self._binary(other, "elementwise_floordiv", reverse=True)

    def __mod__(self, other):
        return self._binary(other, "elementwise_mod")

    def __rmod__(self, other):
        return self._binary(other, "elementwise_mod", reverse=True)

    def __pow__(self, other):
        return self._binary(other, "elementwise_pow")

    def __rpow__(self, other):
        return self._binary(other, "elementwise_pow", reverse=True)

    def __matmul__(self, other):
        return self._binary(other, "matmul_v2") if isinstance(other, Variable) else NotImplemented

    def __rmatmul__(self, other):
        return self._binary(other, "matmul_v2", reverse=True) if isinstance(other, Variable) else NotImplemented

    def __neg__(self):
        from keel.program.layers.math import negative
        return negative(self)

    def __abs__(self):
        from keel.program.layers.math import abs as abs_
        return abs_(self)

    def __eq__(self, other):
        return self._binary(other, "equal")

    def __ne__(self, other):
        return self._binary(other, "not_equal")

    def __lt__(self, other):
        return self._binary(other, "less_than")

    def __le__(self, other):
        return self._binary(other, "less_equal")

    def __gt__(self, other):
        return self._binary(other, "greater_than")

    def __ge__(self, other):
        return self._binary(other, "greater_equal")

    def __getitem__(self, item):
        """`x[1]`, `x[:, 1:3]`, `x[::2]`, `x[..., 0]`, `x[None]`: slice/strided_slice ops."""
        from keel.program.layers.indexing import getitem
        return getitem(self, item)

    def __setitem__(self, item, value):
        """`x[1] = 0`, `x[:, ::2] = y`, `x[..., -1] = v`: a set_value op writing x (the value
        broadcast to the region)."""
        from keel.program.layers.indexing import setitem
        setitem(self, item, value)

    def __bool__(self):
        # A user's Python `if`/`while`/`and` on a variable while building a program would take
        # one branch silently, whatever the value is at run time. (Keel's own code uses a
        # variable's truth as "present", `find_var(...) or default`.)
        from keel.program import callsite
        from keel.program.errors import ProgramError
        if callsite.called_from_keel():
            return True
        where = callsite.describe(callsite.user_frame_lines())
        raise ProgramError(f"the truth value of variable {self.name} is only known when the program runs"
                           f"{' (at ' + where + ')' if where else ''}: a Python if/while/and/or on it would pick "
                           "one branch now; write static.nn.cond(pred, true_fn, false_fn) or "
                           "static.nn.while_loop(cond, body, vars) (jit.to_static converts a function's "
                           "if/while into them), or test `is None` for an optional variable")

    def __iter__(self):
        # Without this, Python would iterate through __getitem__ forever on a -1 dim.
        raise TypeError(f"variable {self.name} is not iterable while building a program; "
                        "use pg.unstack or pg.split")

    def astype(self, dtype) -> "Variable":
        """This variable converted to `dtype` (a `cast` op)."""
        from keel.program.layers.math import astype
        return astype(self, dtype)


class Parameter(Variable):
    """A trainable persistable variable, initialized by an op in the startup program.

    `trainable`, `regularizer`, `optimize_attr` (per-parameter learning-rate scale) and
    `need_clip` steer optimizers; they are build-time settings and are not stored in files
    (as in PaddlePaddle), so a parsed program's parameters get the defaults.
    """

    is_parameter = True

    def __init__(self, block, desc, *, trainable=True, initializer=None, regularizer=None,
                 learning_rate=1.0, need_clip=True):
        super().__init__(block, desc)
        self.trainable = trainable
        self.initializer = initializer
        self.regularizer = regularizer
        self.optimize_attr = {"learning_rate": learning_rate}
        self.need_clip = need_clip
