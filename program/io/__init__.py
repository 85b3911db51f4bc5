"""Files: programs (`.pdmodel`), parameters (`.pdiparams`, combined or one file per variable)."""
from program.io.program_file import load_params, load_program, persistable_specs, save_params, save_program
from program.io.tensor_file import (TensorFileError, load_combined, load_tensor, read_all_records,
                                    save_combined, save_tensor)

__all__ = ["load_params", "load_program", "persistable_specs", "save_params", "save_program",
           "TensorFileError", "load_combined", "load_tensor", "read_all_records", "save_combined",
           "save_tensor"]
