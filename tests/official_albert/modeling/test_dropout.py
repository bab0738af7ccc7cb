"""AlbertDropout: independent masks per replica (2 logical CPUs, in a subprocess), Keras' numbers on one device.

Keras' `Dropout` seed state is a mirrored variable under MirroredStrategy / MWMS, so every replica drew the same
masks (row i of every replica's slice got the same one). The fix folds the global replica id into the seed; on one
device nothing may move (checkpoints and one-device numbers stay bit-identical).
"""

import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert import AlbertClassifier
from official_albert import AlbertPretrainer
from official_albert.modeling.layers import AlbertDropout
from tests.official_albert.modeling.test_encoder import make_inputs
from tests.official_albert.modeling.test_encoder import tiny_config
from tests.official_albert.training.test_distribute import script_result


def test_one_device_is_keras_dropout_bit_for_bit(tmp_path):
  x = tf.reshape(tf.range(1, 2 * 5 * 7 + 1, dtype=tf.float32), [2, 5, 7])
  for kwargs in ({"rate": 0.3, "seed": 7}, {"rate": 0.5, "seed": 3, "noise_shape": (None, 1, 7)}):
    ours, theirs = AlbertDropout(**kwargs), keras.layers.Dropout(**kwargs)
    eager = [(ours(x, training=True), theirs(x, training=True)) for _ in range(3)]
    graph = tf.function(lambda t: (ours(t, training=True), theirs(t, training=True)))
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():  # one replica in sync: Keras' draw, unchanged
      graphed = [graph(x) for _ in range(2)]
    for a, b in eager + graphed:
      np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(eager[0][0].numpy(), eager[1][0].numpy())  # the state advanced between calls
    np.testing.assert_array_equal(ours.seed_generator.state.numpy(), theirs.seed_generator.state.numpy())
    saved = [tf.train.Checkpoint(layer=layer).write(str(tmp_path / name))
             for name, layer in (("ours", ours), ("keras", theirs))]
    assert tf.train.list_variables(saved[0]) == tf.train.list_variables(saved[1])  # the same checkpoint keys
    assert ours.get_config() == {**theirs.get_config(), "name": ours.name}
    np.testing.assert_array_equal(ours(x, training=False).numpy(), x.numpy())


def test_every_dropout_of_the_models_is_albert_dropout():
  config = tiny_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
  for model in (AlbertClassifier(config, num_labels=2, dropout_rate=0.1), AlbertPretrainer(config)):
    model(make_inputs())
    layers = [l for l in model._flatten_layers(include_self=True, recursive=True)  # pylint: disable=protected-access
              if isinstance(l, keras.layers.Dropout)]
    assert layers and all(isinstance(l, AlbertDropout) for l in layers), [type(l).__name__ for l in layers]


# The child: logical devices must be configured before TensorFlow initialises them.
_REPLICAS_SCRIPT = textwrap.dedent("""
    import json
    import numpy as np, tensorflow as tf, keras
    from official_albert.training import distribute
    devices = distribute.configure_logical_cpus(2)
    from official_albert import AlbertClassifier, compat
    from tests.official_albert.modeling.test_encoder import make_inputs, tiny_config

    strategy = distribute.get_distribution_strategy("mirrored", devices=devices)
    with strategy.scope():
      keras.utils.set_random_seed(1)
      model = AlbertClassifier(tiny_config(hidden_dropout_prob=0.3, attention_probs_dropout_prob=0.1),
                               num_labels=2, dropout_rate=0.1)
      model(make_inputs(batch=1))
    states = compat.seed_generator_states(model)
    row = make_inputs(batch=1)

    @tf.function
    def step(x):  # the same example on both replicas, as Trainer.next_replica_batches feeds a repeated row
      dist = strategy.experimental_distribute_values_from_function(lambda ctx: x)
      return strategy.experimental_local_results(strategy.run(lambda b: model(b, training=True)["logits"], (dist,)))

    steps = []
    for _ in range(2):
      steps.append([t.numpy().tolist() for t in step(row)])
    # Rewinding the one seed state replays the same masks on each replica (what a resume and GradCache rely on).
    saved = [s.numpy() for s in states]
    again = [t.numpy().tolist() for t in step(row)]
    for s, v in zip(states, saved):
      s.assign(v)
    replayed = [t.numpy().tolist() for t in step(row)]
    copies = [[c.numpy().tolist() for c in strategy.experimental_local_results(s.value)] for s in states]
    print("RESULT" + json.dumps({"steps": steps, "again": again, "replayed": replayed, "copies": copies}))
""")


@pytest.mark.slow
def test_two_replicas_draw_different_masks_for_the_same_example():
  result = script_result(_REPLICAS_SCRIPT)
  for replica0, replica1 in result["steps"]:
    assert not np.allclose(replica0, replica1), "both replicas drew the same dropout masks"
  assert not np.allclose(result["steps"][0][0], result["steps"][1][0])  # and the masks move from step to step
  np.testing.assert_array_equal(result["replayed"], result["again"])
  assert result["copies"] and all(len(c) == 2 for c in result["copies"])
  for copies in result["copies"]:  # the mirrored seed state stays one value: one checkpointed variable
    assert all(c == copies[0] for c in copies), copies
