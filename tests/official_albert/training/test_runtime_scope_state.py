"""`train_lib.runtime_scope` leaves the process as it found it: a notebook's run with op determinism on does not keep
every later run and pipeline of the session on deterministic kernels (slower; on a GPU some ops refuse to run)."""

from tensorflow.python.framework import config as tf_config  # (the getter is not public in TF 2.21)

from official_albert.training import train_lib
from tests.official_albert.training.test_train_lib import tiny_params


def test_op_determinism_is_restored_after_the_scope():
  if tf_config.is_op_determinism_enabled():  # (a test before this one in the process left it on otherwise)
    tf_config.disable_op_determinism()
  with train_lib.runtime_scope(tiny_params(runtime={"enable_op_determinism": True})):
    assert tf_config.is_op_determinism_enabled()
  assert not tf_config.is_op_determinism_enabled()
  with train_lib.runtime_scope(tiny_params()):
    assert not tf_config.is_op_determinism_enabled()
