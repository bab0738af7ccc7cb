r"""The long-range task (`study.py` here) fine-tuned on Keras' JAX backend, for a GPU host without TensorFlow.

    # 1. where TensorFlow runs: the documents, their records and the model extended to 4,096 positions
    python -m experiments.projects.long_inputs.finetune_jax --stage=prepare --pretrained_dir=demo_out/model \
        --spm_model_file=demo_out/spm/spiece.model --output_dir=long_range_jax
    # 2. where JAX runs (keras, jax, numpy, absl-py, safetensors; no TensorFlow)
    python -m experiments.projects.long_inputs.finetune_jax --stage=finetune --output_dir=long_range_jax

`prepare` writes the same documents as `study` (same settings and seed), turns them into the
`text_classification` task's own records (`tasks.text.data.records`: `[CLS] text [SEP]`, cut at the sequence length)
at `--seq_length` and at the truncation length, and converts the pretrained model to an HF directory with its
position table tiled to the longer length (`checkpoints.extend`, Longformer's recipe) — `records.npz`,
`model/` and `settings.json`, small enough to copy to the accelerator host.

`finetune` runs each attention of the settings with the task model (`AlbertClassifier`, dropout 0 in the encoder and the
head as the TensorFlow run; until 2026-11-30 the encoder kept the pretrained config's) in `experiments.jax_loop`
(`jax.value_and_grad` of `stateless_call`), with the train binary's fine-tuning optimizer (its AdamW: no bias
correction, LayerNorm and biases not decayed, gradients clipped at global norm 1.0) and schedule (linear warmup over a
tenth of the steps from lr 0, then linear decay to 0 measured from step 0; results measured before 2026-11-30 used
Keras' bias-corrected AdamW, no clipping and a shifted schedule: the README says which), batches drawn in a seeded
order; dev accuracy is evaluated at start, every quarter and at the end. It writes `long_range_summary.json` (the layout
of `study`'s, plus the device). The loop is the experiments' JAX loop, not the train binary's: the binary needs
TensorFlow (docs/backends.md).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from typing import Any, Callable, Dict, Iterator, Optional

from absl import flags
import numpy as np

from data_prep import corpus_tasks
from experiments import jax_loop
from experiments import study as study_kit
from experiments.projects.long_inputs.pools import FreshDocuments
from experiments.projects.long_inputs.pools import probe_sets
from experiments.projects.long_inputs.pools import write_pools
from experiments.projects.long_inputs.study import check_attention_types
from experiments.projects.long_inputs.study import LongRangeSettings
from official_albert import cli
from official_albert import file_io
from official_albert import model_directory as md

RECORDS_FILE = "records.npz"
POOLS_FILE = "pools.npz"
SETTINGS_FILE = "settings.json"
MODEL_DIR = "model"
SUMMARY_FILE = "long_range_summary.json"
_FEATURES = ("input_word_ids", "input_mask", "input_type_ids")


def prepare(pretrained_dir: str, output_dir: str, settings: LongRangeSettings, spm_model_file: Optional[str] = None,
            log: Callable[[str], None] = print) -> Dict[str, Any]:
  """Documents → the task's records at both lengths; the pretrained model → an HF directory with longer positions."""
  from experiments.projects.long_inputs import study as long_range  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints import convert as convert_lib  # pylint: disable=g-import-not-at-top
  from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options  # noqa: PLC0415
  from official_albert.tokenization import FullTokenizer  # pylint: disable=g-import-not-at-top
  from tasks.text import data as text_data  # pylint: disable=g-import-not-at-top
  spm_model_file = spm_model_file or md.require_spm_model(pretrained_dir, "prepare (or pass --spm_model_file)")
  options = model_tokenizer_options(pretrained_dir)  # (the model's casing, as the task tokenizes)
  tokenizer = FullTokenizer(spm_model_file, **options)
  pools = corpus_tasks.sentence_pools(settings.keys)
  # What the records and the prepared model came from: a summary of runs on another model is not merged with these.
  arrays, info = {}, {"settings": dataclasses.asdict(settings), "tokenizer": options,
                      "pretrained": {"dir": os.path.abspath(pretrained_dir),
                                     "stamp": study_kit.directory_stamp(pretrained_dir),
                                     "spm_model_file": os.path.abspath(spm_model_file)}}
  for split, count in (("train", settings.num_train), ("dev", settings.num_dev)):
    documents = long_range.make_documents(tokenizer, settings, split, count, pools)
    path = os.path.join(output_dir, "data", f"{split}.csv")
    long_range.write_csv(path, documents)
    examples = text_data.read_text_examples(path, text_data.ReadOptions())
    for length in (settings.seq_length, settings.truncated_length):
      rows = list(text_data.records(examples, tokenizer, length, "class", ["0", "1"]))
      for key in (*_FEATURES, "label_ids"):
        arrays[f"{split}_{length}_{key}"] = np.stack([r[key] for r in rows]).astype(np.int32)
    info[f"{split}_key_within_truncation"] = float(np.mean(
        [d["key_offset"] + 8 < settings.truncated_length for d in documents]))
    log(f"[long_range_jax] {split}: {count} documents, mean {np.mean([d['pieces'] for d in documents]):.0f} pieces")
  with file_io.atomic_path(os.path.join(output_dir, RECORDS_FILE)) as tmp, open(tmp, "wb") as f:
    np.savez_compressed(f, **arrays)
  info.update(write_pools(tokenizer, pools, os.path.join(output_dir, POOLS_FILE), settings.seed))
  convert_lib.convert("native", pretrained_dir, "hf", os.path.join(output_dir, MODEL_DIR),
                      max_position_embeddings=max(settings.seq_length, 512))
  file_io.atomic_write_json(os.path.join(output_dir, SETTINGS_FILE), info)
  return info


def _classifier(model_dir: str, attention: Dict[str, Any], seq_length: int, prepared_dir: str = ""):
  """The task model with the pretrained encoder (pooler included; classifier head fresh) and `attention` set.

  `model_dir` is the prepared model or another one with its pieces (`prepared_dir`'s vocabulary size, at least
  `seq_length` positions): the continued-pretrained model of `pretrain_jax --save_model_dir`."""
  from official_albert.checkpoints import loading  # pylint: disable=g-import-not-at-top
  from official_albert.modeling.models import AlbertClassifier  # pylint: disable=g-import-not-at-top
  pretrainer = loading.load_pretrained(model_dir)
  if prepared_dir:
    with open(md.path(prepared_dir, md.CONFIG_FILE), encoding="utf-8") as f:
      vocab_size = json.load(f)["vocab_size"]
    if pretrainer.config.vocab_size != vocab_size:
      raise ValueError(f"--pretrained_model_dir={model_dir}: vocabulary of {pretrainer.config.vocab_size} pieces, "
                       f"the prepared documents use {vocab_size} ({prepared_dir}); pass a model of the same "
                       "SentencePiece model (e.g. pretrain_jax --save_model_dir from the same demo model).")
  if pretrainer.config.max_position_embeddings < seq_length:
    raise ValueError(f"{model_dir}: {pretrainer.config.max_position_embeddings} positions, fewer than the task's "
                     f"{seq_length}; extend it first (convert_checkpoint --max_position_embeddings).")
  # Dropout 0 in the encoder too, as study.py's TensorFlow run (an ALBERT v1 model's config has 0.1).
  config = pretrainer.config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **attention)
  model = AlbertClassifier(config, num_labels=2, dropout_rate=0.0)
  if len(model.encoder.weights) != len(pretrainer.encoder.weights):
    raise ValueError(f"{model_dir}: the encoder's variables differ from the task model's.")
  for target, source in zip(model.encoder.weights, pretrainer.encoder.weights):
    target.assign(source.value)
  return model


def _training_batches(train: Dict[str, np.ndarray], settings: LongRangeSettings, seq: int,
                      fresh: Optional[Dict[str, np.ndarray]]) -> Iterator[Dict[str, np.ndarray]]:
  """Endless batches: fresh documents from the pools, or the records in a seeded order reshuffled every epoch.

  Raises:
    ValueError: at the call, not the first batch: the records hold fewer documents than a batch (no epoch would
      yield one, and the loop would wait forever).
  """
  count = len(train["label_ids"])
  if fresh is None and settings.batch_size > count:
    raise ValueError(f"--batch_size={settings.batch_size}: the prepared records hold {count} training documents; "
                     f"give at most {count} (or --fresh_documents).")

  def batches():
    if fresh is not None:
      documents = FreshDocuments(fresh, settings, seq, settings.seed)
      while True:
        yield documents.batch(settings.batch_size)
    rng = np.random.default_rng(settings.seed)
    while True:
      order = rng.permutation(count)
      for begin in range(0, count - settings.batch_size + 1, settings.batch_size):
        index = order[begin:begin + settings.batch_size]
        yield {k: v[index] for k, v in train.items()}

  return batches()


def _accuracy_fn(model) -> Callable[[Any, Dict[str, np.ndarray]], float]:
  """accuracy((trainable, non_trainable), records), in batches of 8 (one jitted inference call for every set)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  @jax.jit
  def predict(trainable, non_trainable, batch):
    outputs, _ = model.stateless_call(trainable, non_trainable, batch, training=False)
    return jnp.argmax(outputs["logits"], axis=-1)

  def accuracy(state, records: Dict[str, np.ndarray]) -> float:
    hits = 0
    for begin in range(0, len(records["label_ids"]), 8):
      batch = {k: jnp.asarray(records[k][begin:begin + 8]) for k in _FEATURES}
      hits += int(np.sum(np.asarray(predict(*state, batch)) == records["label_ids"][begin:begin + 8]))
    return hits / len(records["label_ids"])

  return accuracy


def _save_weights(model, trainable, non_trainable, path: str) -> None:
  """The trained state written as a Keras weights file (the next curriculum stage's `--init_weights`)."""
  jax_loop.write_back(model, trainable, non_trainable)
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  model.save_weights(path)


def _score_probes(name: str, sets: Dict[str, Dict[str, np.ndarray]], accuracy_of, state, log) -> Dict[str, Any]:
  """{probe: {accuracy, examples}} of the trained state on each probe set (`long_range_pools.probe_sets`)."""
  scores = {}
  for probe, records in sets.items():
    scores[probe] = {"accuracy": accuracy_of(state, records), "examples": int(len(records["label_ids"]))}
    log(f"[long_range_jax] {name} {probe}: accuracy {scores[probe]['accuracy']:.4f}")
  return scores


def finetune_one(name: str, output_dir: str, settings: LongRangeSettings, records: Dict[str, np.ndarray],
                 fresh: Optional[Dict[str, np.ndarray]] = None, log: Callable[[str], None] = print,
                 init_weights: str = "", save_weights: str = "",
                 probes: Optional[Callable[[int], Dict[str, Dict[str, np.ndarray]]]] = None,
                 pretrained_model_dir: str = "") -> Dict[str, Any]:
  """One run (block_sparse / chunked at the long length, truncated = dense at the short one); training batches from
  the prepared records, or drawn afresh from `fresh` (the pools) when given. Dev is always the prepared records;
  `probes(seq_length)` gives extra evaluation sets scored at the end (`long_range_pools.probe_sets`);
  `pretrained_model_dir` replaces the prepared model (see `_classifier`)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import keras  # pylint: disable=g-import-not-at-top
  seq = settings.truncated_length if name == "truncated" else settings.seq_length
  attention = {"attention_type": "dense"} if name == "truncated" else {"attention_type": name}
  if name == "block_sparse":
    attention.update(block_size=settings.block_size, num_random_blocks=3)
  data = {split: {k: records[f"{split}_{seq}_{k}"] for k in (*_FEATURES, "label_ids")} for split in ("train", "dev")}
  batches = _training_batches(data["train"], settings, seq, fresh)  # a --batch_size over the records: refused here
  keras.utils.set_random_seed(settings.seed)
  prepared = os.path.join(output_dir, MODEL_DIR)
  model = _classifier(pretrained_model_dir or prepared, attention, seq, prepared if pretrained_model_dir else "")
  if init_weights:
    model.load_weights(init_weights)  # a previous stage's task model (a curriculum), head included
  optimizer = jax_loop.adamw(model, jax_loop.warmup_linear_decay(settings.learning_rate, settings.train_steps))

  def loss_fn(trainable, non_trainable, batch):
    outputs, non_trainable = model.stateless_call(trainable, non_trainable, {k: batch[k] for k in _FEATURES},
                                                  training=True)
    log_probs = jax.nn.log_softmax(outputs["logits"].astype(jnp.float32), axis=-1)
    return -jnp.mean(jnp.take_along_axis(log_probs, batch["label_ids"][:, None], axis=-1)), non_trainable

  accuracy_of = _accuracy_fn(model)

  def on_evaluation(step, loss, accuracy):
    if step:
      log(f"[long_range_jax] {name} step {step}: loss {float(loss):.4f} dev accuracy {accuracy:.4f}")

  loop = jax_loop.run(jax_loop.train_step(loss_fn, optimizer), model, optimizer,
                      batches, settings.train_steps,
                      lambda state: accuracy_of(state, data["dev"]), every=max(settings.train_steps // 4, 1),
                      on_evaluation=on_evaluation)
  if save_weights:
    _save_weights(model, *loop.state, save_weights)
  probe_accuracy = _score_probes(name, probes(seq) if probes else {}, accuracy_of, loop.state, log)
  return {"seq_length": seq, "attention": attention, "training_documents": "fresh" if fresh is not None else "records",
          "pretrained_model": pretrained_model_dir or prepared,
          "dev_accuracy": loop.history[-1][1], "eval_history": loop.history, "probes": probe_accuracy,
          "train_loss": [float(x) for x in loop.losses], "wall_s": time.time() - loop.started}


def finetune(output_dir: str, attention_types=None, overrides: Optional[Dict[str, Any]] = None,
             summary_file: str = SUMMARY_FILE, fresh_documents: bool = False, weights_in: str = "",
             weights_out: str = "", log: Callable[[str], None] = print,
             pretrained_model_dir: str = "") -> Dict[str, Any]:
  """Every run of the prepared settings (`overrides`: train_steps, learning_rate, batch_size, seed, and the fresh
  documents' min_pieces / max_pieces), from the prepared model or `pretrained_model_dir`; writes and returns the
  summary (`summary_file` in `output_dir`)."""
  names = check_attention_types(attention_types) if attention_types else None
  settings_path = os.path.join(output_dir, SETTINGS_FILE)
  if not os.path.exists(settings_path) or not os.path.exists(os.path.join(output_dir, RECORDS_FILE)):
    raise FileNotFoundError(f"{output_dir}: no {SETTINGS_FILE} and {RECORDS_FILE} of --stage=prepare here; run "
                            f"--stage=prepare --output_dir={output_dir} first (or point --output_dir at its folder).")
  info = file_io.read_json(settings_path, fix="Run --stage=prepare again.")
  if not isinstance(info, dict) or not isinstance(info.get("settings"), dict):
    raise ValueError(f"{settings_path}: not the settings of --stage=prepare (another binary's folder?); run "
                     "--stage=prepare into its own --output_dir.")
  jax_loop.use_jax_backend()
  import jax  # pylint: disable=g-import-not-at-top
  settings = LongRangeSettings(**{**info["settings"], "attention_types": tuple(info["settings"]["attention_types"])})
  settings = settings.replace(**(overrides or {}))  # experiments.study.Settings: unset overrides are None
  with np.load(os.path.join(output_dir, RECORDS_FILE)) as f:
    records = dict(f.items())
  pools = None
  if os.path.exists(os.path.join(output_dir, POOLS_FILE)):
    with np.load(os.path.join(output_dir, POOLS_FILE)) as f:
      pools = dict(f.items())
  if fresh_documents and pools is None:
    raise FileNotFoundError(f"--fresh_documents: no {POOLS_FILE} in {output_dir}; run --stage=prepare again.")
  fresh = pools if fresh_documents else None
  probes = None
  if pools is not None and "dev0_ids" in pools:
    prepared = LongRangeSettings(**{**info["settings"], "attention_types": tuple(info["settings"]["attention_types"])})
    probes = functools.partial(probe_sets, pools, prepared)
  else:
    log(f"[long_range_jax] {output_dir}: {POOLS_FILE} without the dev keys (prepared by an older version): no probes.")
  names = names or check_attention_types(settings.attention_types)
  # What else the runs depend on: a summary made otherwise is replaced, not merged.
  origin = {"prepared_from": info.get("pretrained"), "pretrained_model_dir": pretrained_model_dir,
            "init_weights_dir": weights_in,
            "fresh_documents": bool(fresh_documents), "device": jax.devices()[0].device_kind}
  summary = {**info, "settings": dataclasses.asdict(settings), "device": origin["device"], "origin": origin,
             "majority_baseline": 0.5, "runs": _earlier_runs(os.path.join(output_dir, summary_file), settings,
                                                               origin, log)}
  for name in names:
    summary["runs"][name] = finetune_one(
        name, output_dir, settings, records, fresh, log,
        init_weights=os.path.join(weights_in, f"{name}.weights.h5") if weights_in else "",
        save_weights=os.path.join(weights_out, f"{name}.weights.h5") if weights_out else "", probes=probes,
        pretrained_model_dir=pretrained_model_dir)
    log(f"[long_range_jax] {name}: dev accuracy {summary['runs'][name]['dev_accuracy']} "
        f"({summary['runs'][name]['wall_s']:.0f} s wall on {summary['device']})")
    file_io.atomic_write_json(os.path.join(output_dir, summary_file), summary)  # (each run kept as it ends)
  return summary


def _earlier_runs(path: str, settings: LongRangeSettings, origin: Dict[str, Any],
                  log: Callable[[str], None]) -> Dict[str, Any]:
  """The runs `path` already holds when they were made under the same settings and `origin` (model, weights,
  documents, kind of device): a call for one attention type replaced the summary of the others. None otherwise."""
  if not os.path.exists(path):
    return {}
  earlier = file_io.read_json(path, fix="Delete it: its runs are redone.")
  ours = json.loads(json.dumps(dataclasses.asdict(settings)))  # (as the file holds it: tuples as lists)
  theirs = earlier.get("settings") if isinstance(earlier, dict) else None
  same = (isinstance(theirs, dict) and earlier.get("origin") == origin and
          {k: v for k, v in theirs.items() if k != "attention_types"} ==
          {k: v for k, v in ours.items() if k != "attention_types"})
  if not same:
    log(f"[long_range_jax] {path}: its runs were made under other settings or on another device: replaced.")
    return {}
  return dict(earlier.get("runs") or {})


# The flags that set a field of LongRangeSettings (the field gives the flag's kind; default None: the size's value at
# prepare, the prepared value at finetune), with what each means to this binary's two stages.
SETTINGS_FLAGS = {
    "keys": "prepare: the key sentences: topic (every prose sentence of a family's modules) or marked (those naming "
            "a word of their family; filler naming none); default topic.",
    "train_steps": "Fine-tuning steps (default: the size's; finetune: the prepared ones).",
    "learning_rate": "finetune: peak learning rate (default: the prepared one).",
    "batch_size": "finetune: batch size (default: the prepared one).",
    "min_pieces": "finetune with --fresh_documents: shortest document (default: prepared).",
    "max_pieces": "finetune with --fresh_documents: longest document (default: prepared).",
    "seed": "finetune: seed of the head's initialisation and the batch order.",
    "attention_types": "finetune: runs among block_sparse, chunked, truncated (default: all).",
}
FINETUNE_OVERRIDES = ("train_steps", "learning_rate", "batch_size", "seed", "min_pieces", "max_pieces")


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  flags.DEFINE_enum("stage", None, ["prepare", "finetune"], "prepare (TensorFlow) or finetune (JAX).", flag_values=fv)
  flags.DEFINE_string("pretrained_dir", None, "prepare: a native model directory (the demo's model).", flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "prepare: its SentencePiece model (default: <pretrained_dir>/"
                      "spiece.model).", flag_values=fv)
  flags.DEFINE_string("output_dir", "long_range_jax", "Where prepare writes and finetune reads and writes.",
                      flag_values=fv)
  flags.DEFINE_bool("quick", False, "prepare: the tests' size (study's quick settings).",
                    flag_values=fv)
  study_kit.define_settings_flags(LongRangeSettings, fv, tuple(SETTINGS_FLAGS), quick=False, helps=SETTINGS_FLAGS)
  flags.DEFINE_bool("fresh_documents", False, "finetune: draw every training document afresh from the sentence "
                    "pools (no document is seen twice) instead of the prepared training records.", flag_values=fv)
  flags.DEFINE_string("init_weights_dir", "", "finetune: start each run from <dir>/<run>.weights.h5 (a previous "
                      "stage's --save_weights_dir: a curriculum of document lengths).", flag_values=fv)
  flags.DEFINE_string("save_weights_dir", "", "finetune: write each run's trained task model to "
                      "<dir>/<run>.weights.h5.", flag_values=fv)
  flags.DEFINE_string("pretrained_model_dir", "", "finetune: start from this model (HF or native directory of the "
                      "same pieces, e.g. pretrain_jax --save_model_dir) instead of the prepared one.",
                      flag_values=fv)
  flags.DEFINE_string("summary_file", SUMMARY_FILE, "finetune: the summary's file name in --output_dir.",
                      flag_values=fv)
  flags.mark_flag_as_required("stage", flag_values=fv)


def main(argv, fv: flags.FlagValues = flags.FLAGS) -> None:
  del argv
  if fv.stage == "prepare":
    if not fv.pretrained_dir:
      raise flags.ValidationError("--stage=prepare needs --pretrained_dir (a native model directory).")
    settings = LongRangeSettings.quick() if fv.quick else LongRangeSettings.full()
    prepare(fv.pretrained_dir, fv.output_dir, settings.replace(train_steps=fv.train_steps or None, keys=fv.keys),
            fv.spm_model_file)
  else:
    overrides = {name: fv[name].value for name in FINETUNE_OVERRIDES}
    summary = finetune(fv.output_dir, fv.attention_types, overrides, fv.summary_file, fv.fresh_documents,
                       fv.init_weights_dir, fv.save_weights_dir, pretrained_model_dir=fv.pretrained_model_dir)
    print(json.dumps({k: v["dev_accuracy"] for k, v in summary["runs"].items()}))


def console_main() -> None:
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
