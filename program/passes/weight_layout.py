"""Storing GEMM weights column-major: the same values, the layout BLAS reads fastest."""
from __future__ import annotations

import numpy as np


def _reads_as_gemm_rhs(op, name: str) -> bool:
    """`op` reads `name` only as the plain (untransposed, unflattened) right-hand matrix of
    its matrix product."""
    if op.input_arg_names.count(name) != 1:
        return False
    if op.type == "fc":
        return op.input("W") == [name] and not op.attr("padding_weights", False)
    if op.type == "mul":
        return op.input("Y") == [name] and op.attr("y_num_col_dims", 1) == 1
    if op.type == "matmul_v2":
        return op.input("Y") == [name] and not op.attr("trans_y", False)
    if op.type == "matmul":
        return op.input("Y") == [name] and not op.attr("transpose_Y", False)
    return False


def column_major_weights(graph, options) -> dict:
    """Matches: a 2-D float constant (a parameter no op writes) of at least
    `options.column_major_min_bytes` (2 MiB) read only as the plain right-hand matrix of `fc`
    (W, unpadded), `mul` (Y, y_num_col_dims 1), `matmul_v2` (Y, no trans_y) or `matmul`
    (Y, no transpose_Y), and not fetched. Its array is stored column-major (Fortran order).

    Safe because only the memory layout changes: the values, shape and dtype are the same,
    every kernel indexes arrays by shape (numpy semantics do not depend on the layout), and
    the params file is written from the values (row-major on disk, as PaddlePaddle's).

    Why, measured with numpy's OpenBLAS on 2 cores: a batch-1 product (a matrix-vector
    product, bound by reading W) is 15-40% faster with W [K, N] column-major (784x1024:
    66 -> 46 us). The same layout makes OpenBLAS's GEMM 5-20% slower for 2 to 32 rows,
    which the kernels avoid by computing those products transposed (W.T @ X.T, both
    operands then row-major: kernels/math.py `_gemm`), and 3-5% slower from 33 rows on,
    where the kernels multiply a row-major copy made on first use (so only servers that
    run such batches pay its memory); the moved arrays are read-only, which is what makes
    keeping that copy safe. Under 2 MiB (W fits the caches) the layout gains nothing at
    batch 1, so such weights keep their layout."""
    moved = 0
    for name, value in list(graph.params.items()):
        array = np.asarray(value)
        if (array.ndim != 2 or array.dtype.kind != "f" or array.flags.f_contiguous
                or array.nbytes < options.column_major_min_bytes
                or not graph.is_const(name) or name in graph.fetches):
            continue
        readers = graph.readers(name)
        if readers and all(_reads_as_gemm_rhs(op, name) for op in readers):
            moved_array = np.asfortranarray(array)
            moved_array.flags.writeable = False  # a constant: lets the kernels cache a row-major copy
            graph.params[name] = moved_array
            moved += 1
    return {"weights_column_major": moved} if moved else {}
