"""official_albert.compat: every private TF/Keras internal the project uses exists in the installed versions.

If this fails after an upgrade, the message names the missing internal: update official_albert/compat.py (one
place) or install the versions in requirements.txt.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import compat


def test_every_private_internal_is_present():
  compat.check()  # raises IncompatibleVersionError naming what is missing
  assert not list(compat.version_drift()), "installed versions differ from compat.TESTED_VERSIONS"


def test_check_names_what_is_missing(monkeypatch):
  monkeypatch.setattr(compat, "_OPTIMIZER_INTERNALS", compat._OPTIMIZER_INTERNALS + ("_no_such_internal",))
  with pytest.raises(compat.IncompatibleVersionError, match=r"_no_such_internal[\s\S]*tested: \{'tensorflow'"):
    compat.check()


def test_wrappers_work_on_real_objects(tmp_path):
  v = tf.Variable([1.0, 2.0])
  prefix = tf.train.Checkpoint(v=v).write(str(tmp_path / "ckpt"))
  other, unused = tf.Variable([0.0, 0.0]), tf.Variable(0.0)
  status = tf.train.Checkpoint(v=other, w=unused).read(prefix)
  status.expect_partial()
  assert id(other) in compat.restored_object_ids(status) and id(unused) not in compat.restored_object_ids(status)
  model = keras.Sequential([keras.layers.Dropout(0.5, seed=3)])
  model.build((None, 2))
  assert len(compat.seed_generator_states(model)) == 1
  assert compat.in_multi_worker_mode(tf.distribute.get_strategy()) is False
  optimizer = keras.optimizers.SGD(learning_rate=0.25)
  optimizer.build([v])
  assert compat.current_learning_rate(optimizer) == 0.25
  assert compat.variable_index(optimizer, v) == 0
  assert np.allclose(compat.keras_clip_gradients(optimizer, [tf.constant([3.0, 4.0])])[0], [3.0, 4.0])
  assert compat.regex_split_op() is not None


def test_read_error_messages_still_match_the_patterns():
  """The input diagnosis reads TensorFlow's message text (no API): each error, provoked on the installed TensorFlow,
  still matches its pattern. If this fails, TensorFlow changed its words: update compat.READ_ERROR_PATTERNS."""
  samples = compat.read_error_samples()
  assert sorted({kind for kind, _ in samples}) == sorted(compat.READ_ERROR_PATTERNS)
  assert compat.message_patterns_missing() == []


def test_a_changed_message_is_reported(monkeypatch):
  monkeypatch.setitem(compat.READ_ERROR_PATTERNS, "length", r"Values size: (\d+) but the output shape is")
  missing = compat.message_patterns_missing()
  assert len(missing) == 1 and "READ_ERROR_PATTERNS['length']" in missing[0] and "Number of int64 values" in missing[0]
