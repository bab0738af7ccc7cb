"""State that outlives a call in one long Python session (a notebook) must not change a later call's result.

Each test runs two calls in this process with a change in between that a notebook makes (a file rewritten at the same
path) and checks the second call against what a fresh process gives.
"""

import os

import sentencepiece as spm

from tasks.embedding import data as embedding_data


def _train_spm(prefix: str, corpus: str, rule: str) -> str:
  spm.SentencePieceTrainer.train(input=corpus, model_prefix=prefix, vocab_size=40, normalization_rule_name=rule,
                                 minloglevel=2)
  return prefix + ".model"


def test_comparison_text_follows_a_sentencepiece_model_retrained_at_the_same_path(tmp_path):
  """Before: the normaliser was cached by path alone, so after retraining the model (nmt_nfkc → identity) at the same
  path, `comparison_text` still called "a\u200bb" and "a b" one text (the identity model gives them two ids): a valid
  hard negative refused, a ranking negative dropped, until the process restarted."""
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("".join(f"the quick brown fox {i} jumps over the lazy dog\n" for i in range(100)))
  options = {"spm_model_file": str(tmp_path / "m.model")}
  _train_spm(str(tmp_path / "m"), str(corpus), "nmt_nfkc")
  assert embedding_data.comparison_text("a\u200bb", options) == embedding_data.comparison_text("a b", options)
  before = os.stat(options["spm_model_file"]).st_mtime_ns
  _train_spm(str(tmp_path / "m"), str(corpus), "identity")
  if os.stat(options["spm_model_file"]).st_mtime_ns == before:  # (a coarse clock: make the rewrite visible)
    os.utime(options["spm_model_file"], ns=(before + 1_000_000, before + 1_000_000))
  assert embedding_data.comparison_text("a\u200bb", options) != embedding_data.comparison_text("a b", options)
