"""The long-input study (issues 30 and 41): README.md here holds its commands and measured tables; `study` is its
binary (the long-range task fine-tuned through the train binary), `finetune_jax` and `pretrain_jax` its JAX hosts'
halves (the same task fine-tuned, and continued MLM pretraining at 4,096 positions, without TensorFlow), `pools` the
task's documents built from piece ids."""
