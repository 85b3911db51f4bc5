"""Layer functions: the builder API that appends ops (re-exported by `program` and `program.nn`)."""
