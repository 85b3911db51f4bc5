"""Files: programs (`.pdmodel`), parameters (`.pdiparams`, combined or one file per variable);
and data loading (`Dataset`, `DataLoader`, ...: PaddlePaddle's `paddle.io`)."""
from keel.program.io.data import (BatchSampler, DataLoader, Dataset, DistributedBatchSampler, IterableDataset,
                             TensorDataset, default_collate_fn)
from keel.program.io.samplers import (RandomSampler, Sampler, SequenceSampler, SubsetRandomSampler,
                                      WeightedRandomSampler)
from keel.program.io.inference_model import inference_program, load_inference_model, save_inference_model
from keel.program.io.program_file import load_params, load_program, persistable_specs, save_params, save_program
from keel.program.io.tensor_file import (TensorFileError, load_combined, load_tensor, read_all_records,
                                    save_combined, save_tensor)

__all__ = ["save_inference_model", "load_inference_model", "inference_program", "load_params", "load_program", "persistable_specs", "save_params", "save_program",
           "TensorFileError", "load_combined", "load_tensor", "read_all_records", "save_combined",
           "save_tensor", "Dataset", "IterableDataset", "TensorDataset", "BatchSampler",
           "DistributedBatchSampler", "DataLoader", "default_collate_fn", "Sampler", "SequenceSampler",
           "RandomSampler", "WeightedRandomSampler", "SubsetRandomSampler"]
