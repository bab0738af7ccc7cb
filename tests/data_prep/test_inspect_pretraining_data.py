"""Tests of `data_prep.inspect_pretraining_data`: stats of static and dynamic data, reference-layout output."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from data_prep import create_pretraining_data as cpd
from data_prep import inspect_pretraining_data as ipd
from data_prep import pretraining_instances as pi
from data_prep import tokenize_corpus as tc
from official_albert.data import input_pipeline
from tasks import pretraining_dynamic as pd
from tests.conftest import CHILD_PYTHONPATH
from tests.data_prep.test_create_pretraining_data import corpus_docs
from tests.data_prep.test_create_pretraining_data import write_corpus
from tests.tasks.test_pretraining_dynamic import REPO_ROOT


@pytest.fixture(scope="module")
def data(tmp_path_factory, spm_model_file):
  root = tmp_path_factory.mktemp("inspect")
  path = write_corpus(root / "c.txt", corpus_docs(60))
  tc.tokenize_corpus(tc.TokenizeConfig(input_file=path, spm_model_file=spm_model_file, output_dir=str(root / "tok"),
                                       progress=False))
  cpd.create_pretraining_data(cpd.GenerationConfig(
      input_file=path, output_file=str(root / "static"), spm_model_file=spm_model_file,
      options=pi.InstanceOptions(max_seq_length=48, max_predictions_per_seq=7), dupe_factor=2, progress=False))
  return root


def test_dynamic_examples_written_in_the_reference_layout_read_back_identically(data, spm_model_file):
  out = str(data / "sample.tfrecord")
  stats = ipd.inspect(str(data / "tok" / "tokens-*"), 300, dynamic=True, spm_model_file=spm_model_file,
                      seq_length=48, max_predictions_per_seq=7, seed=2, output_file=out)
  assert stats["examples"] == 300 and stats["partially_masked_words"] == 0
  assert "[MASK]" in stats["examples_decoded"][0]["input"] or stats["examples_decoded"][0]["targets"]
  # The written records are reference records: the static reader parses them, with the same statistics.
  reread = pd.feature_statistics(input_pipeline.pretraining_dataset(out, 48, 7, 64, False, drop_remainder=False,
                                                                    include_token_boundary=True))
  assert reread == {k: stats[k] for k in reread}
  assert json.load(open(out + ".stats.json"))["examples"] == 300


def test_static_layout_is_read_from_the_records_and_mismatches_are_named(data):
  stats = ipd.inspect(str(data / "static"), 50)
  assert stats["examples"] == 50 and 0 < stats["predictions_per_sequence"] <= 7
  with pytest.raises(ValueError, match=r"seq_length=48 and 7 prediction slots, not --max_seq_length=128"):
    ipd.inspect(str(data / "static"), 50, seq_length=128)
  with pytest.raises(ValueError, match="pass --dynamic_masking"):
    ipd.inspect(str(data / "tok" / "tokens-*"), 5)


@pytest.mark.slow
def test_binary_prints_the_stats_json(data):
  result = subprocess.run([sys.executable, "-m", "data_prep.inspect_pretraining_data",
                           f"--input_path={data / 'static'}", "--num_examples=20"], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH, TF_CPP_MIN_LOG_LEVEL="2"))
  assert result.returncode == 0, result.stderr[-2000:]
  stats = json.loads(result.stdout)
  assert stats["examples"] == 20 and np.isclose(sum(stats["replacement_fractions"].values()), 1.0)
