"""`paddle.DataParallel`: a Layer wrapping the model of one data-parallel rank.

In one process it is the wrapped layer under another name: forward, parameters and the
state dict are the wrapped layer's (its keys without a `_layers.` prefix, as PaddlePaddle
saves them), so a script written for several GPUs runs unchanged on one. Across processes
Keel averages gradients in the training program: `fleet.distributed_optimizer(...)`
inserts the bucketed all-reduce (keel/distributed/fleet.py) when the program is built, so
a layer wrapped here trains data-parallel when it is built into a program
(Model.fit, to_static) with that optimizer. Eager training of several processes has no
gradient all-reduce in Keel: wrapping a layer there is refused, naming the way that works,
rather than training each rank on its own data unawares."""
from __future__ import annotations

from keel.distributed.parallel import get_world_size
from keel.program import dygraph
from keel.program.nn.layer import Layer


class DataParallel(Layer):
    """A Layer that trains the wrapped one data-parallel; in one process it is that layer itself.

    Examples:
        >>> import keel as paddle
        >>> linear = paddle.nn.Linear(2, 3)
        >>> model = paddle.DataParallel(linear)
        >>> model(paddle.ones([4, 2])).shape
        [4, 3]
        >>> sorted(model.state_dict())            # the wrapped layer's keys, as PaddlePaddle saves them
        ['bias', 'weight']
    """

    def __init__(self, layers, strategy=None, comm_buffer_size=25, last_comm_buffer_size=1,
                 find_unused_parameters=False, group=None):
        if not isinstance(layers, Layer):
            raise TypeError(f"DataParallel: expects a Layer to wrap, got {type(layers).__name__}")
        if group is not None:
            raise NotImplementedError("DataParallel: only the global group (group=None) exists here")
        if get_world_size() > 1 and dygraph.in_dynamic_mode():
            raise NotImplementedError(
                f"DataParallel: {get_world_size()} processes training eagerly: Keel has no eager gradient "
                f"all-reduce. Build the model into a program (paddle.Model(...).fit or jit.to_static) with "
                f"fleet.distributed_optimizer(optimizer), which averages the gradients over the ranks")
        super().__init__()
        self._layers = layers
        self.find_unused_parameters = bool(find_unused_parameters)
        self.comm_buffer_size, self.last_comm_buffer_size = comm_buffer_size, last_comm_buffer_size

    def forward(self, *inputs, **kwargs):
        return self._layers(*inputs, **kwargs)

    def scale_loss(self, loss):
        """The loss as it is: the all-reduce averages the gradients (PaddlePaddle 2.x's API)."""
        return loss

    def state_dict(self, scope=None, structured_name_prefix: str = ""):
        return self._layers.state_dict(scope, structured_name_prefix)

    def set_state_dict(self, state_dict, scope=None, use_structured_name: bool = True):
        return self._layers.set_state_dict(state_dict, scope, use_structured_name)

    set_dict = load_dict = set_state_dict
