"""PaddlePaddle's Transformer layers (paddle.nn.MultiHeadAttention, TransformerEncoderLayer,
TransformerEncoder, TransformerDecoderLayer, TransformerDecoder), with its structure and
defaults: post-norm unless `normalize_before`, dropout on the attention weights, after the
activation and on each residual branch, relu or gelu in the feed-forward part. Masks are
added to the attention scores; a bool or integer mask (True / 1 = attend) becomes
(mask - 1) * 1e9 first, as PaddlePaddle converts it."""
from __future__ import annotations

from keel.program import dtypes
from keel.program.layers import math as M
from keel.program.layers import tensor as T
from keel.program.nn.layer import Layer
from keel.program.nn.layers import Dropout, LayerList, LayerNorm, Linear

__all__ = ["MultiHeadAttention", "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer",
           "TransformerDecoder"]


def _additive_mask(mask, dtype):
    if mask is None:
        return None
    if dtypes.name(mask.dtype) in ("bool", "int8", "int16", "int32", "int64", "uint8"):
        return M.scale(M.cast(mask, dtype), scale=1e9, bias=-1e9)  # 1 -> 0, 0 -> -1e9
    return mask


class MultiHeadAttention(Layer):
    """Attention of `query` over `key`/`value` ([batch, seq, embed_dim]) with `num_heads`
    heads: softmax(q k^T / sqrt(head_dim) + mask) v, projected by `out_proj`.

    Examples:
        >>> import keel as paddle
        >>> query = paddle.rand([2, 4, 128])          # [batch, seq, embed_dim]
        >>> attn_mask = paddle.rand([2, 2, 4, 4])     # [batch, num_heads, query_len, key_len]
        >>> attention = paddle.nn.MultiHeadAttention(128, 2)
        >>> attention(query, None, None, attn_mask=attn_mask).shape
        [2, 4, 128]
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, kdim=None, vdim=None, need_weights=False,
                 weight_attr=None, bias_attr=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"MultiHeadAttention: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        self.head_dim = self.embed_dim // self.num_heads
        self.need_weights = need_weights
        self.q_proj = Linear(embed_dim, embed_dim, weight_attr, bias_attr)
        self.k_proj = Linear(kdim or embed_dim, embed_dim, weight_attr, bias_attr)
        self.v_proj = Linear(vdim or embed_dim, embed_dim, weight_attr, bias_attr)
        self.out_proj = Linear(embed_dim, embed_dim, weight_attr, bias_attr)
        self.attn_dropout = Dropout(dropout) if dropout else None

    def _heads(self, x):  # [b, s, e] -> [b, heads, s, head_dim]
        return T.transpose(T.reshape(x, [0, 0, self.num_heads, self.head_dim]), [0, 2, 1, 3])

    def forward(self, query, key=None, value=None, attn_mask=None, cache=None):
        if cache is not None:
            raise ValueError("MultiHeadAttention: incremental decoding caches are not supported")
        key = query if key is None else key
        value = query if value is None else value
        q, k, v = self._heads(self.q_proj(query)), self._heads(self.k_proj(key)), self._heads(self.v_proj(value))
        scores = M.matmul(M.scale(q, scale=self.head_dim ** -0.5), k, transpose_y=True)
        mask = _additive_mask(attn_mask, scores.dtype)
        if mask is not None:
            scores = M.add(scores, mask)
        weights = M.softmax(scores)
        if self.attn_dropout is not None:
            weights = self.attn_dropout(weights)
        out = T.reshape(T.transpose(M.matmul(weights, v), [0, 2, 1, 3]), [0, 0, self.embed_dim])
        out = self.out_proj(out)
        return (out, weights) if self.need_weights else out


def _residual(x, norm, body, dropout, normalize_before):
    """x + dropout(body(x)), with `norm` before body (pre-norm) or after the sum (post-norm)."""
    out = M.add(x, dropout(body(norm(x) if normalize_before else x)))
    return out if normalize_before else norm(out)


def _activation(name):
    if name not in ("relu", "gelu"):
        raise ValueError(f"Transformer: activation must be 'relu' or 'gelu', got {name!r}")
    return M.relu if name == "relu" else M.gelu


class _TransformerLayer(Layer):
    """What encoder and decoder layers share: self attention (and cross attention in a
    decoder), the feed-forward part, `_norms` LayerNorms and as many residual dropouts, made
    in PaddlePaddle's order (so their names match), and the constructor arguments, from
    which TransformerEncoder/Decoder make the further layers."""
    _cross_attention = False
    _norms = 2

    def __init__(self, d_model, nhead, dim_feedforward, dropout=0.1, activation="relu", attn_dropout=None,
                 act_dropout=None, normalize_before=False, weight_attr=None, bias_attr=None,
                 layer_norm_eps=1e-5):
        super().__init__()
        self._config = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward, dropout=dropout,
                            activation=activation, attn_dropout=attn_dropout, act_dropout=act_dropout,
                            normalize_before=normalize_before, weight_attr=weight_attr, bias_attr=bias_attr,
                            layer_norm_eps=layer_norm_eps)
        attn_dropout = dropout if attn_dropout is None else attn_dropout
        act_dropout = dropout if act_dropout is None else act_dropout
        self.normalize_before = normalize_before
        attention = lambda: MultiHeadAttention(d_model, nhead, attn_dropout, weight_attr=weight_attr,  # noqa: E731
                                               bias_attr=bias_attr)
        self.self_attn = attention()
        if self._cross_attention:
            self.cross_attn = attention()
        self.linear1 = Linear(d_model, dim_feedforward, weight_attr, bias_attr)
        self.dropout = Dropout(act_dropout)
        self.linear2 = Linear(dim_feedforward, d_model, weight_attr, bias_attr)
        for i in range(1, self._norms + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, layer_norm_eps))
        for i in range(1, self._norms + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self._act = _activation(activation)

    def _feed_forward(self, x):
        return self.linear2(self.dropout(self._act(self.linear1(x))))


class TransformerEncoderLayer(_TransformerLayer):
    """One encoder layer: self attention, then a feed-forward network
    (linear1 -> activation -> linear2), each wrapped in dropout, a residual sum and layer
    norm (before the body with normalize_before=True, after the sum otherwise).

    Examples:
        >>> import keel as paddle
        >>> enc_input = paddle.rand([2, 4, 128])
        >>> attn_mask = paddle.rand([2, 2, 4, 4])
        >>> encoder_layer = paddle.nn.TransformerEncoderLayer(128, 2, 512)
        >>> encoder_layer(enc_input, attn_mask).shape
        [2, 4, 128]
    """
    def forward(self, src, src_mask=None, cache=None):
        src = _residual(src, self.norm1, lambda x: self.self_attn(x, x, x, src_mask, cache), self.dropout1,
                        self.normalize_before)
        return _residual(src, self.norm2, self._feed_forward, self.dropout2, self.normalize_before)


class TransformerEncoder(Layer):
    """`num_layers` layers made like `encoder_layer` (the first is that layer itself), then `norm`.

    Examples:
        >>> import keel as paddle
        >>> enc_input = paddle.rand([2, 4, 128])
        >>> encoder_layer = paddle.nn.TransformerEncoderLayer(128, 2, 512)
        >>> encoder = paddle.nn.TransformerEncoder(encoder_layer, 2)
        >>> encoder(enc_input).shape, len(encoder.layers)
        ([2, 4, 128], 2)
    """

    def __init__(self, encoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = LayerList([encoder_layer if i == 0 else type(encoder_layer)(**encoder_layer._config)
                                 for i in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src, src_mask=None, cache=None):
        for layer in self.layers:
            src = layer(src, src_mask)
        return self.norm(src) if self.norm is not None else src


class TransformerDecoderLayer(_TransformerLayer):
    """One decoder layer: self attention over the target, cross attention over the
    encoder's output (`memory`), then the feed-forward network; residual sums and layer
    norms as in TransformerEncoderLayer.

    Examples:
        >>> import keel as paddle
        >>> dec_input = paddle.rand([2, 4, 128])      # the target sequence
        >>> enc_output = paddle.rand([2, 6, 128])     # the encoder's output
        >>> self_attn_mask = paddle.rand([2, 2, 4, 4])
        >>> cross_attn_mask = paddle.rand([2, 2, 4, 6])
        >>> decoder_layer = paddle.nn.TransformerDecoderLayer(128, 2, 512)
        >>> decoder_layer(dec_input, enc_output, self_attn_mask, cross_attn_mask).shape
        [2, 4, 128]
    """
    _cross_attention = True
    _norms = 3

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, cache=None):
        before = self.normalize_before
        tgt = _residual(tgt, self.norm1, lambda x: self.self_attn(x, x, x, tgt_mask, cache), self.dropout1, before)
        tgt = _residual(tgt, self.norm2, lambda x: self.cross_attn(x, memory, memory, memory_mask), self.dropout2,
                        before)
        return _residual(tgt, self.norm3, self._feed_forward, self.dropout3, before)


class TransformerDecoder(Layer):
    """`num_layers` layers made like `decoder_layer` (the first is that layer itself), then `norm`.

    Examples:
        >>> import keel as paddle
        >>> dec_input = paddle.rand([2, 4, 128])
        >>> enc_output = paddle.rand([2, 6, 128])
        >>> decoder_layer = paddle.nn.TransformerDecoderLayer(128, 2, 512)
        >>> decoder = paddle.nn.TransformerDecoder(decoder_layer, 2, norm=paddle.nn.LayerNorm(128))
        >>> decoder(dec_input, enc_output).shape
        [2, 4, 128]
    """
    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = LayerList([decoder_layer if i == 0 else type(decoder_layer)(**decoder_layer._config)
                                 for i in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, cache=None):
        for layer in self.layers:
            tgt = layer(tgt, memory, tgt_mask, memory_mask)
        return self.norm(tgt) if self.norm is not None else tgt
