"""paddle.nn.functional.scaled_dot_product_attention, written as PaddlePaddle's "math"
path computes it (the one it takes on CPUs): softmax(q k^T * scale + mask) v per head."""
from __future__ import annotations

import math

from keel.program.errors import AttrError
from keel.program.layers import manip
from keel.program.layers import math as M
from keel.program.layers import tensor as T
from keel.program.nn import _fail
from keel.program.nn.functional.common import dropout
from keel.proto import pb

__all__ = ["scaled_dot_product_attention"]


def _repeat_heads(x, repeats):
    """[b, s, h, d] -> [b, s, h*repeats, d], each head repeated in place (grouped-query attention)."""
    if repeats == 1:
        return x
    b, s, h, d = [v if v >= 0 else -1 for v in x.shape]
    return T.flatten(T.expand(T.unsqueeze(x, [3]), [b, s, h, repeats, d]), 2, 3)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, training=True,
                                 backend=None, scale=None, enable_gqa=True, name=None):
    """Attention of query [batch, seq_q, heads, head_dim] over key/value [batch, seq_k,
    kv_heads, head_dim] (3-d inputs: one batch): scale defaults to 1/sqrt(head_dim);
    attn_mask is added to the scores (a bool mask: True keeps, False gives -inf); is_causal
    masks the keys after each query (and then, as PaddlePaddle's math path, ignores
    attn_mask); dropout_p drops attention weights while training. kv_heads may divide the
    query heads (each key/value head then serves a group of them).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> q = paddle.rand([1, 8, 2, 16])   # [batch, seq_len, num_heads, head_dim]
        >>> out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        >>> out.shape
        [1, 8, 2, 16]
    """
    layer = "scaled_dot_product_attention"
    batched = query.ndim == 4
    if not batched:
        if query.ndim != 3:
            _fail(layer, f"query must be 3-d or 4-d [batch, seq, heads, head_dim], got {query.name} "
                         f"{query.type_string()}")
        query, key, value = (T.unsqueeze(t, [0]) for t in (query, key, value))
    q_heads, k_heads, v_heads = query.shape[2], key.shape[2], value.shape[2]
    if enable_gqa:
        if k_heads != v_heads or (k_heads > 0 and q_heads % k_heads):
            _fail(layer, f"key and value must have one number of heads dividing the query's; got query "
                         f"{q_heads}, key {k_heads}, value {v_heads}", AttrError)
    elif not q_heads == k_heads == v_heads:
        _fail(layer, f"query, key and value must have the same number of heads without enable_gqa; got "
                     f"{q_heads}, {k_heads}, {v_heads}", AttrError)
    repeats = q_heads // k_heads if k_heads > 0 else 1
    key, value = _repeat_heads(key, repeats), _repeat_heads(value, repeats)
    head_dim = query.shape[-1]
    if scale is None:
        scale = head_dim ** -0.5 if head_dim > 0 else 1.0
    q, k, v = (T.transpose(t, [0, 2, 1, 3]) for t in (query, key, value))
    scores = M.matmul(M.scale(q, float(scale)), k, transpose_y=True)
    if is_causal:
        lq, lk = scores.shape[-2], scores.shape[-1]
        if lq < 0 or lk < 0:
            _fail(layer, "is_causal needs the sequence lengths known")
        scores = M.add(scores, manip.triu(T.full([lq, lk], -math.inf, scores.dtype), 1))
    elif attn_mask is not None:
        if attn_mask.dtype == pb.VarType.BOOL:
            attn_mask = M.where(attn_mask, T.full_like(attn_mask, 0.0, scores.dtype),
                                T.full_like(attn_mask, -math.inf, scores.dtype))
        scores = M.add(scores, attn_mask)
    weights = M.softmax(scores)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training=training, mode="upscale_in_train")
    out = T.transpose(M.matmul(weights, v), [0, 2, 1, 3])
    return out if batched else T.squeeze(out, [0])
