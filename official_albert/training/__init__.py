"""Training: the `Task` base and registry, typed experiment configs, the custom distributed loop, the optimizers
and schedule, and the tf.distribute helpers."""
