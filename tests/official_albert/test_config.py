"""AlbertConfig: presets, JSON formats (original / HF / native), validation."""

import json

import pytest

from official_albert import AlbertConfig, PRESETS

# albert_base_v2/albert_config.json as released (the keys the original tarball carries).
ORIGINAL_BASE_V2 = {
    "attention_probs_dropout_prob": 0, "hidden_act": "gelu", "hidden_dropout_prob": 0, "embedding_size": 128,
    "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 512,
    "num_attention_heads": 12, "num_hidden_layers": 12, "num_hidden_groups": 1, "net_structure_type": 0,
    "gap_size": 0, "num_memory_blocks": 0, "inner_group_num": 1, "down_scale_factor": 1, "type_vocab_size": 2,
    "vocab_size": 30000,
}


def _write(tmp_path, data, name="config.json"):
  path = tmp_path / name
  path.write_text(json.dumps(data))
  return str(path)


def test_presets_cover_all_sizes_and_versions():
  assert sorted(PRESETS) == sorted(f"albert-{s}-{v}" for s in ("base", "large", "xlarge", "xxlarge")
                                   for v in ("v1", "v2"))
  for name in PRESETS:
    config = AlbertConfig.from_preset(name)
    assert config.hidden_act == "gelu_new"
    assert config.embedding_size == 128 and config.vocab_size == 30000 and config.layer_norm_eps == 1e-12
    expected_dropout = 0.1 if name.endswith("v1") and "xxlarge" not in name else 0.0
    assert config.hidden_dropout_prob == expected_dropout
    assert config.attention_probs_dropout_prob == expected_dropout
  large = AlbertConfig.from_preset("albert_large_v2")
  assert (large.hidden_size, large.num_hidden_layers, large.num_attention_heads, large.intermediate_size) == (
      1024, 24, 16, 4096)


def test_unknown_preset_suggests_a_name():
  with pytest.raises(ValueError, match="albert-base-v2"):
    AlbertConfig.from_preset("albert-bse-v2")


def test_original_config_file_maps_gelu_to_tanh_form(tmp_path):
  config = AlbertConfig.from_json_file(_write(tmp_path, ORIGINAL_BASE_V2))
  assert config == AlbertConfig.from_preset("albert-base-v2")
  assert config.hidden_act == "gelu_new"


def test_hf_config_file_loads_and_keeps_hf_gelu_semantics(tmp_path):
  transformers = pytest.importorskip("transformers")
  hf = transformers.AlbertConfig(vocab_size=30000, embedding_size=128, hidden_size=1024, num_hidden_layers=24,
                                 num_attention_heads=16, intermediate_size=4096, hidden_act="gelu_new")
  hf.save_pretrained(str(tmp_path))
  config = AlbertConfig.from_json_file(str(tmp_path / "config.json"))
  assert config == AlbertConfig.from_preset("albert-large-v2")
  hf_exact = transformers.AlbertConfig(hidden_act="gelu")
  hf_exact.save_pretrained(str(tmp_path / "exact"))
  assert AlbertConfig.from_json_file(str(tmp_path / "exact" / "config.json")).hidden_act == "gelu"


def test_native_round_trip(tmp_path):
  config = AlbertConfig(vocab_size=123, hidden_size=64, num_attention_heads=4, num_hidden_layers=4,
                        num_hidden_groups=2, inner_group_num=2, intermediate_size=99, hidden_act="relu",
                        sharing="all")
  path = str(tmp_path / "config.json")
  config.to_json_file(path)
  assert AlbertConfig.from_json_file(path) == config
  assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name], "atomic write left a temp file"


def test_typo_key_is_reported_with_suggestion(tmp_path):
  data = dict(ORIGINAL_BASE_V2, num_hiden_layers=3)
  path = _write(tmp_path, data)
  with pytest.raises(ValueError, match=r"num_hiden_layers.*did you mean 'num_hidden_layers'"):
    AlbertConfig.from_json_file(path)
  relaxed = AlbertConfig.from_json_file(path, strict=False)
  assert relaxed.num_hidden_layers == 12


def test_invalid_json_names_the_line(tmp_path):
  path = tmp_path / "config.json"
  path.write_text('{\n  "vocab_size": 10,\n  oops\n}')
  with pytest.raises(ValueError, match=r"config.json:3"):
    AlbertConfig.from_json_file(str(path))


def test_missing_file():
  with pytest.raises(FileNotFoundError):
    AlbertConfig.from_json_file("/nonexistent/config.json")


@pytest.mark.parametrize("changes, message", [
    (dict(hidden_size=100, num_attention_heads=12), "not divisible by num_attention_heads"),
    (dict(num_hidden_layers=12, num_hidden_groups=5), "not divisible by num_hidden_groups"),
    (dict(num_hidden_layers=2, num_hidden_groups=3), "exceeds num_hidden_layers"),
    (dict(hidden_act="swishy"), "hidden_act"),
    (dict(vocab_size=0), "vocab_size"),
    (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
    (dict(sharing="some"), "sharing"),
    (dict(sharing="ffn", num_hidden_groups=2), "needs num_hidden_groups == 1"),
    (dict(position_embedding_type="relative_key"), "position_embedding_type"),
])
def test_invalid_combinations_raise(changes, message):
  with pytest.raises(ValueError, match=message):
    AlbertConfig(**changes)


def test_group_routing_matches_reference_formula():
  config = AlbertConfig(num_hidden_layers=12, num_hidden_groups=3)
  assert [config.group_of_layer(l) for l in range(12)] == [int(l / 12 * 3) for l in range(12)]
  assert [config.group_of_layer(l) for l in range(12)] == [0] * 4 + [1] * 4 + [2] * 4


def test_hf_dict_export():
  data = AlbertConfig.from_preset("albert-base-v2").to_hf_dict()
  assert data["model_type"] == "albert" and data["hidden_act"] == "gelu_new"
  assert "sharing" not in data
  with pytest.raises(ValueError, match="sharing"):
    AlbertConfig(sharing="none").to_hf_dict()
