"""The early-exit study (issue 31): README.md here holds its command and measured tables; `study` is its binary,
`pretrain_torch` the PyTorch pretrainer for a GPU host without TensorFlow."""
