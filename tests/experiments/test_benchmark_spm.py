"""`albert-benchmark` without --spm_model_file, installed: the package has no tests/fixtures/test_spm.model.

Seven default-suite workloads (tokenize, data_prep, serving, ...) read `core.default_spm`, which named the checkout's
fixture only: from a wheel every one of them failed with FileNotFoundError. Without the fixture it now trains a small
model once into a temporary folder and reuses it.
"""

import os
import tempfile

from experiments.benchmark import core
from official_albert.tokenization import FullTokenizer


def test_without_the_checkouts_fixture_a_small_model_is_trained_once_and_used(tmp_path, monkeypatch):
  monkeypatch.setattr(core, "REPO_ROOT", str(tmp_path / "site-packages"))  # as installed: no tests/ beside it
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
  os.makedirs(tempfile.tempdir)
  settings = core.BenchSettings(workload="tokenize", repeats=1, warmup=0)
  path = core.default_spm(settings)
  assert path.startswith(str(tmp_path / "tmp")) and os.path.isfile(path)
  assert FullTokenizer(path).tokenize("The library had modules.")
  stamp = os.stat(path).st_mtime_ns
  assert core.default_spm(settings) == path and os.stat(path).st_mtime_ns == stamp  # reused, not trained again
  assert core.default_spm(core.BenchSettings(spm_model_file="given.model")) == "given.model"
