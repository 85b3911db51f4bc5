"""Running programs: Scope, places, the compiled-plan Executor, the inference Predictor."""
