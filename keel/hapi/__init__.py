"""Keel's high-level API (PaddlePaddle's `paddle.Model`, `paddle.metric`, `paddle.callbacks`):
a fit loop over a Layer. It sits above `program` and `executor` and uses both.

    from keel.hapi import Model, metrics
    model = Model(MyNet(), inputs=[InputSpec([None, 64], "float32", "x")],
                  labels=[InputSpec([None, 1], "int64", "label")])
    model.prepare(pg.optimizer.Adam(1e-3, parameters=model.parameters()),
                  pg.nn.CrossEntropyLoss(), metrics.Accuracy())
    model.fit(train_dataset, eval_dataset, epochs=3, batch_size=64)
    model.save("out/net", training=False)      # .pdmodel + .pdiparams for the Predictor
"""
from keel.hapi import callbacks, metrics
from keel.hapi.model import Model
from keel.hapi.summary import summary

__all__ = ["Model", "callbacks", "metrics", "summary"]
