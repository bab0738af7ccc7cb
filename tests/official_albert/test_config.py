"""AlbertConfig: presets, JSON formats (original / HF / native), validation."""

import json
import re

import pytest

from official_albert import AlbertConfig
from official_albert import PRESETS

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
  with pytest.raises(ValueError, match=r"config.json: the model configuration is not valid JSON: .* at line 3, "
                                       r"column 3"):
    AlbertConfig.from_json_file(str(path))


def test_missing_file():
  with pytest.raises(FileNotFoundError):
    AlbertConfig.from_json_file("/nonexistent/config.json")


@pytest.mark.parametrize("changes, message", [
    (dict(hidden_size=100, num_attention_heads=12), "not divisible by num_attention_heads"),
    (dict(num_hidden_layers=2, num_hidden_groups=3), r"exceeds num_hidden_layers \(2\).*group\(s\) 2 would never "
     r"run. Set num_hidden_groups to at most 2"),
    (dict(num_hidden_layers=3, num_hidden_groups=5), r"group\(s\) 3, 4 would never run"),
    (dict(num_hidden_groups=0), "num_hidden_groups must be a positive integer"),
    (dict(hidden_act="swishy"), "hidden_act"),
    (dict(vocab_size=0), "vocab_size"),
    (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
    (dict(sharing="some"), "sharing"),
    (dict(sharing="ffn", num_hidden_groups=2), "needs num_hidden_groups == 1"),
    (dict(position_embedding_type="relative_key"), "position_embedding_type"),
    (dict(classifier_dropout_prob=None), "classifier_dropout_prob must be a number, got None"),
    (dict(attention_probs_dropout_prob="0.1"), "attention_probs_dropout_prob must be a number, got '0.1'"),
    (dict(layer_norm_eps=None), "layer_norm_eps must be a number"),
])
def test_invalid_combinations_raise(changes, message):
  with pytest.raises(ValueError, match=message):
    AlbertConfig(**changes)


@pytest.mark.parametrize("key, value, message", [
    ("block_sparse_layout_blocks", "8", "block_sparse_layout_blocks must be null .* or a positive integer, got '8'"),
    ("block_sparse_layout_blocks", -3, "block_sparse_layout_blocks must be null .* or a positive integer, got -3"),
    ("down_scale_factor", "1", "down_scale_factor must be an integer >= 0, got '1'"),
    ("gap_size", -1, "gap_size must be an integer >= 0, got -1"),
    ("net_structure_type", True, "net_structure_type must be an integer >= 0, got True"),
    ("pad_token_id", "0", "pad_token_id must be null or an integer >= 0, got '0'"),
    ("layers_to_keep", [0, "1"], r"layers_to_keep must be a list of integers >= 0, got \[0, '1'\]"),
])
def test_integer_fields_from_a_file_are_type_checked_naming_the_file_and_key(tmp_path, key, value, message):
  """(block_sparse_layout_blocks "8" reached block_sparse_attention; the original release's keys were never checked.)"""
  path = _write(tmp_path, {**ORIGINAL_BASE_V2, "attention_type": "block_sparse", key: value})
  with pytest.raises(ValueError, match=f"^{re.escape(path)}: AlbertConfig.{message}"):
    AlbertConfig.from_json_file(path)
  assert AlbertConfig(pad_token_id=None, block_sparse_layout_blocks=8).block_sparse_layout_blocks == 8


# A minimal config.json as transformers writes it (its bookkeeping keys mark it as HF).
_HF_TINY = {"model_type": "albert", "architectures": ["AlbertForTokenClassification"], "vocab_size": 97,
            "embedding_size": 16, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
            "num_hidden_layers": 2, "hidden_dropout_prob": 0.2}


@pytest.mark.parametrize("key, value", [("output_past", True), ("_num_labels", 2), ("xla_device", False),
                                        ("quantization_config", {"quant_method": "bitsandbytes"}),
                                        ("_attn_implementation", "eager")])
def test_hf_config_keys_of_older_transformers_are_dropped(tmp_path, key, value):
  """transformers loads configs with these keys, so they must not need strict=False (no caller can pass it)."""
  config = AlbertConfig.from_json_file(_write(tmp_path, dict(_HF_TINY, **{key: value})))
  assert config.hidden_size == 32


def test_hf_config_still_refuses_near_misses_of_real_fields(tmp_path):
  with pytest.raises(ValueError, match=r"'hiden_size' \(did you mean 'hidden_size'\?\)"):
    AlbertConfig.from_json_file(_write(tmp_path, dict(_HF_TINY, hiden_size=32)))


def test_hf_classifier_dropout_null_means_hidden_dropout(tmp_path):
  """transformers reads classifier_dropout_prob: null as "use hidden_dropout_prob"; a null elsewhere is named."""
  config = AlbertConfig.from_json_file(_write(tmp_path, dict(_HF_TINY, classifier_dropout_prob=None)))
  assert config.classifier_dropout_prob == 0.2
  native = dict(AlbertConfig().to_dict(), classifier_dropout_prob=None, official_albert_format_version=1)
  path = _write(tmp_path, native, name="native.json")
  with pytest.raises(ValueError, match=r"native.json: AlbertConfig.classifier_dropout_prob must be a number"):
    AlbertConfig.from_json_file(path)


def test_group_routing_matches_reference_formula():
  config = AlbertConfig(num_hidden_layers=12, num_hidden_groups=3)
  assert [config.group_of_layer(l) for l in range(12)] == [int(l / 12 * 3) for l in range(12)]
  assert [config.group_of_layer(l) for l in range(12)] == [0] * 4 + [1] * 4 + [2] * 4


# Tables written out by hand (not computed with the formula under test): `l % G`, `round(l·G/L)`, `ceil(l·G/L)`,
# `l // (L // G)` or HF's `int(l / (L / G))` each get at least one of them wrong.
UNEVEN_ROUTING = {
    (5, 2): [0, 0, 0, 1, 1],
    (7, 3): [0, 0, 0, 1, 1, 2, 2],
    (12, 5): [0, 0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4],
    (4, 3): [0, 0, 1, 2],
    (22, 22): list(range(15)) + [14] + list(range(16, 22)),  # the reference's float rounding: layer 15 -> group 14
    (18, 14): [0, 0, 1, 2, 3, 3, 4, 5, 6, 7, 7, 8, 9, 10, 10, 11, 12, 13],  # HF: layer 9 -> group 6
}


@pytest.mark.parametrize("layers, groups", sorted(UNEVEN_ROUTING))
def test_group_routing_when_groups_do_not_divide_layers(layers, groups):
  """Any G <= L is accepted (issue 12: G ∤ L was rejected) and routed by the reference's int(l / L * G)."""
  config = AlbertConfig(num_hidden_layers=layers, num_hidden_groups=groups)
  assert [config.group_of_layer(l) for l in range(layers)] == UNEVEN_ROUTING[layers, groups]


def test_every_group_count_up_to_the_layer_count_is_accepted():
  for layers in range(1, 25):
    for groups in range(1, layers + 1):
      config = AlbertConfig(num_hidden_layers=layers, num_hidden_groups=groups)
      routing = [config.group_of_layer(l) for l in range(layers)]
      assert routing == sorted(routing) and routing[0] == 0 and routing[-1] <= groups - 1  # contiguous, in order
      assert set(routing) == set(range(groups)) - set(config.unused_groups())
  with pytest.raises(IndexError, match="outside 0..4"):
    AlbertConfig(num_hidden_layers=5, num_hidden_groups=2).group_of_layer(5)


def test_unused_groups_and_hf_routing_differences():
  assert AlbertConfig(num_hidden_layers=22, num_hidden_groups=22).unused_groups() == [15]
  assert AlbertConfig(num_hidden_layers=5, num_hidden_groups=2).unused_groups() == []
  assert AlbertConfig(num_hidden_layers=5, num_hidden_groups=2).hf_routing_differences() == []
  odd = AlbertConfig(num_hidden_layers=18, num_hidden_groups=14)
  assert odd.hf_routing_differences() == [(9, 7, 6)]
  # Converting such a model to or from HF would silently change its outputs, so both directions refuse.
  with pytest.raises(ValueError, match=r"HF export: num_hidden_layers=18, num_hidden_groups=14 .*layer 9: group 7 "
                                       r"here, 6 in HF"):
    odd.to_hf_dict()
  with pytest.raises(ValueError, match=r"hf/config.json: .*layer 9: group 7 here, 6 in HF.*Pick another"):
    AlbertConfig.from_dict({**AlbertConfig(num_hidden_layers=18).to_hf_dict(), "num_hidden_groups": 14},
                           origin="hf/config.json")
  uneven = AlbertConfig(num_hidden_layers=5, num_hidden_groups=2)
  assert AlbertConfig.from_dict(uneven.to_hf_dict()) == uneven  # routed alike by HF: converts both ways


def test_hf_dict_export():
  data = AlbertConfig.from_preset("albert-base-v2").to_hf_dict()
  assert data["model_type"] == "albert" and data["hidden_act"] == "gelu_new"
  assert "sharing" not in data
  with pytest.raises(ValueError, match="sharing"):
    AlbertConfig(sharing="none").to_hf_dict()
