"""KerasHub ALBERT presets in and out: `AlbertBackbone`, `AlbertTextClassifier` and `AlbertMaskedLM` folders.

A preset folder (`save_to_preset`) holds the backbone's `config.json` + `model.weights.h5`, for a task also
`task.json` + `task.weights.h5` (its head only), and the tokenizer (`tokenizer.json`, the SentencePiece model as
`assets/tokenizer/vocabulary.spm`). The weights files are Keras 3's HDF5 layout: one `vars` group per layer, holding
the layer's variables as datasets `0`, `1`, ... in creation order, with the layer's name as the group's `name`
attribute. Reading walks those groups with h5py (no keras_hub, no TensorFlow), so a variable's name is its Keras
path (`group_0_inner_layer_0/self_attention_layer/query/kernel`), and `KERAS_HUB_TABLE` maps each path to our TF1
name with its layout: KerasHub keeps attention kernels per head ([H, N, D], [N, D, H]) where the checkpoint has
[H, H], and the classifier's [H, C] kernel where ours is [C, H]. Writing builds KerasHub's own classes (the optional
extra requirements-keras-hub.txt), assigns every variable through the same table and calls their `save_to_preset`,
so the folder is whatever the installed KerasHub writes and reads.

What KerasHub cannot express is refused by name, never silently changed: another activation than the tanh GELU, a
LayerNorm epsilon other than 1e-12, partial sharing, groups that do not divide the layers, an attention type other
than dense (or chunked, which computes the same function), the heads it has no class for and a classifier's exit
heads. The task record's rules (task.json: which head, how many classes, `activation="sigmoid"` for multi-label, ours
written so and read so) are keras_hub_task's. KerasHub always has the E→H projection: with E == H ours has none,
so an identity projection is written, and read back only if it is one. Our full config travels beside the preset
(`official_albert_config.json`), so fields KerasHub has no key for (initializer range, the two dropout rates, token
ids, fields this code does not know) come back unchanged.
KerasHub's `AlbertMaskedLM` has no SOP head (ours is left out and reported) and builds its MLM LayerNorm with
KerasHub's default epsilon 1e-5 instead of ALBERT's 1e-12: the weights convert exactly, the MLM logits differ by that.
A preset saved in bfloat16 (Keras stores those variables as opaque 2-byte values) is read widened to float32. Writing
into a folder that held another preset removes the preset files the new one does not have (a classifier's task.json
and head, its preprocessor), so the folder never pairs the new backbone with an old head.

Long because: reading (the HDF5 walk, the config, the E == H rule) and writing (building KerasHub's classes, the
refusals, the folder's files) share one variable table, and each half needs the other's rules to round-trip.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from typing import Dict, List, Optional, Tuple

import h5py
import numpy as np

from official_albert import file_io
from official_albert import model_directory as md
from official_albert.checkpoints.formats import widen_bfloat16
from official_albert.checkpoints.keras_hub_task import check_task_kind
from official_albert.checkpoints.keras_hub_task import KerasHubPresetError
from official_albert.checkpoints.keras_hub_task import MODEL_TYPE_TASKS
from official_albert.checkpoints.keras_hub_task import MULTI_LABEL_ACTIVATION
from official_albert.checkpoints.keras_hub_task import preset_model_type  # noqa: F401 (read from here by loading)
from official_albert.checkpoints.keras_hub_task import preset_num_labels  # noqa: F401 (read from here by loading)
from official_albert.checkpoints.keras_hub_task import preset_task
from official_albert.checkpoints.keras_hub_task import read_config_file
from official_albert.checkpoints.keras_hub_task import TASK_MODEL_TYPES  # noqa: F401 (importable from here as before)
from official_albert.checkpoints.names import EXIT_HEADS_SCOPE
from official_albert.checkpoints.names import tf1_variable_map
from official_albert.config import AlbertConfig
from official_albert.config import dense_equivalent

BACKBONE_CLASS = "AlbertBackbone"
# The attention types KerasHub computes (the exporter's `supports`): its TransformerEncoder has dense attention only.
supports = dense_equivalent
_KERAS_HUB_LAYER_NORM_EPS = 1e-12
_KERAS_HUB_MLM_LAYER_NORM_EPS = 1e-5

_BLOCK_KH = r"group_(?P<g>\d+)_inner_layer_(?P<i>\d+)"
_BLOCK_TF1 = "bert/encoder/transformer/group_{g}/inner_group_{i}"
_DENSE = r"(?P<leaf>kernel|bias)"
_NORM = r"(?P<leaf>gamma|beta)"
# (KerasHub variable path, TF1 name template, layout). Layouts: "same"; "heads_in": Q/K/V kernel [H,N,D] ↔ [H,H] and
# bias [N,D] ↔ [H]; "heads_out": output kernel [N,D,H] ↔ [H,H]; "transposed": [H,C] ↔ [C,H].
KERAS_HUB_TABLE: Tuple[Tuple[str, str, str], ...] = (
    ("token_embedding/embeddings", "bert/embeddings/word_embeddings", "same"),
    ("position_embedding/embeddings", "bert/embeddings/position_embeddings", "same"),
    ("segment_embedding/embeddings", "bert/embeddings/token_type_embeddings", "same"),
    (f"embeddings_layer_norm/{_NORM}", "bert/embeddings/LayerNorm/{leaf}", "same"),
    (f"embedding_projection/{_DENSE}", "bert/encoder/embedding_hidden_mapping_in/{leaf}", "same"),
    (f"{_BLOCK_KH}/self_attention_layer/(?P<p>query|key|value)/{_DENSE}",
     _BLOCK_TF1 + "/attention_1/self/{p}/{leaf}", "heads_in"),
    (f"{_BLOCK_KH}/self_attention_layer/attention_output/{_DENSE}", _BLOCK_TF1 + "/attention_1/output/dense/{leaf}",
     "heads_out"),
    (f"{_BLOCK_KH}/self_attention_layer_norm/{_NORM}", _BLOCK_TF1 + "/LayerNorm/{leaf}", "same"),
    (f"{_BLOCK_KH}/feedforward_intermediate_dense/{_DENSE}", _BLOCK_TF1 + "/ffn_1/intermediate/dense/{leaf}", "same"),
    (f"{_BLOCK_KH}/feedforward_output_dense/{_DENSE}", _BLOCK_TF1 + "/ffn_1/intermediate/output/dense/{leaf}",
     "same"),
    (f"{_BLOCK_KH}/feedforward_layer_norm/{_NORM}", _BLOCK_TF1 + "/LayerNorm_1/{leaf}", "same"),
    (f"pooled_dense/{_DENSE}", "bert/pooler/dense/{leaf}", "same"),
    ("logits/kernel", "output_weights", "transposed"),
    ("logits/bias", "output_bias", "same"),
    ("mlm_head/output_bias", "cls/predictions/output_bias", "same"),
    (f"mlm_head/intermediate_dense/{_DENSE}", "cls/predictions/transform/dense/{leaf}", "same"),
    (f"mlm_head/intermediate_layer_norm/{_NORM}", "cls/predictions/transform/LayerNorm/{leaf}", "same"),
)
_COMPILED = tuple((re.compile(pattern + "$"), template, layout) for pattern, template, layout in KERAS_HUB_TABLE)
_PROJECTION = "bert/encoder/embedding_hidden_mapping_in/"
# Keras layers whose variables are not (kernel, bias): leaf names in creation order (the h5 stores indices).
_LEAVES = {"token_embedding": ("embeddings",), "position_embedding": ("embeddings",),
           "segment_embedding": ("embeddings",), "mlm_head": ("output_bias",)}


def keras_hub_to_tf1(path: str) -> Tuple[str, str]:
  """KerasHub variable path → (TF1 name, layout). Raises KeyError for a path the table has no row for."""
  for pattern, template, layout in _COMPILED:
    match = pattern.match(path)
    if match:
      return template.format(**match.groupdict()), layout
  raise KeyError(path)


def _to_tf1_layout(value: np.ndarray, layout: str, path: str) -> np.ndarray:
  if layout == "heads_in":
    return value.reshape(value.shape[0], -1) if path.endswith("kernel") else value.reshape(-1)
  if layout == "heads_out":
    return value.reshape(-1, value.shape[-1]) if path.endswith("kernel") else value
  if layout == "transposed":
    return np.ascontiguousarray(value.T)
  return value


def _to_keras_hub_layout(value: np.ndarray, layout: str, shape) -> np.ndarray:
  if layout == "transposed":
    value = value.T
  return np.ascontiguousarray(value.reshape(shape))


# ---------------------------------------------------------------------------------------------------- read
def _read_weights_file(file_path: str) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
  """{Keras variable path: array} of a Keras 3 `.weights.h5`, and what was skipped (optimizer state) with reasons."""
  try:
    handle = h5py.File(file_path, "r")
  except OSError as e:
    raise KerasHubPresetError(f"{file_path}: not a readable HDF5 file ({e}); the preset is truncated or damaged, "
                              "save or download it again.") from None
  weights, skipped = {}, {}

  def walk(group, prefix: str, h5_path: str) -> None:
    """`prefix`: the Keras path of the layer that holds `group` ('' at the model's root)."""
    path = prefix
    if "vars" in group:
      layer = _layer_name(group["vars"])
      path = f"{prefix}/{layer}" if prefix else layer
      values = [group["vars"][k] for k in sorted(group["vars"], key=int)]
      leaves = _LEAVES.get(layer) or (("gamma", "beta") if "layer_norm" in layer else ("kernel", "bias"))
      if values and len(values) != len(leaves):
        raise KerasHubPresetError(f"{file_path}: layer {path!r} ({h5_path}) holds {len(values)} variables, expected "
                                  f"{len(leaves)} ({', '.join(leaves)}).")
      for leaf, dataset in zip(leaves, values):
        try:
          weights[f"{path}/{leaf}"] = _dataset_value(dataset)
        except OSError as e:
          raise KerasHubPresetError(f"{file_path}: variable {path}/{leaf} cannot be read ({e}); the file is "
                                    "truncated or damaged.") from None
    for key in group:
      if key != "vars" and isinstance(group[key], h5py.Group):
        walk(group[key], path, f"{h5_path}/{key}")

  with handle:
    if "vars" in handle and len(handle["vars"]):
      raise KerasHubPresetError(f"{file_path}: the model itself holds variables; not a KerasHub ALBERT preset.")
    for key in handle:  # the root's own name (albert_backbone, the task's name) is not part of variable paths
      if key == "vars" or not isinstance(handle[key], h5py.Group):
        continue
      if key == "optimizer":
        skipped[f"{os.path.basename(file_path)}:optimizer"] = "optimizer state, not a model weight"
      elif key != "preprocessor":
        walk(handle[key], "", key)
  return weights, skipped


def _layer_name(vars_group) -> str:
  """The Keras layer name a weights file's `vars` group records (its `name` attribute)."""
  name = vars_group.attrs.get("name", "")
  return name.decode() if isinstance(name, bytes) else str(name)


def preset_vocab_rows(directory: str) -> Optional[Tuple[int, str]]:
  """(rows of the token embedding, the file read) of a preset, from the HDF5 header (no weight is loaded); None
  without a weights file or a token embedding (fine-tuning's vocabulary check: a config that disagrees with it)."""
  weights_file = md.path(directory, md.KERAS_HUB_WEIGHTS_FILE)
  if not file_io.exists(weights_file):
    return None
  rows = []

  def visit(name: str, item) -> None:
    if (isinstance(item, h5py.Group) and name.split("/")[-1] == "vars" and "0" in item
        and _layer_name(item) == "token_embedding"):
      rows.append(int(item["0"].shape[0]))

  try:
    with h5py.File(weights_file, "r") as handle:
      handle.visititems(visit)
  except OSError as e:
    raise KerasHubPresetError(f"{weights_file}: not a readable HDF5 file ({e}); the preset is truncated or damaged, "
                              "save or download it again.") from None
  return (rows[0], weights_file) if rows else None


def _dataset_value(dataset) -> np.ndarray:
  """A variable's value; bfloat16 (stored by Keras as opaque 2-byte values with attribute dtype='bfloat16', which
  numpy cannot convert) is widened to float32 exactly: its 16 bits are the high half of a float32."""
  dtype = dataset.attrs.get("dtype", "")
  if (dtype.decode() if isinstance(dtype, bytes) else str(dtype)) == "bfloat16":
    return widen_bfloat16(np.asarray(dataset))
  return np.asarray(dataset)


def preset_config(directory: str) -> AlbertConfig:
  """The AlbertConfig of a preset: KerasHub's keys, the rest from `official_albert_config.json` when we wrote it."""
  config_file = md.path(directory, md.CONFIG_FILE)
  kh = read_config_file(config_file, (BACKBONE_CLASS,))["config"]
  try:
    fields = dict(vocab_size=kh["vocabulary_size"], num_hidden_layers=kh["num_layers"],
                  num_attention_heads=kh["num_heads"], embedding_size=kh["embedding_dim"],
                  hidden_size=kh["hidden_dim"], intermediate_size=kh["intermediate_dim"],
                  num_hidden_groups=kh.get("num_groups", 1), inner_group_num=kh.get("num_inner_repetitions", 1),
                  max_position_embeddings=kh.get("max_sequence_length", 512),
                  type_vocab_size=kh.get("num_segments", 2))
  except KeyError as e:
    raise KerasHubPresetError(f"{config_file}: the AlbertBackbone config has no {e.args[0]!r}.") from None
  dropout = float(kh.get("dropout", 0.0))
  side_file = md.path(directory, md.KERAS_HUB_ALBERT_CONFIG_FILE)
  if file_io.exists(side_file):
    data = AlbertConfig.from_json_file(side_file).to_dict()
    if data["hidden_dropout_prob"] != dropout:  # KerasHub's one dropout rate was edited: it wins
      data.update(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
  else:
    data = dict(hidden_act="gelu_new", layer_norm_eps=_KERAS_HUB_LAYER_NORM_EPS, hidden_dropout_prob=dropout,
                attention_probs_dropout_prob=dropout)
    task = preset_task(directory)
    if task is not None and "dropout" in task.get("config", {}):
      data["classifier_dropout_prob"] = float(task["config"]["dropout"])
  data.update(fields)
  try:
    config = AlbertConfig.from_dict(data, source="native", origin=config_file)
  except ValueError as e:
    raise KerasHubPresetError(str(e)) from None
  moved = _rerouted_layers(config)
  if moved:  # (it loaded, and those layers ran another group's weights: other outputs, no error)
    raise KerasHubPresetError(f"{config_file}: num_layers={config.num_hidden_layers}, num_groups="
                              f"{config.num_hidden_groups}: layers {moved} run another group in KerasHub "
                              "(l // (L / G)) than ALBERT's routing here (int(l / L * G)), so the model would compute "
                              "other outputs; this preset cannot be read faithfully.")
  return config


def _rerouted_layers(config: AlbertConfig) -> List[int]:
  """The layers KerasHub's routing (l // (L / G)) gives another group than ours (int(l / L * G), the reference's):
  float rounding parts them at some L = G (22, 23, 26, 39, ...)."""
  if config.num_hidden_layers % config.num_hidden_groups:
    return []
  per_group = config.num_hidden_layers // config.num_hidden_groups
  return [l for l in range(config.num_hidden_layers) if config.group_of_layer(l) != l // per_group]


def read_preset_weights(directory: str, model_type: str, config: AlbertConfig
                        ) -> Tuple[Dict[str, np.ndarray], Dict[str, str], str]:
  """The preset's weights as {TF1 name: array in our layout}, what was skipped (with reasons) and the source name.

  The backbone's weights always; the task's when `model_type` has a head (a classifier's head is not read into an
  encoder: reported as skipped). A variable the table does not know raises, naming it, and so does a text
  classifier read as another classifier-style head (`keras_hub_task.check_task_kind`).
  """
  check_task_kind(directory, model_type)
  weights_file = md.path(directory, md.KERAS_HUB_WEIGHTS_FILE)
  if not file_io.exists(weights_file):
    sharded = md.path(directory, "model.weights.json")
    hint = (" (a sharded preset: load it with keras_hub and save it again with max_shard_size=None)"
            if file_io.exists(sharded) else "")
    raise FileNotFoundError(f"{directory}: no {md.KERAS_HUB_WEIGHTS_FILE}{hint}.")
  files = [weights_file]
  raw, skipped = _read_weights_file(weights_file)
  task_weights = md.path(directory, md.KERAS_HUB_TASK_WEIGHTS_FILE)
  if file_io.exists(task_weights):
    task_raw, task_skipped = _read_weights_file(task_weights)
    skipped.update(task_skipped)
    if model_type == "encoder":
      for path in task_raw:
        skipped[f"{md.KERAS_HUB_TASK_WEIGHTS_FILE}:{path}"] = "the task's head, not part of the encoder"
    else:
      raw.update(task_raw)
      files.append(task_weights)
  weights, unknown = {}, []
  for path, value in raw.items():
    try:
      tf1_name, layout = keras_hub_to_tf1(path)
    except KeyError:
      unknown.append(f"{path} {tuple(value.shape)}")
      continue
    weights[tf1_name] = _to_tf1_layout(np.asarray(value, dtype=np.float32), layout, path)
  source = " + ".join(files)
  if unknown:
    raise KerasHubPresetError(f"KerasHub preset {source}: {len(unknown)} variable(s) that no ALBERT model has:\n    "
                              + "\n    ".join(sorted(unknown)))
  if config.embedding_size == config.hidden_size:
    # Ours has no projection when E == H; KerasHub always has one. Only an identity projection is dropped.
    kernel, bias = weights.pop(_PROJECTION + "kernel", None), weights.pop(_PROJECTION + "bias", None)
    if kernel is not None and not (np.array_equal(kernel, np.eye(kernel.shape[0], dtype=kernel.dtype))
                                   and not np.any(bias)):
      raise KerasHubPresetError(
          f"KerasHub preset {source}: embedding_dim == hidden_dim ({config.hidden_size}) and the embedding projection "
          "is not the identity; ALBERT has no projection when E == H, so this model cannot be represented here.")
    if kernel is not None:
      skipped["embedding_projection"] = "identity (E == H: ALBERT has no projection)"
  return weights, skipped, source


# --------------------------------------------------------------------------------------------------- write
def check_expressible(config: AlbertConfig, model_type: str) -> None:
  """Raises KerasHubPresetError naming what a KerasHub preset cannot hold (and what to do instead)."""
  problems = []
  if model_type not in MODEL_TYPE_TASKS:
    problems.append(f"--model_type={model_type}: KerasHub has no ALBERT class for it (it has AlbertBackbone, "
                    "AlbertTextClassifier and AlbertMaskedLM: --model_type=encoder, classifier or pretrainer)")
  if config.hidden_act != "gelu_new":
    problems.append(f"hidden_act={config.hidden_act!r}: KerasHub's AlbertBackbone always uses the tanh GELU")
  if config.layer_norm_eps != _KERAS_HUB_LAYER_NORM_EPS:
    problems.append(f"layer_norm_eps={config.layer_norm_eps}: KerasHub's AlbertBackbone always uses 1e-12")
  if config.sharing != "all":
    problems.append(f"sharing={config.sharing!r}: KerasHub shares whole blocks per group only")
  if config.num_hidden_layers % config.num_hidden_groups:
    problems.append(f"num_hidden_layers={config.num_hidden_layers} is not divisible by num_hidden_groups="
                    f"{config.num_hidden_groups}: KerasHub's AlbertBackbone requires it")
  else:
    moved = _rerouted_layers(config)
    if moved:
      problems.append(f"layers {moved} run another group in KerasHub (l // (L / G)) than here (int(l / L * G))")
  if not supports(config.attention_type):
    problems.append(f"attention_type={config.attention_type!r}: KerasHub's TransformerEncoder computes dense attention "
                    "only (convert to native or hf, which keep the attention settings)")
  if problems:
    raise KerasHubPresetError("A KerasHub preset cannot hold this model:\n  " + "\n  ".join(problems))


def keras_hub_backbone_config(config: AlbertConfig) -> Dict[str, object]:
  return dict(vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
              num_heads=config.num_attention_heads, embedding_dim=config.embedding_size,
              hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
              num_groups=config.num_hidden_groups, num_inner_repetitions=config.inner_group_num,
              dropout=config.hidden_dropout_prob, max_sequence_length=config.max_position_embeddings,
              num_segments=config.type_vocab_size)


def import_keras_hub():
  """The keras_hub module (writing a preset builds its classes), or an ImportError naming the extra to install."""
  try:
    import keras_hub  # noqa: PLC0415 (optional extra)
  except ImportError:
    raise ImportError("--output_format=keras_hub builds KerasHub's own classes to save the preset: install the "
                      "optional extra with `pip install -r requirements-keras-hub.txt` (or "
                      "'official-albert[keras-hub]'). Reading presets needs only h5py.") from None
  return keras_hub


def check_no_exit_heads(model) -> None:
  """Refuses a model with exit heads (early exit): KerasHub's AlbertTextClassifier has one head, and a preset without
  them would answer otherwise than the model serves."""
  exits = sorted({name.split("/")[1] for name in tf1_variable_map(model) if name.startswith(EXIT_HEADS_SCOPE + "/")})
  if exits:
    raise KerasHubPresetError(
        f"A KerasHub preset cannot hold this model's {len(exits)} exit heads ({', '.join(exits)}): KerasHub's "
        "AlbertTextClassifier has one head. Convert to --output_format=native or hf (which keep them), or drop the "
        "exit heads first (loading.load_model(DIR, 'classifier', exit_heads=False), save_pretrained it) and convert "
        "that folder.")


def build_keras_hub_model(model, model_type: str, spm_model: Optional[str] = None, multi_label: bool = False):
  """KerasHub's model for `model` (weights assigned through `KERAS_HUB_TABLE`); returns (task or backbone, excluded).

  `excluded` names our variables KerasHub has no place for (the SOP head), with the reason. A multi-label classifier
  (labels.json's multi_label) gets KerasHub's record of it, `activation="sigmoid"`. Nothing is written: a conversion
  builds this before it touches the output folder, so whatever the preset cannot hold is refused first.
  """
  config = model.config
  check_expressible(config, model_type)
  check_no_exit_heads(model)
  keras_hub = import_keras_hub()
  backbone = keras_hub.models.AlbertBackbone(**keras_hub_backbone_config(config))
  tokenizer = keras_hub.models.AlbertTokenizer(proto=spm_model) if spm_model else None
  sequence_length = min(512, config.max_position_embeddings)
  task_class = MODEL_TYPE_TASKS[model_type]
  if task_class == "AlbertTextClassifier":
    preprocessor = (keras_hub.models.AlbertTextClassifierPreprocessor(tokenizer, sequence_length=sequence_length)
                    if tokenizer else None)
    keras_model = keras_hub.models.AlbertTextClassifier(
        backbone, num_classes=model.num_labels, dropout=model.dropout_rate, preprocessor=preprocessor,
        activation=MULTI_LABEL_ACTIVATION if multi_label and model.num_labels > 1 else None)
  elif task_class == "AlbertMaskedLM":
    preprocessor = (keras_hub.models.AlbertMaskedLMPreprocessor(tokenizer, sequence_length=sequence_length)
                    if tokenizer else None)
    keras_model = keras_hub.models.AlbertMaskedLM(backbone, preprocessor=preprocessor)
  else:
    keras_model = backbone
  ours = {name: variable for name, variable in tf1_variable_map(model).items()}
  used, missing = set(), []
  for variable in keras_model.weights:
    try:
      tf1_name, layout = keras_hub_to_tf1(variable.path)
    except KeyError:
      missing.append(variable.path)
      continue
    if tf1_name in ours:
      value = np.asarray(ours[tf1_name].numpy(), dtype=np.float32)
      used.add(tf1_name)
    elif tf1_name.startswith(_PROJECTION) and config.embedding_size == config.hidden_size:
      value = np.eye(config.hidden_size, dtype=np.float32) if tf1_name.endswith("kernel") else np.zeros(
          config.hidden_size, np.float32)
    else:
      missing.append(f"{variable.path} (= {tf1_name})")
      continue
    variable.assign(_to_keras_hub_layout(value, layout, tuple(variable.shape)))
  if missing:
    raise KerasHubPresetError("KerasHub variables with no value in this model:\n    " + "\n    ".join(missing))
  excluded = {name: "KerasHub's AlbertMaskedLM has no sentence-order head" for name in ours if name not in used}
  unexplained = [n for n in excluded if not n.startswith("cls/seq_relationship/")]
  if unexplained:
    raise KerasHubPresetError(f"Weights of this {model_type} that KerasHub's classes have no place for: {unexplained}")
  return keras_model, excluded


def write_keras_hub(model, model_type: str, output_dir: str, spm_model: Optional[str] = None,
                    multi_label: bool = False, built=None) -> Dict[str, object]:
  """Writes a KerasHub preset folder for `model` (+ `official_albert_config.json`); returns the written summary.

  The preset is saved by KerasHub into a temporary folder beside `output_dir`, then each file is copied in
  atomically, the weights first and `config.json` (what format detection reads) last. `built`: what
  `build_keras_hub_model` returned for `model` (a conversion builds it before it clears the output folder).
  """
  keras_model, excluded = built or build_keras_hub_model(model, model_type, spm_model, multi_label)
  if model_type == "pretrainer":
    excluded["cls/predictions/transform/LayerNorm (epsilon)"] = (
        f"KerasHub's AlbertMaskedLM normalizes with epsilon {_KERAS_HUB_MLM_LAYER_NORM_EPS} (ALBERT: "
        f"{model.config.layer_norm_eps}); weights are exact, MLM logits differ by that")
  parent = os.path.dirname(os.path.abspath(output_dir)) if file_io.is_local(output_dir) else None
  if parent:
    os.makedirs(parent, exist_ok=True)
  staging = tempfile.mkdtemp(prefix=".keras_hub-", dir=parent)
  try:
    keras_model.save_to_preset(staging)
    if spm_model and model_type == "encoder":
      keras_model_tokenizer = import_keras_hub().models.AlbertTokenizer(proto=spm_model)
      keras_model_tokenizer.save_to_preset(staging)
    AlbertConfig.to_json_file(model.config, os.path.join(staging, md.KERAS_HUB_ALBERT_CONFIG_FILE))
    files = []
    for root, _, names in os.walk(staging):
      files += [os.path.relpath(os.path.join(root, n), staging) for n in names]
    files.sort(key=lambda f: (f == md.CONFIG_FILE, f))
    for relative in files:
      file_io.atomic_copy(os.path.join(staging, relative), md.path(output_dir, relative))
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  removed = _remove_stale_preset_files(output_dir, files)
  names = {v.path for v in keras_model.weights}
  return {"written": len(names), "written_parameters": int(sum(int(np.prod(v.shape)) for v in keras_model.weights)),
          "excluded": excluded, "files": files, "removed": removed}


# The files a KerasHub ALBERT preset (and this writer) may hold. The tokenizer asset (md.KERAS_HUB_SPM_FILE) is not
# among them: SentencePiece lookup finds it after any later conversion too, so convert.remove_stale_side_files, the
# one place, removes it (and its folders) after every conversion that does not write it, a preset's included.
PRESET_FILES = (md.KERAS_HUB_WEIGHTS_FILE, md.KERAS_HUB_TASK_FILE, md.KERAS_HUB_TASK_WEIGHTS_FILE,
                 md.KERAS_HUB_TOKENIZER_FILE, md.KERAS_HUB_PREPROCESSOR_FILE, md.KERAS_HUB_METADATA_FILE,
                 md.KERAS_HUB_ALBERT_CONFIG_FILE)


def _remove_stale_preset_files(output_dir: str, written) -> list:
  """Removes the preset files of a previous preset in `output_dir` that this one does not have (an encoder written
  over a classifier preset would otherwise read back as the classifier, with the old head); returns them."""
  removed = [name for name in PRESET_FILES
             if name not in written and file_io.exists(md.path(output_dir, name))]
  for name in removed:
    file_io.remove(md.path(output_dir, name))
  return removed
