"""`paddle.metric.accuracy`: the top-k accuracy of a batch as a tensor (op top_k_v2, then
op accuracy), in a program being built or eagerly."""
from keel.program.nn import accuracy as _topk_accuracy


def accuracy(input, label, k=1, correct=None, total=None, name=None):  # noqa: A002 (PaddlePaddle's names)
    """The fraction of rows of `input` ([N, classes] scores) whose `label` ([N, 1] int) is
    among its k highest scores; `correct` and `total`, when given, receive the counts.

    Examples:
        >>> import keel as paddle
        >>> scores = paddle.to_tensor([[0.1, 0.7, 0.2], [0.6, 0.3, 0.1], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]])
        >>> label = paddle.to_tensor([[1], [1], [2], [1]])
        >>> print(paddle.metric.accuracy(scores, label).numpy())
        0.5
        >>> print(paddle.metric.accuracy(scores, label, k=2).numpy())
        1.0
    """
    return _topk_accuracy(input, label, k=k, correct=correct, total=total)
