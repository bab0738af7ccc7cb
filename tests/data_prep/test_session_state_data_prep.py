"""Pretraining data made twice in one Python session (a notebook) follows the SentencePiece model on disk now.

Before: the in-process generator (`num_workers=1`, or one shard) cached its tokenizer by the model's path, so records
made after retraining the model at the same path were tokenized with the old model (under a manifest naming the new
model's hash); a fresh process made other records.
"""

import shutil

from data_prep import pretraining_shards as shards
from data_prep import train_sentencepiece
from data_prep.pretraining_config import GenerationConfig


def test_tokenizer_follows_a_model_rewritten_at_the_same_path(tmp_path, spm_model_file):
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("".join(f"the cached result {i} is returned when the function is called again\n"
                            for i in range(100)))
  retrained = train_sentencepiece.train_sentencepiece([str(corpus)], str(tmp_path / "retrained"), vocab_size=40,
                                                      num_threads=1, seed=1)
  model = str(tmp_path / "spm.model")
  config = GenerationConfig(input_file=str(corpus), output_file=str(tmp_path / "out"), spm_model_file=model)
  shutil.copy(spm_model_file, model)
  first, _ = shards.tokenizer_and_vocab(config)
  assert first.sp_model.GetPieceSize() == 1000
  shutil.copy(retrained, model)  # (retrained at the same path in the same session)
  second, _ = shards.tokenizer_and_vocab(config)
  assert second.sp_model.GetPieceSize() == 40
  assert shards.tokenizer_and_vocab(config)[0] is second  # (still cached while the model is unchanged)
