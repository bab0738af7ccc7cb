"""Guards of the optimizers and the training loop: a non-finite gradient norm is not applied and stops training,
schedule arguments are not dropped silently, Keras' `exclude_from_weight_decay` method works, and skip-resume under
mixed_float16 warns that it is approximate.
"""

import glob
import logging
import os
import pathlib
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from official_albert.training import optimization
from official_albert.training import train_lib
from tests.official_albert.training.test_distribute import script_result
from tests.official_albert.training.test_train_lib import tiny_params

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]


def _two_variables():
  return (keras.Variable(np.ones(3, np.float32), name="kernel"),
          keras.Variable(np.ones(3, np.float32), name="other_kernel"))


@pytest.mark.parametrize("name", ["lamb", "adamw"])
def test_non_finite_gradient_norm_step_is_not_applied(name):
  a, b = _two_variables()
  opt = optimization.create_optimizer(name, 1e-2)  # constant lr, clip 1.0
  opt.build([a, b])
  for bad in (np.inf, np.nan):
    opt.apply([tf.constant([bad, 0.0, 0.0]), tf.constant([1.0, 1.0, 1.0])], [a, b])
    assert int(opt.iterations.numpy()) == 0
    assert not np.isfinite(float(opt.global_norm))  # recorded, for the trainer to stop on
    np.testing.assert_array_equal(a.numpy(), np.ones(3))
    np.testing.assert_array_equal(b.numpy(), np.ones(3))  # its gradient was finite: still not applied
    for slot in opt.slot_variables().values():
      np.testing.assert_array_equal(slot.numpy(), 0.0)
  # The next finite step is applied exactly as on a fresh optimizer.
  ref_a, ref_b = _two_variables()
  ref = optimization.create_optimizer(name, 1e-2)
  grads = [tf.constant([3.0, 0.0, 0.0]), tf.constant([1.0, 1.0, 1.0])]
  opt.apply(grads, [a, b])
  ref.apply(grads, [ref_a, ref_b])
  assert int(opt.iterations.numpy()) == 1
  np.testing.assert_array_equal(a.numpy(), ref_a.numpy())
  np.testing.assert_array_equal(b.numpy(), ref_b.numpy())
  assert not np.array_equal(a.numpy(), np.ones(3))


def test_non_finite_gradient_step_skipped_inside_tf_function_without_clip():
  a, b = _two_variables()
  opt = optimization.create_optimizer("lamb", 1e-2, clip_norm=None)
  opt.build([a, b])
  step = tf.function(lambda g: opt.apply([g, tf.ones(3)], [a, b]))
  step(tf.constant([0.0, np.nan, 0.0]))
  assert int(opt.iterations.numpy()) == 0
  np.testing.assert_array_equal(b.numpy(), np.ones(3))
  step(tf.constant([0.0, 1.0, 0.0]))
  assert int(opt.iterations.numpy()) == 1 and not np.array_equal(b.numpy(), np.ones(3))


# Logical devices must be configured before TensorFlow initialises them: a child process.
_MIRRORED_SCRIPT = textwrap.dedent("""
    import json, os
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import numpy as np, tensorflow as tf, keras
    from official_albert.training import distribute, optimization

    devices = distribute.configure_logical_cpus(2)
    strategy = distribute.get_distribution_strategy("mirrored", devices=devices)
    with strategy.scope():
      w = keras.Variable(np.ones(3, np.float32), name="kernel")
      opt = optimization.create_optimizer("lamb", 1e-2)
      opt.build([w])

    @tf.function
    def step(bad):
      def replica_fn():
        # Only replica 1 sees an inf: after the all-reduce every replica's norm is inf.
        ctx = tf.distribute.get_replica_context()
        inf_here = tf.logical_and(bad, tf.equal(ctx.replica_id_in_sync_group, 1))
        g = tf.where(inf_here, tf.constant([np.inf, 0.0, 0.0]), tf.constant([1.0, 1.0, 1.0]))
        opt.apply([g], [w])
      strategy.run(replica_fn)

    step(tf.constant(True))
    after_bad = (int(opt.iterations.numpy()), w.numpy().tolist(), str(float(opt.global_norm)))
    step(tf.constant(False))
    print("RESULT" + json.dumps({"bad": after_bad, "good": (int(opt.iterations.numpy()), w.numpy().tolist())}))
""")


def test_non_finite_gradient_step_skipped_on_every_replica_under_mirrored():
  result = script_result(_MIRRORED_SCRIPT)
  assert result["bad"] == [0, [1.0, 1.0, 1.0], "inf"]
  iterations, weights = result["good"]
  assert iterations == 1 and np.all(np.isfinite(weights)) and weights != [1.0, 1.0, 1.0]


def test_inf_gradient_with_finite_loss_stops_training_and_keeps_good_checkpoints(tmp_path):
  import tasks.pretraining as pretraining

  class InfGradTask(pretraining.PretrainingTask):
    step_variable = None

    def build_losses(self, labels, model_outputs, aux_losses=None, denominators=None):
      loss = super().build_losses(labels, model_outputs, aux_losses, denominators)
      z = tf.reduce_sum(tf.cast(model_outputs["sop_logits"], tf.float32)) * 0.0
      # Optimizer step 2 (iterations == 1): the same finite loss, but d sqrt(z)/dz = inf at z = 0.
      return tf.cond(tf.equal(self.step_variable, 1), lambda: loss + tf.sqrt(z), lambda: loss)

  params = tiny_params(trainer={"steps_per_loop": 1, "checkpoint_interval": 1, "train_steps": 4})
  model_dir = str(tmp_path / "inf_grad")
  task = InfGradTask(params.task)
  trainer = train_lib.Trainer(params, model_dir, task=task)
  task.step_variable = trainer.global_step
  with pytest.raises(train_lib.NonFiniteLossError, match=r"gradient norm at step 2 .*not applied.*ckpt-1") as info:
    trainer.train()
  assert info.value.step == 2 and info.value.what == "gradient norm"
  assert trainer.step == 1
  prefixes = sorted({p.rsplit(".", 1)[0] for p in glob.glob(os.path.join(model_dir, "ckpt-*.index"))})
  assert prefixes and info.value.last_checkpoint == tf.train.latest_checkpoint(model_dir)
  for prefix in prefixes:
    reader = tf.train.load_checkpoint(prefix)
    for name, shape in tf.train.list_variables(prefix):
      value = reader.get_tensor(name)
      if shape and np.issubdtype(np.asarray(value).dtype, np.floating):
        assert np.all(np.isfinite(value)), (prefix, name)


@pytest.mark.parametrize("argument", [{"num_warmup_steps": 100}, {"start_warmup_step": 5}, {"poly_power": 0.5},
                                      {"clamp_before_warmup": False}])
def test_create_optimizer_refuses_schedule_arguments_without_num_train_steps(argument):
  (key, value), = argument.items()
  with pytest.raises(ValueError, match=rf"{key}={value!r} given without num_train_steps.*Pass num_train_steps"):
    optimization.create_optimizer("adamw", 2e-5, **argument)
  with pytest.raises(ValueError, match="without num_train_steps"):
    optimization.create_optimizer("lamb", 2e-5, num_train_steps=0, **argument)
  assert float(optimization.create_optimizer("adamw", 2e-5).learning_rate) == pytest.approx(2e-5)
  scheduled = optimization.create_optimizer("adamw", 2e-5, num_train_steps=1000, **argument)
  assert not isinstance(scheduled._learning_rate, float)


def test_exclude_from_weight_decay_method_adds_path_regexes_before_build():
  kernel = keras.Variable(np.ones(3, np.float32), name="kernel")
  scale = keras.Variable(np.ones(3, np.float32), name="scale")
  opt = optimization.create_optimizer("lamb", 1e-3)
  opt.exclude_from_weight_decay(var_names=["scale"])
  assert opt.get_config()["exclude_from_weight_decay"] == ["LayerNorm", "layer_norm", "bias", "scale"]
  with pytest.raises(ValueError, match="var_list is not supported.*var_names"):
    opt.exclude_from_weight_decay(var_list=[scale])
  opt.build([kernel, scale])
  assert opt.variable_decisions() == [("kernel", True, True), ("scale", False, False)]
  with pytest.raises(ValueError, match="already built.*constructor argument exclude_from_weight_decay"):
    opt.exclude_from_weight_decay(var_names=["kernel"])
  clone = optimization.LAMB.from_config(opt.get_config())
  assert clone.get_config()["exclude_from_weight_decay"] == ["LayerNorm", "layer_norm", "bias", "scale"]


def test_a_single_pattern_string_is_one_regex_not_its_letters():
  """`exclude_from_weight_decay="bias"` (method or constructor) made b, i, a, s patterns: nearly every variable lost
  weight decay (and LAMB's trust ratio, by the reference's fallback)."""
  table = keras.Variable(np.ones(3, np.float32), name="embeddings")  # (holds b, i and s)
  bias = keras.Variable(np.ones(3, np.float32), name="bias")
  opt = optimization.create_optimizer("lamb", 1e-3, exclude_from_weight_decay="bias")
  opt.build([table, bias])
  assert opt.variable_decisions() == [("embeddings", True, True), ("bias", False, False)]
  opt = optimization.create_optimizer("adamw", 1e-3, exclude_from_weight_decay=[])
  opt.exclude_from_weight_decay(var_names="bias")
  assert opt.get_config()["exclude_from_weight_decay"] == ["bias"]


def test_ema_with_overwrite_frequency_runs_in_a_tf_function():
  """`use_ema=True, ema_overwrite_frequency=N`: the overwrite's cond had a no_op branch against a None one and failed
  to trace in any tf.function."""
  a, b = _two_variables()
  opt = optimization.create_optimizer("adamw", 1e-1, use_ema=True, ema_momentum=0.5, ema_overwrite_frequency=3)
  opt.build([a, b])
  step = tf.function(lambda: opt.apply([tf.constant([1.0, 0.0, 0.0]), tf.constant([0.0, 1.0, 0.0])], [a, b]))
  for _ in range(3):
    step()
  assert int(opt.iterations.numpy()) == 3
  assert np.allclose(a.numpy(), opt._model_variables_moving_average[0].numpy())  # overwritten at step 3


def test_the_jax_loops_adamw_takes_kerass_exclude_method():
  from experiments import jax_loop
  kernel = keras.Variable(np.ones(3, np.float32), name="kernel")
  opt = jax_loop.albert_adamw_class()(1e-3)
  opt.exclude_from_weight_decay(var_names=["kernel"])
  opt.build([kernel])
  assert opt.decayed_paths() == []
  with pytest.raises(ValueError, match="before build"):
    opt.exclude_from_weight_decay(var_names=["x"])


def test_skip_resume_under_mixed_float16_warns_once(tmp_path, caplog):
  with caplog.at_level(logging.WARNING, logger="official_albert.training.trainer"):
    train_lib.Trainer(tiny_params(runtime={"input_resume": "skip", "mixed_precision_dtype": "mixed_float16"}),
                      str(tmp_path / "f16"))
  warnings = [r.getMessage() for r in caplog.records if "input_resume=skip" in r.getMessage()]
  assert len(warnings) == 1 and "approximately" in warnings[0] and "mixed_bfloat16" in warnings[0]
  caplog.clear()
  with caplog.at_level(logging.WARNING, logger="official_albert.training.trainer"):
    train_lib.Trainer(tiny_params(runtime={"input_resume": "skip", "mixed_precision_dtype": "mixed_bfloat16"}),
                      str(tmp_path / "bf16"))
    train_lib.Trainer(tiny_params(runtime={"mixed_precision_dtype": "mixed_float16"}), str(tmp_path / "iterator"))
  assert not [r for r in caplog.records if "input_resume=skip" in r.getMessage()]
