"""The `text_ranking` task (issue 46 item 2): config checks, bad rows named by file:line and key, a cross-encoder
that learns to rerank held-out real text, and `pipelines.rerank` on the trained directory.

Real text: the (first half → second half) sentence pairs of this repository's docs and docstrings
(tests/tasks/test_text_embedding.py's `doc_pairs`); each query's negatives are other sentences' second halves. The
held-out groups are never trained on.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

from official_albert import pipelines
from official_albert import train
from official_albert.retrieval.metrics import rerank_metrics
from official_albert.retrieval.metrics import retrieval_metrics
from official_albert.training.experiment_config import ConfigError
from tasks.ranking import TextRankingTask
from tasks.ranking.task import group_loss
from tests.tasks.test_text_embedding import doc_pairs

MODEL = {"preset": "", "vocab_size": 1000, "embedding_size": 16, "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 64,
         "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
HELD_OUT = 64


def groups(rows, negatives, seed):
  """A group per pair: the query (first half), its positive (second half) and `negatives` other second halves."""
  rng = np.random.default_rng(seed)
  out = []
  for i, (query, positive) in enumerate(rows):
    others = [j for j in rng.choice(len(rows), negatives + 1, replace=False) if j != i][:negatives]
    out.append({"query": query, "positive": positive, "negatives": [rows[j][1] for j in others]})
  return out


def write_jsonl(path, rows):
  path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
  return str(path)


def split_groups(tmp_path, train_negatives=3, eval_negatives=9):
  rows = doc_pairs()
  rows = [rows[i] for i in np.random.default_rng(0).permutation(len(rows))]
  return (write_jsonl(tmp_path / "train.jsonl", groups(rows[HELD_OUT:], train_negatives, 1)),
          write_jsonl(tmp_path / "dev.jsonl", groups(rows[:HELD_OUT], eval_negatives, 2)))


def override(train_file, dev_file, spm_model_file, steps, lr=1e-3, batch=16, **task):
  data = {"global_batch_size": batch, "seq_length": 64, "seed": 7}
  return {"task": {"model": MODEL, "spm_model_file": spm_model_file, **task,
                   "train_data": dict(data, input_path=train_file),
                   "validation_data": dict(data, input_path=dev_file, is_training=False, drop_remainder=False)},
          "trainer": {"train_steps": steps, "steps_per_loop": steps, "checkpoint_interval": steps,
                      "validation_interval": steps, "summary_interval": steps, "validation_steps": -1,
                      "warmup_steps": steps // 10, "learning_rate": lr},
          "runtime": {"distribution_strategy": "one_device", "seed": 3}}


def run(model_dir, config, mode="train_and_eval"):
  return train.run("text_ranking", mode, str(model_dir), params_override=json.dumps(config))
