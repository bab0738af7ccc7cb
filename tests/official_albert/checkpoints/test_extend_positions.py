"""A long model from a 512-style one: the position table extended by repeating its rows, from native, HF and TF1."""

import json
import os

from absl import flags
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import convert_checkpoint
from official_albert.checkpoints import convert as convert_lib
from official_albert.checkpoints import loading
from official_albert.checkpoints import tf1
from official_albert.checkpoints.extend import extend_model
from official_albert.checkpoints.extend import tiled_positions
from official_albert.checkpoints.names import tf1_variable_map
from official_albert.checkpoints.native import save_pretrained
from tests.official_albert.checkpoints.test_tf1_checkpoints import TINY
from tests.official_albert.checkpoints.test_tf1_checkpoints import write_tf1
from tests.official_albert.oracle import hf_config
from tests.official_albert.oracle import make_hf_model
from tests.official_albert.oracle import save_hf
from tests.official_albert.oracle import transformers

SMALL = dict(TINY, num_hidden_layers=2, num_hidden_groups=1, inner_group_num=1)
POSITIONS = "bert/embeddings/position_embeddings"


def test_tiled_positions_repeat_the_rows():
  table = np.arange(12, dtype=np.float32).reshape(4, 3)
  out = tiled_positions(table, 10)
  assert out.shape == (10, 3)
  np.testing.assert_array_equal(out[:4], table)
  np.testing.assert_array_equal(out[4:8], table)
  np.testing.assert_array_equal(out[8:], table[:2])


def _inputs(seq, seed=0):
  rng = np.random.default_rng(seed)
  mask = np.ones((2, seq), "int32")
  mask[1, seq - 5:] = 0
  return {"input_word_ids": rng.integers(5, 97, (2, seq)).astype("int32"), "input_mask": mask,
          "input_type_ids": np.zeros((2, seq), "int32")}


def _source(tmp_path, input_format):
  """A small pretrainer written in `input_format`; returns (path, {TF1 name: array})."""
  if input_format == "hf":
    model = make_hf_model("AlbertForPreTraining", hf_config(**SMALL), seed=3)
    path = save_hf(model, tmp_path / "hf")
    ours, _ = loading.load_model(path, "pretrainer")
  else:
    ours = loading.build_model("pretrainer", AlbertConfig(**SMALL))
    path = str(tmp_path / "native")
    save_pretrained(ours, path)
    if input_format == "tf1":
      release = tmp_path / "release"
      release.mkdir()
      path = write_tf1(release / "model.ckpt", {n: v.numpy() for n, v in tf1_variable_map(ours).items()})
      (release / "albert_config.json").write_text(json.dumps(tf1.original_config_dict(ours.config)))
  return path, {n: v.numpy() for n, v in tf1_variable_map(ours).items()}, ours


@pytest.mark.slow
@pytest.mark.parametrize("input_format", ["native", "hf", "tf1"])
def test_extend_to_native_keeps_every_weight_and_repeats_positions(tmp_path, input_format):
  path, before, source = _source(tmp_path, input_format)
  out = str(tmp_path / "long")
  summary = convert_lib.convert(input_format, path, "native", out, max_position_embeddings=200,
                                attention={"attention_type": "chunked", "key_chunk_size": 16})
  assert summary["extended"] == {"max_position_embeddings": [SMALL["max_position_embeddings"], 200],
                                 "attention_type": "chunked"}
  config = json.loads(open(os.path.join(out, "config.json")).read())
  assert config["max_position_embeddings"] == 200 and config["attention_type"] == "chunked"
  model, _ = loading.load_model(out, "pretrainer")
  after = {n: v.numpy() for n, v in tf1_variable_map(model).items()}
  assert sorted(after) == sorted(before)
  old_rows = SMALL["max_position_embeddings"]
  for name, value in after.items():
    if name == POSITIONS:
      assert value.shape[0] == 200
      for start in range(0, 200, old_rows):  # old rows bit for bit, at every offset
        rows = value[start:start + old_rows]
        assert rows.tobytes() == before[name][:len(rows)].tobytes()
    else:
      assert value.tobytes() == before[name].tobytes(), name
  # Chunked attention computes dense attention's function: the extended model = the source at the old lengths.
  inputs = _inputs(old_rows)
  np.testing.assert_allclose(model(inputs)["sequence_output"].numpy(), source(inputs)["sequence_output"].numpy(),
                             atol=1e-5)
  assert model(_inputs(180))["sequence_output"].shape == (2, 180, SMALL["hidden_size"])


def test_extend_to_hf_loads_in_transformers_with_the_longer_table(tmp_path):
  path, before, _ = _source(tmp_path, "native")
  convert_lib.convert("native", path, "hf", str(tmp_path / "hf_long"), max_position_embeddings=130)
  reloaded, info = transformers.AlbertForPreTraining.from_pretrained(str(tmp_path / "hf_long"),
                                                                     output_loading_info=True)
  assert {k: v for k, v in info.items() if v} == {}
  table = reloaded.albert.embeddings.position_embeddings.weight.detach().numpy()
  assert table.shape[0] == 130
  np.testing.assert_array_equal(table[:64], before[POSITIONS])
  np.testing.assert_array_equal(table[64:128], before[POSITIONS])


def test_extend_model_keeps_the_class_and_the_head():
  model = loading.build_model("classifier", AlbertConfig(**SMALL), num_labels=3)
  longer = extend_model(model, 128, {"attention_type": "block_sparse", "block_size": 8, "num_random_blocks": 1})
  assert type(longer) is type(model) and longer.config.attention_type == "block_sparse"
  assert longer(_inputs(100))["logits"].shape == (2, 3)


def test_binary_flags(tmp_path, capsys):
  path, _, _ = _source(tmp_path, "native")
  fv = flags.FlagValues()
  convert_checkpoint.define_flags(fv)
  fv(["convert", "--input_format=native", f"--input={path}", "--output_format=tf1", f"--output_dir={tmp_path / 'o'}",
      "--max_position_embeddings=256", "--attention_type=block_sparse", "--block_size=16", "--num_random_blocks=2"])
  convert_checkpoint.main([], fv)
  assert "positions 64 -> 256 (rows repeat the first 64), attention_type=block_sparse" in capsys.readouterr().out
  config = AlbertConfig.from_json_file(str(tmp_path / "o" / "albert_config.json"))
  assert (config.max_position_embeddings, config.attention_type, config.block_size, config.num_random_blocks) == (
      256, "block_sparse", 16, 2)


BLOCK_SPARSE = dict(SMALL, attention_type="block_sparse", block_size=4, num_random_blocks=1, block_sparse_seed=5)


def _layout_before_block_sparse_layout_blocks(num_blocks, heads, random_blocks, seed, layer, max_blocks):
  """The layout as every block_sparse model computed it before the table size could be recorded (frozen copy)."""
  priorities = np.random.default_rng([seed, layer]).random((heads, max_blocks, max_blocks), dtype=np.float32)
  priorities = priorities[:, 1:num_blocks - 1, :num_blocks]
  rows, cols = np.arange(1, num_blocks - 1)[:, None], np.arange(num_blocks)[None, :]
  allowed = (cols >= 1) & (cols <= num_blocks - 2) & (np.abs(cols - rows) > 1)
  priorities = np.where(allowed[None], priorities, -1.0)
  return np.argsort(-priorities, axis=-1, kind="stable")[..., :random_blocks].astype(np.int32)


@pytest.mark.parametrize("num_blocks", [8, 13, 16])
def test_an_unextended_block_sparse_model_keeps_its_layout(num_blocks):
  import tensorflow as tf

  from official_albert.modeling.layers import block_sparse_attention as bsa
  expected = _layout_before_block_sparse_layout_blocks(num_blocks, 3, 2, 5, 1, 16)
  np.testing.assert_array_equal(bsa.random_block_layout(num_blocks, 3, 2, 5, 1, 16), expected)
  graph = tf.function(lambda n: bsa.random_block_layout_in_graph(n, 3, 2, 5, 1, 16))(tf.constant(num_blocks))
  np.testing.assert_array_equal(graph.numpy(), expected)


def test_extended_block_sparse_model_computes_the_original_outputs_eager_and_in_the_graph():
  """The random layout does not change with the positions: extending (twice) keeps every output the original had."""
  import tensorflow as tf
  model = loading.build_model("encoder", AlbertConfig(**BLOCK_SPARSE))  # 64 positions: 16 blocks of 4
  longer = extend_model(model, 160)
  longest = extend_model(longer, 333)
  assert longer.config.block_sparse_layout_blocks == longest.config.block_sparse_layout_blocks == 16
  reloaded = type(longest).from_config(longest.get_config())
  assert reloaded.config.block_sparse_layout_blocks == 16

  def graph(encoder):
    spec = {k: tf.TensorSpec((None, None), tf.int32) for k in ("input_word_ids", "input_mask", "input_type_ids")}
    return tf.function(lambda x: encoder(x)["sequence_output"], input_signature=[spec])

  for seq in (64, 45):  # sparse (above the dense fallback at 28 tokens), a whole and a partial last block
    inputs = _inputs(seq, seed=seq)
    expected = model(inputs)["sequence_output"].numpy()
    expected_graph = graph(model)(inputs).numpy()
    for extended in (longer, longest):
      np.testing.assert_array_equal(extended(inputs)["sequence_output"].numpy(), expected)
      np.testing.assert_array_equal(graph(extended)(inputs).numpy(), expected_graph)
  assert longest(_inputs(300))["sequence_output"].shape == (2, 300, SMALL["hidden_size"])


def test_extension_cli_keeps_the_block_sparse_layout(tmp_path):
  source = loading.build_model("pretrainer", AlbertConfig(**BLOCK_SPARSE))
  save_pretrained(source, str(tmp_path / "src"))
  convert_lib.convert("native", str(tmp_path / "src"), "native", str(tmp_path / "long"), max_position_embeddings=128)
  assert json.loads((tmp_path / "long" / "config.json").read_text())["block_sparse_layout_blocks"] == 16
  model, _ = loading.load_model(str(tmp_path / "long"), "encoder")
  inputs = _inputs(60)
  np.testing.assert_array_equal(model(inputs)["sequence_output"].numpy(),
                                source.encoder(inputs)["sequence_output"].numpy())
