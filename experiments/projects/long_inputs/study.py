r"""Does a long model use what it reads? A task whose label is decided by one sentence anywhere in a long document.

    python -m experiments.projects.long_inputs.study --pretrained_dir=demo_out/model \
        --spm_model_file=demo_out/spm/spiece.model --output_dir=long_range_out

Documents: prose sentences of the standard library's documentation (the demo corpus, `data_prep.corpus`) from
modules outside both topic families, strung together to 2,000-4,000 SentencePiece pieces, with ONE sentence of a
topic family (files/OS vs networking/email modules) put in at a uniformly random sentence position. The label is
that sentence's family; filler sentences carry no label information. Key sentences of train and dev come from
disjoint documents. `--keys=marked` keeps only the keys that name a word of their family and only the filler that
names none: a sentence alone then decides the label, and the task measures the reading alone. The families, their
marker words and the sentence pools are corpus tasks (`data_prep.corpus_tasks`: `TOPIC_FAMILIES`, `FAMILY_MARKERS`,
`sentence_pools`).

Runs (each `text_classification` through the train binary's entry point, warm-started from the pretrained model
extended to `--seq_length` positions by `checkpoints.extend`, Longformer's recipe):
  - `block_sparse` and `chunked` at `--seq_length` (4096): the whole document is read;
  - `truncated` at 512: the same model sees the first 512 pieces (the key sentence is in them for ~1 document in 6).
It reports dev accuracy per run next to the majority baseline; the issue's target is ≥ 0.9 for the long runs and
≤ 0.6 for the truncated one. On 2 CPU cores this is hours at the full size (docs/long_inputs.md records a run).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import logging
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import flags
import numpy as np

from data_prep.corpus_tasks import KEY_KINDS
from data_prep.corpus_tasks import sentence_pools
from experiments import study
from official_albert import cli
from official_albert import file_io
from official_albert import model_directory as md
from official_albert import train
from official_albert.config import AlbertConfig
from official_albert.tokenization import FullTokenizer

# The runs: block_sparse / chunked at the long length, truncated = dense at the short one.
ATTENTION_RUNS = ("block_sparse", "chunked", "truncated")

logger = logging.getLogger(__name__)


def check_attention_types(names: Sequence[str]) -> Tuple[str, ...]:
  """`names` when each is one of `ATTENTION_RUNS` (once); else a ValueError before any run starts (an unknown name
  failed, or ran another model, after the runs before it had taken their time)."""
  names = tuple(names)
  unknown = [n for n in names if n not in ATTENTION_RUNS]
  if unknown or not names or len(set(names)) != len(names):
    raise ValueError(f"attention_types={list(names)}: give one or more of {list(ATTENTION_RUNS)}, each once.")
  return names


@dataclasses.dataclass
class LongRangeSettings(study.Settings):
  """Sizes of one run (`full()` the issue's, `quick()` the tests'); FLAG_FIELDS are the binary's flags."""
  min_pieces: int
  max_pieces: int
  seq_length: int
  truncated_length: int
  num_train: int = dataclasses.field(metadata={"help": "Training documents"})
  num_dev: int
  train_steps: int = dataclasses.field(metadata={"help": "Fine-tuning steps"})
  batch_size: int
  learning_rate: float
  block_size: int
  attention_types: Sequence[str] = dataclasses.field(
      default=ATTENTION_RUNS,
      metadata={"help": "Runs among block_sparse, chunked, truncated (default: all)"})
  seed: int = 0
  # KEY_KINDS: topic (every prose sentence of a family's modules) or marked (FAMILY_MARKERS)
  keys: str = dataclasses.field(default="topic", metadata={
      "help": "The key sentences: topic or marked (FAMILY_MARKERS)", "choices": KEY_KINDS})

  def __post_init__(self):
    if self.min_pieces > self.max_pieces:  # (numpy's bare "low >= high" when the first document was drawn)
      raise ValueError(f"min_pieces={self.min_pieces} is above max_pieces={self.max_pieces}: give the shortest "
                       "document's pieces first (--min_pieces <= --max_pieces).")
    if self.max_pieces > self.seq_length - 2:  # (the document is cut there, its label kept)
      raise ValueError(f"max_pieces={self.max_pieces}: a document that long does not fit seq_length="
                       f"{self.seq_length} ([CLS] and [SEP] take 2), and its key sentence could be cut away while its "
                       f"label stays; give --max_pieces <= {self.seq_length - 2}.")

  @classmethod
  def full(cls) -> "LongRangeSettings":
    return cls(min_pieces=2000, max_pieces=4000, seq_length=4096, truncated_length=512, num_train=1024, num_dev=256,
               train_steps=512, batch_size=4, learning_rate=5e-4, block_size=64)

  @classmethod
  def quick(cls) -> "LongRangeSettings":
    return cls(min_pieces=120, max_pieces=240, seq_length=256, truncated_length=32, num_train=16, num_dev=8,
               train_steps=2, batch_size=4, learning_rate=1e-3, block_size=8)


FLAG_FIELDS = ("attention_types", "num_train", "train_steps", "keys")
DATA_FIELDS = ("min_pieces", "max_pieces", "truncated_length", "num_train", "num_dev", "seed", "keys")


def make_documents(tokenizer, settings: LongRangeSettings, split: str, count: int, pools: Dict[str, Any]
                   ) -> List[Dict[str, Any]]:
  """`count` labelled documents (balanced, seeded): text, label, length in pieces, key sentence's piece offset."""
  rng = np.random.default_rng([settings.seed, 0 if split == "train" else 1])
  filler = pools["filler"]
  lengths = {}

  def pieces(sentence):
    if sentence not in lengths:
      lengths[sentence] = len(tokenizer.tokenize(sentence))
    return lengths[sentence]

  documents, long_ones, keys_cut = [], 0, 0
  for index in range(count):
    label = index % 2
    key = pools[split][label][rng.integers(len(pools[split][label]))]
    target = int(rng.integers(settings.min_pieces, settings.max_pieces + 1))
    body, total = [], pieces(key)
    while total < target:
      sentence = filler[rng.integers(len(filler))]
      body.append(sentence)
      total += pieces(sentence)
    position = int(rng.integers(len(body) + 1))
    offset = sum(pieces(s) for s in body[:position])
    body.insert(position, key)
    documents.append({"text": " ".join(body), "label": str(label), "pieces": total, "key_offset": offset})
    cut = max(0, offset + pieces(key) - (settings.seq_length - 2))  # (the last sentence can overshoot max_pieces)
    long_ones, keys_cut = long_ones + (total > settings.seq_length - 2), keys_cut + (cut > 0)
  if long_ones:
    logger.warning("%s: %d of %d documents are longer than seq_length=%d holds (the last filler sentence went past "
                   "max_pieces=%d); %d lose (part of) their key sentence to the cut. Lower --max_pieces.", split,
                   long_ones, count, settings.seq_length, settings.max_pieces, keys_cut)
  order = rng.permutation(count)
  return [documents[i] for i in order]


def write_csv(path: str, documents: Sequence[Dict[str, Any]]) -> None:
  with file_io.atomic_path(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(["text", "label"])
    for d in documents:
      writer.writerow([d["text"], d["label"]])


RUN_KEY_FILE = "run_key.json"
# What a run does not depend on: which other runs the invocation asks for.
RUN_FIELDS = tuple(f.name for f in dataclasses.fields(LongRangeSettings) if f.name != "attention_types")


def finetune(name: str, pretrained_dir: str, data_dir: str, spm_model_file: str, output_dir: str,
             settings: LongRangeSettings, key: str) -> Dict[str, Any]:
  """One run: extend the pretrained model (positions, attention), then text_classification train_and_eval.

  `<output_dir>/<name>` belongs to the run `key` (its stage's fingerprint): a folder left under another key is
  emptied first, so the run starts from the pretrained model rather than resuming the old run's checkpoint."""
  from official_albert.checkpoints import convert as convert_lib  # noqa: PLC0415 (TF-free module)
  study.start_or_resume(os.path.join(output_dir, name), key, RUN_KEY_FILE)
  seq = settings.truncated_length if name == "truncated" else settings.seq_length
  attention = {"attention_type": "dense"} if name == "truncated" else {"attention_type": name}
  if name == "block_sparse":
    attention.update(block_size=settings.block_size, num_random_blocks=3)
  init_dir = os.path.join(output_dir, name, "init")
  convert_lib.convert("native", pretrained_dir, "native", init_dir, max_position_embeddings=max(seq, 512),
                      attention=attention)
  model = AlbertConfig.from_json_file(md.path(init_dir, md.CONFIG_FILE)).to_dict()
  model.update(preset="", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  data = {"global_batch_size": settings.batch_size, "seq_length": seq, "seed": settings.seed}
  loop = max(settings.train_steps // 4, 1)
  override = {
      "task": {"model": model, "init_checkpoint": init_dir, "spm_model_file": spm_model_file,
               "classifier_dropout": 0.0,
               "train_data": dict(data, input_path=os.path.join(data_dir, "train.csv"), is_training=True,
                                  drop_remainder=True),
               "validation_data": dict(data, input_path=os.path.join(data_dir, "dev.csv"), is_training=False,
                                       global_batch_size=8)},
      "trainer": {"train_steps": settings.train_steps, "steps_per_loop": loop, "checkpoint_interval": loop,
                  "validation_interval": loop, "summary_interval": loop, "validation_steps": -1,
                  "learning_rate": settings.learning_rate, "warmup_steps": max(settings.train_steps // 10, 1),
                  "eval_at_start": True, "max_to_keep": 1},
      "runtime": {"seed": settings.seed},
  }
  start, cpu = time.time(), time.process_time()
  model_dir = os.path.join(output_dir, name, "model")
  result = train.run("text_classification", "train_and_eval", model_dir, params_override=json.dumps(override))
  history = [(step, metrics.get("eval_accuracy")) for step, metrics in result["eval_history"]]
  # The last evaluation of this call, else the trainer's last one (a same-key rerun of a run killed after its last
  # step evaluates nothing new).
  accuracy = history[-1][1] if history else (result.get("eval_results") or {}).get("eval_accuracy")
  if accuracy is None:
    raise RuntimeError(f"long_inputs: the {name} run in {model_dir} evaluated nothing (step "
                       f"{result.get('global_step')} of {settings.train_steps}): delete {os.path.dirname(model_dir)} "
                       "and run again.")
  return {"seq_length": seq, "attention": attention, "dev_accuracy": accuracy, "eval_history": history,
          "wall_s": time.time() - start, "cpu_s": time.process_time() - cpu}


def run(pretrained_dir: str, output_dir: str, settings: LongRangeSettings, spm_model_file: Optional[str] = None,
        log=print) -> Dict[str, Any]:
  """Builds the task, runs every attention of `settings`, writes and returns `long_range_summary.json`.

  `spm_model_file`: the pretrained model's SentencePiece model (default: its `spiece.model`; the demo writes it to
  `<demo output>/spm/spiece.model`)."""
  check_attention_types(settings.attention_types)
  spm_model_file = spm_model_file or md.require_spm_model(pretrained_dir,
                                                           "the long-range task (or pass --spm_model_file)")
  data_dir = os.path.join(output_dir, "data")

  # (imported here: finetune_jax imports this module before Keras is set to its JAX backend)
  from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options  # noqa: PLC0415
  tokenizer_options = model_tokenizer_options(pretrained_dir)  # (the model's casing: the task tokenizes with it)

  def make_data():
    tokenizer = FullTokenizer(spm_model_file, **tokenizer_options)
    pools = sentence_pools(settings.keys)
    stats = {}
    for split, count in (("train", settings.num_train), ("dev", settings.num_dev)):
      documents = make_documents(tokenizer, settings, split, count, pools)
      write_csv(os.path.join(data_dir, f"{split}.csv"), documents)
      seen = sum(d["key_offset"] + 8 < settings.truncated_length for d in documents)
      stats[f"{split}_documents"] = {"count": count, "mean_pieces": sum(d["pieces"] for d in documents) / count,
                                     "key_within_truncation": seen / count}
      log(f"[long_range] {split}: {count} documents, {stats[f'{split}_documents']}")
    return stats

  # Named, resumable stages (experiments.study): the documents, then one fine-tuning run per attention type.
  data_key = {"settings": settings.fingerprint(DATA_FIELDS), "spm_model_file": os.path.abspath(spm_model_file),
              "tokenizer": tokenizer_options}
  summary: Dict[str, Any] = {"settings": dataclasses.asdict(settings), "runs": {}}
  summary.update(study.run_stage(output_dir, "data", data_key, make_data, log))
  summary["majority_baseline"] = 0.5
  pretrained_stamp = study.directory_stamp(pretrained_dir)  # (its contents: a model trained again is another model)
  # Not attention_types: adding a run to the invocation leaves the finished ones as they are.
  run_key = {"data": data_key, "settings": settings.fingerprint(RUN_FIELDS),
             "pretrained_dir": os.path.abspath(pretrained_dir), "pretrained": pretrained_stamp}
  for name in ATTENTION_RUNS:  # (runs an earlier call finished under the same key stay in the summary)
    earlier = study.finished_stage(output_dir, f"finetune_{name}", run_key)
    if name not in settings.attention_types and earlier is not None:
      summary["runs"][name] = earlier
  for name in settings.attention_types:
    summary["runs"][name] = study.run_stage(output_dir, f"finetune_{name}", run_key, functools.partial(
        finetune, name, pretrained_dir, data_dir, spm_model_file, output_dir, settings, study.fingerprint(run_key)),
        log)
    log(f"[long_range] {name}: dev accuracy {summary['runs'][name]['dev_accuracy']} "
        f"({summary['runs'][name]['wall_s']:.0f} s wall)")
  file_io.atomic_write_json(os.path.join(output_dir, "long_range_summary.json"), summary)
  study.write_summary(output_dir, settings, [settings.seed], {n: [r] for n, r in summary["runs"].items()},
                      ("dev_accuracy",), majority_baseline=0.5)
  return summary


def define_flags(fv=None) -> None:
  fv = flags.FLAGS if fv is None else fv
  flags.DEFINE_string("pretrained_dir", None, "A native model directory with spiece.model (the demo's model).",
                      flag_values=fv)
  flags.DEFINE_string("spm_model_file", None, "Its SentencePiece model (default: <pretrained_dir>/spiece.model).",
                      flag_values=fv)
  flags.DEFINE_string("output_dir", "long_range_out", "Where the data, the runs and the summary go.", flag_values=fv)
  study.define_settings_flags(LongRangeSettings, fv, FLAG_FIELDS)  # --quick and the settings' own flags
  flags.mark_flag_as_required("pretrained_dir", flag_values=fv)


def main(argv, fv=None) -> None:
  del argv
  fv = flags.FLAGS if fv is None else fv
  settings = study.settings_from_flags(LongRangeSettings, fv, FLAG_FIELDS)
  summary = run(fv.pretrained_dir, fv.output_dir, settings, fv.spm_model_file)
  print(json.dumps({k: v["dev_accuracy"] for k, v in summary["runs"].items()}))


def console_main() -> None:
  cli.launch(define_flags, main)


if __name__ == "__main__":
  console_main()
