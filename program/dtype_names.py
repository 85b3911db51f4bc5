"""The dtype names of PaddlePaddle 3.x's top level (`paddle.float32`, `paddle.int64`,
`paddle.bool`, ...): the `dtypes.DType` objects that `Tensor.dtype` and `Variable.dtype`
return. A module of their own, as `bool` here is a dtype and not Python's."""
from keel.program.dtypes import DType, dtype_of
from keel.proto import pb

__all__ = ["dtype", "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
           "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "float", "cfloat"]

_T = pb.VarType

dtype = DType  # noqa: A001 (paddle.dtype: the class of these names)
bool = dtype_of(_T.BOOL)  # noqa: A001 (PaddlePaddle's name)
int8 = dtype_of(_T.INT8)
uint8 = dtype_of(_T.UINT8)
int16 = dtype_of(_T.INT16)
int32 = dtype_of(_T.INT32)
uint32 = dtype_of(_T.UINT32)
int64 = dtype_of(_T.INT64)
uint64 = dtype_of(_T.UINT64)
float16 = dtype_of(_T.FP16)
bfloat16 = dtype_of(_T.BF16)
float32 = dtype_of(_T.FP32)
float64 = dtype_of(_T.FP64)
complex64 = dtype_of(_T.COMPLEX64)
complex128 = dtype_of(_T.COMPLEX128)
# PaddlePaddle's uint16 is bfloat16 (whose bits it carries), not an unsigned integer type
uint16 = bfloat16
float = float32  # noqa: A001 (PaddlePaddle's aliases: paddle.float is float32, paddle.cfloat complex64)
cfloat = complex64
