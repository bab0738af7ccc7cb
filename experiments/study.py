"""The study kit's shared stage: the demo corpus → a SentencePiece vocabulary → pretraining records.

The demo and the research projects (`experiments/projects/`) pretrain on the same data, made the same way; they
used to share it through the demo's own functions, so a project depended on the demo (issue 45). Here each step takes
the numbers it needs as arguments, so any study can call it with its own settings:

- `make_corpus`: the Python documentation corpus (`data_prep.corpus`), split into a training part and a held-out part
  (every `heldout_every`-th document), written as `<output_dir>/corpus/{train,heldout}.txt`;
- `make_vocab`: a SentencePiece unigram model trained on the training part (`<output_dir>/spm/spiece.model`);
- `make_records`: pretraining TFRecords (n-gram masking + in-document SOP, `data_prep.create_pretraining_data`)
  under `<output_dir>/data/`;
- `make_pretraining_data`: the three in their order from a `CorpusSettings` (the corpus knobs every study's settings
  share, under one name each), and `pretraining_data_override` the train binary's data overrides of its records;
  `FinetuneSettings` holds the downstream fine-tuning knobs the same way.

Seeded and single-threaded, so the same installed packages and seed give the same bytes.

The rest of the kit (issue 45 item 3), so that every study is run, resumed and summarised the same way:

- `Settings`: the base of a study's settings dataclass — `full()` (the documented study) and `quick()` (the tests'
  size), `replace()` that ignores unset values, `fingerprint()`; `define_settings_flags` / `settings_from_flags`
  make absl flags from its fields (default None = the size's value; help and choices from the field's metadata);
- `run_stage`: a named, resumable stage — done once per fingerprint of what it depends on, its result and timing
  kept in a marker file (`<run dir>/stages/<name>.json`); `timed` times a stage that resumes by itself;
- one run-directory layout (`run_path`, `stage_path`, `summary_path`, `start_or_resume`): `data/`, `stages/`,
  `runs/<variant>/seed<k>/` (kept only under the key it was started with), `summary.json`;
- `mean_std` / `write_summary`: mean ± std over seeds, per variant and metric, as `summary.json`.

Long because: the kit is one concept — how every study makes its data and runs, resumes and sums up its stages —
and a study imports it as one module; splitting the data stage from the run layout would split what a stage's key
must agree on.
"""

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import statistics
import time
import typing
from typing import Any, Callable, ContextManager, Dict, Iterable, Mapping, Optional, Sequence, Tuple, TypeVar

from absl import flags

from data_prep import corpus
from data_prep import create_pretraining_data as cpd
from data_prep import pretraining_instances as pi
from data_prep import train_sentencepiece
from official_albert import file_io

# Every HELDOUT_EVERY-th document of the corpus is held out and never trained on: the demo's, the ablations' and the
# early-exit study's held-out text (one number, so the docs state one fraction; issue 44).
HELDOUT_EVERY = 20
SUMMARY_FILE = "summary.json"
STAGES_DIR = "stages"


def make_corpus(output_dir: str, corpus_bytes: Optional[int], packages: Sequence[str] = (),
                heldout_every: int = HELDOUT_EVERY) -> Tuple[str, str, Dict[str, int]]:
  """Writes train.txt and heldout.txt (documents separated by blank lines); returns their paths and counts.

  Args:
    corpus_bytes: the corpus' size cap (None: all of it).
    packages: installed packages whose docstrings follow the standard library's (`data_prep.corpus.DEMO_PACKAGES`).
    heldout_every: every n-th document is held out (never trained on: the held-out evaluations and tasks).
  """
  text = corpus.python_docs_corpus_text(max_bytes=corpus_bytes, packages=packages)
  documents = [d for d in text.split("\n\n") if d.strip()]
  heldout = documents[heldout_every - 1::heldout_every]
  train = [d for i, d in enumerate(documents) if (i + 1) % heldout_every]
  if not heldout or not train:
    raise ValueError(f"The corpus has too few documents ({len(documents)}) to hold some out.")
  train_path = os.path.join(output_dir, "corpus", "train.txt")
  heldout_path = os.path.join(output_dir, "corpus", "heldout.txt")
  file_io.atomic_write_text(train_path, "\n\n".join(train) + "\n")
  file_io.atomic_write_text(heldout_path, "\n\n".join(heldout) + "\n")
  counts = {"documents": len(documents), "train_documents": len(train), "heldout_documents": len(heldout),
            "bytes": len(text.encode("utf-8"))}
  return train_path, heldout_path, counts


def make_vocab(output_dir: str, train_path: str, vocab_size: int, seed: int) -> str:
  """A SentencePiece unigram model of `vocab_size` pieces (a soft limit) trained on `train_path`; its path."""
  return train_sentencepiece.train_sentencepiece(
      [train_path], os.path.join(output_dir, "spm", "spiece"), vocab_size=vocab_size,
      hard_vocab_limit=False, seed=seed, num_threads=1)


def make_records(output_dir: str, text_path: str, spm_model: str, name: str, seq_length: int,
                 max_predictions_per_seq: int, seed: int, dupe_factor: int, random_next_sentence: bool = False,
                 folder: str = "data") -> Dict[str, Any]:
  """Pretraining records of `text_path` as `<output_dir>/<folder>/<name>.tfrecord` (shards); create_pretraining_data's
  statistics, `output_files` among them. `random_next_sentence`: NSP pairs instead of SOP (the ablations)."""
  config = cpd.GenerationConfig(
      input_file=text_path, output_file=os.path.join(output_dir, folder, f"{name}.tfrecord"),
      spm_model_file=spm_model,
      options=pi.InstanceOptions(max_seq_length=seq_length, max_predictions_per_seq=max_predictions_per_seq,
                                 random_next_sentence=random_next_sentence),
      random_seed=seed, dupe_factor=dupe_factor, num_workers=1, progress=False)
  return cpd.create_pretraining_data(config)


def _untimed(name: str) -> ContextManager[None]:
  del name
  return contextlib.nullcontext()


def make_pretraining_data(output_dir: str, settings: "CorpusSettings",
                          stage: Callable[[str], ContextManager[Any]] = _untimed) -> Dict[str, Any]:
  """The shared data stage, in its order: `make_corpus`, `make_vocab`, then `make_records` of the training part
  (`dupe_factor` masked copies) and of the held-out part (one copy), all from `settings`' corpus knobs.

  Args:
    stage: called with "corpus", "spm" and "data" around those steps (a study that times them passes its timer's).

  Returns:
    {"train_text", "heldout_text": the corpus parts, "spm_model", "train_records", "heldout_records": the record
    shards, comma separated (what a data config's input_path takes), "train_examples", "heldout_examples": their
    record counts, "corpus": `make_corpus`' counts}.
  """
  with stage("corpus"):
    train_text, heldout_text, counts = make_corpus(output_dir, settings.corpus_bytes, settings.packages,
                                                   settings.heldout_every)
  with stage("spm"):
    spm_model = make_vocab(output_dir, train_text, settings.vocab_size, settings.seed)
  data: Dict[str, Any] = {"train_text": train_text, "heldout_text": heldout_text, "spm_model": spm_model}
  with stage("data"):
    for part, text_path, dupe_factor in (("train", train_text, settings.dupe_factor), ("heldout", heldout_text, 1)):
      stats = make_records(output_dir, text_path, spm_model, part, settings.seq_length,
                           settings.max_predictions_per_seq, settings.seed, dupe_factor)
      data[f"{part}_records"] = ",".join(stats["output_files"])
      data[f"{part}_examples"] = stats["records"]
  data["corpus"] = counts
  return data


def pretraining_data_override(data: Mapping[str, Any], settings: "CorpusSettings", batch_size: int
                              ) -> Dict[str, Any]:
  """The train binary's `task.train_data` / `task.validation_data` overrides of `make_pretraining_data`'s records
  (the training stream seeded with `settings.seed`)."""
  layout = {"global_batch_size": batch_size, "seq_length": settings.seq_length,
            "max_predictions_per_seq": settings.max_predictions_per_seq}
  return {"train_data": dict(layout, input_path=data["train_records"], seed=settings.seed),
          "validation_data": dict(layout, input_path=data["heldout_records"])}


# ------------------------------------------------------------------------------------------------------ settings
SettingsT = TypeVar("SettingsT", bound="Settings")


class Settings:
  """The base of a study's settings dataclass: `full()` is the documented study, `quick()` the tests' size.

  A subclass is a `@dataclasses.dataclass` whose fields are the study's knobs; a field's `metadata` may hold `help`
  (its flag's help) and `choices` (an enum flag). Flags are made from the fields (`define_settings_flags`), so a
  knob is written once: in the dataclass.
  """

  @classmethod
  def full(cls: typing.Type[SettingsT]) -> SettingsT:
    raise NotImplementedError(f"{cls.__name__} has no full() size.")

  @classmethod
  def quick(cls: typing.Type[SettingsT]) -> SettingsT:
    raise NotImplementedError(f"{cls.__name__} has no quick() size.")

  def replace(self: SettingsT, **changes: Any) -> SettingsT:
    """A copy with `changes` applied; a change of None leaves the field as it is (an unset flag)."""
    return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

  def fingerprint(self, fields: Optional[Iterable[str]] = None) -> str:
    """A short hash of the named fields (default: all): what a stage that depends on them is keyed by."""
    values = dataclasses.asdict(self)
    if fields is not None:
      values = {k: values[k] for k in fields}
    return fingerprint(values)


@dataclasses.dataclass(kw_only=True)
class CorpusSettings(Settings):
  """A study's settings with the corpus knobs of `make_pretraining_data`, written once under one name each.

  Keyword-only, so that a study's own fields (required ones among them) follow them in any order; a study changes a
  default in its `full()` / `quick()`.

  Attributes:
    corpus_bytes: the corpus' size cap (None: all of it).
    packages: installed packages whose docstrings join the standard library's (`data_prep.corpus.DEMO_PACKAGES`).
    heldout_every: every n-th document is held out (never trained on).
    vocab_size: SentencePiece pieces (a soft limit).
    seq_length, max_predictions_per_seq: the pretraining records' layout.
    dupe_factor: masked copies of the training part (the held-out part gets one).
    seed: the vocabulary's, the records' and the pretraining's.
  """
  corpus_bytes: Optional[int] = None
  packages: Tuple[str, ...] = ()
  heldout_every: int = HELDOUT_EVERY
  vocab_size: int = 4000
  seq_length: int = 64
  max_predictions_per_seq: int = 10
  dupe_factor: int = 2
  seed: int = 12345


@dataclasses.dataclass(kw_only=True)
class FinetuneSettings(Settings):
  """A study's settings with the knobs of its downstream fine-tuning runs (text classification through the train
  binary: the demo's and the ablations' order task and GLUE tasks), written once under one name each.

  AdamW at 1e-4: the reference AdamW has no bias correction, so its first updates are ~3x the learning rate; 1e-3
  wrecked the pretrained encoder (dev accuracy stuck at 0.5).

  Attributes:
    ft_max_train, ft_max_dev: rows of the corpus-made tasks (two per sentence) at most.
    ft_seq_length, ft_batch_size, ft_train_steps, ft_learning_rate, ft_warmup_steps: each run's shape and schedule.
  """
  ft_max_train: int = 2000
  ft_max_dev: int = 1000
  ft_seq_length: int = 32
  ft_batch_size: int = 32
  ft_train_steps: int = 150
  ft_learning_rate: float = 1e-4
  ft_warmup_steps: int = 15

  def finetune_override(self, task: Mapping[str, Any], train_path: str, dev_path: str, seed: int,
                        mixed_precision: str, **trainer: Any) -> Dict[str, Any]:
    """The train binary's override of one fine-tuning run with these knobs: `task` (the init checkpoint, a model)
    with classifier dropout off and the train / dev data (dev in batches of 64), the schedule (a checkpoint every
    third of the steps, every dev example evaluated, one checkpoint kept; `trainer` adds or changes entries) and
    the runtime."""
    loop = max(self.ft_train_steps // 3, 1)
    data = {"global_batch_size": self.ft_batch_size, "seq_length": self.ft_seq_length}
    return {
        "task": dict(task, classifier_dropout=0.0, train_data=dict(data, input_path=train_path, seed=seed),
                     validation_data=dict(data, input_path=dev_path, global_batch_size=64)),
        "trainer": dict({"train_steps": self.ft_train_steps, "steps_per_loop": loop, "checkpoint_interval": loop,
                         "validation_interval": loop, "summary_interval": loop, "validation_steps": -1,
                         "learning_rate": self.ft_learning_rate, "warmup_steps": self.ft_warmup_steps,
                         "max_to_keep": 1}, **trainer),
        "runtime": {"seed": seed, "mixed_precision_dtype": mixed_precision}}


def fingerprint(value: Any) -> str:
  """16 hex digits of the SHA-256 of `value` as sorted JSON (tuples as lists)."""
  text = json.dumps(value, sort_keys=True, default=str)
  return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def directory_stamp(path: str) -> str:
  """`fingerprint` of every file under `path` (its name, size and modification time, to the nanosecond): what a
  stage made from a model directory is keyed by, beside its path. The path alone kept a stage's results after the
  model in that folder was trained again (`make demo` rerun), and returned the old accuracies."""
  files = []
  for root, _, names in os.walk(path):
    for name in names:
      stat = os.stat(os.path.join(root, name))
      files.append((os.path.relpath(os.path.join(root, name), path), stat.st_size, stat.st_mtime_ns))
  return fingerprint(sorted(files))


def _flag_kind(field: dataclasses.Field, hints: Mapping[str, Any]) -> str:
  """The absl flag kind of a settings field: integer, float, bool, string, enum or list."""
  hint = hints[field.name]
  origin = typing.get_origin(hint)
  if origin is typing.Union:  # Optional[X]
    hint = next(a for a in typing.get_args(hint) if a is not type(None))
    origin = typing.get_origin(hint)
  if hint in (tuple, list) or origin in (tuple, list, collections.abc.Sequence):
    return "list"
  if field.metadata.get("choices"):
    return "enum"
  kinds = {bool: "bool", int: "integer", float: "float", str: "string"}
  if hint not in kinds:
    raise TypeError(f"Settings field {field.name!r} has type {hint!r}, which no flag is made for: give its flag by "
                    "hand or leave it out of the flag fields.")
  return kinds[hint]


def define_settings_flags(settings_class: type, fv: flags.FlagValues, fields: Sequence[str],
                          quick: bool = True, helps: Optional[Mapping[str, str]] = None) -> None:
  """Defines a flag per named field of `settings_class` (default None: the chosen size's value), and `--quick`.

  Args:
    fields: the fields the binary exposes (the rest are fixed by `full()` / `quick()`).
    quick: whether to define `--quick` (the tests' size).
    helps: {field: the whole help text} for a binary whose flags mean more than the size's value (e.g. a stage that
      reads the value a previous stage saved); the others take the field's `help` metadata.
  """
  by_name = {f.name: f for f in dataclasses.fields(settings_class)}
  hints = typing.get_type_hints(settings_class)
  for name in fields:
    field = by_name[name]
    kind = _flag_kind(field, hints)
    help_text = (helps or {}).get(name) or (field.metadata.get("help", name.replace("_", " ")) +
                                            " (default: the size's).")
    if kind == "enum":
      flags.DEFINE_enum(name, None, list(field.metadata["choices"]), help_text, flag_values=fv)
    else:
      getattr(flags, f"DEFINE_{kind}")(name, None, help_text, flag_values=fv)
  if quick:
    flags.DEFINE_bool("quick", False, "The tests' size (seconds, not hours).", flag_values=fv)


def settings_from_flags(settings_class: typing.Type[SettingsT], fv: flags.FlagValues,
                        fields: Sequence[str]) -> SettingsT:
  """`quick()` or `full()` (by `--quick`) with every set flag of `fields` applied (lists become tuples)."""
  settings = settings_class.quick() if fv["quick"].value else settings_class.full()
  changes = {}
  for name in fields:
    value = fv[name].value
    changes[name] = tuple(value) if isinstance(value, list) else value
  return settings.replace(**changes)


# -------------------------------------------------------------------------------------------- the run directory
def run_path(output_dir: str, variant: str, seed: int) -> str:
  """One variant × seed's folder: `<output_dir>/runs/<variant>/seed<seed>`."""
  return os.path.join(output_dir, "runs", variant, f"seed{seed}")


def stage_path(output_dir: str, name: str) -> str:
  """A stage's marker: `<output_dir>/stages/<name>.json`."""
  return os.path.join(output_dir, STAGES_DIR, f"{name}.json")


def summary_path(output_dir: str) -> str:
  return os.path.join(output_dir, SUMMARY_FILE)


def start_or_resume(folder: str, key: str, key_file: str) -> None:
  """Keeps a training run's `folder` if it was started under `key` (the trainer resumes it), else empties it (a
  run under other settings must not resume the old checkpoint) and records `key` in `folder/key_file`."""
  key_path = os.path.join(folder, key_file)
  if os.path.exists(key_path) and file_io.read_json(key_path).get("key") == key:
    return
  if os.path.isdir(folder):
    shutil.rmtree(folder)
  file_io.atomic_write_json(key_path, {"key": key})


# ------------------------------------------------------------------------------------------------------ stages
def timed(times: Dict[str, Any], name: str, fn: Callable[..., Any], *args: Any) -> Any:
  """Runs `fn(*args)`, records its wall seconds and the 1-minute load before and after in `times[name]`."""
  start, load = time.time(), os.getloadavg()
  result = fn(*args)
  times[name] = {"wall_s": time.time() - start, "loadavg_start": load, "loadavg_end": os.getloadavg()}
  return result


def run_stage(output_dir: str, name: str, key: Any, fn: Callable[[], Any], log: Callable[[str], None] = print) -> Any:
  """A named, resumable stage: `fn()`'s result, computed once per `key`.

  The marker `<output_dir>/stages/<name>.json` holds the key's fingerprint, the result (JSON) and the stage's
  timing; it is written atomically after `fn` returns, so a killed stage runs again, a finished one is not rerun,
  and one finished under another key (other settings) is run afresh.
  """
  path = stage_path(output_dir, name)
  marker = _finished_marker(path, key)
  if marker is not None:
    log(f"[{name}] done before ({marker['timing']['wall_s']:.0f} s): {path}")
    return marker["result"]
  if os.path.exists(path):
    log(f"[{name}] {path} was made with other settings, or is damaged: running it again")
  times: Dict[str, Any] = {}
  result = timed(times, name, fn)
  file_io.atomic_write_json(path, {"stage": name, "fingerprint": fingerprint(key), "key": key,
                                   "timing": times[name], "result": result})
  return result


def finished_stage(output_dir: str, name: str, key: Any) -> Optional[Any]:
  """The result of stage `name` when it finished under `key` (what `run_stage` would return without running), else
  None: a study's summary lists the runs an earlier call finished beside this call's."""
  marker = _finished_marker(stage_path(output_dir, name), key)
  return marker["result"] if marker is not None else None


def _finished_marker(path: str, key: Any) -> Optional[Dict[str, Any]]:
  """The stage marker at `path` when it finished under `key`, else None."""
  marker = _read_marker(path) if os.path.exists(path) else None
  return marker if marker is not None and marker.get("fingerprint") == fingerprint(key) else None


def stage_times(output_dir: str) -> Dict[str, Dict[str, Any]]:
  """{stage: its timing} of every finished stage of a run directory."""
  folder = os.path.join(output_dir, STAGES_DIR)
  out = {}
  for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
    marker = _read_marker(os.path.join(folder, name)) if name.endswith(".json") else None
    if marker is not None:
      out[name[:-len(".json")]] = marker["timing"]
  return out


def _read_marker(path: str) -> Optional[Dict[str, Any]]:
  """A stage marker, or None for one that is not (damaged, edited, another file): its stage simply runs again."""
  try:
    with open(path, encoding="utf-8") as f:
      marker = json.load(f)
  except (OSError, ValueError):
    return None
  ok = isinstance(marker, dict) and isinstance(marker.get("timing"), dict) and "wall_s" in marker["timing"]
  return marker if ok and "result" in marker else None


# ----------------------------------------------------------------------------------------------------- summary
def mean_std(values: Iterable[Optional[float]]) -> Dict[str, Optional[float]]:
  """{"mean", "std", "n"} of the values that are not None; std is the sample's (n - 1), 0.0 for one value."""
  values = [v for v in values if v is not None]
  if not values:
    return {"mean": None, "std": None, "n": 0}
  return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
          "n": len(values)}


def summarize(results: Mapping[str, Sequence[Mapping[str, Any]]], metrics: Sequence[str]
              ) -> Dict[str, Dict[str, Dict[str, Optional[float]]]]:
  """{variant: {metric: mean_std over its seeds}} of `results` ({variant: one result dict per seed})."""
  return {variant: {m: mean_std(r.get(m) for r in seeds) for m in metrics} for variant, seeds in results.items()}


def write_summary(output_dir: str, settings: Any, seeds: Sequence[int],
                  results: Mapping[str, Sequence[Mapping[str, Any]]], metrics: Sequence[str],
                  **extra: Any) -> Dict[str, Any]:
  """Writes and returns `<output_dir>/summary.json`: the settings, the seeds, mean ± std per variant and metric, the
  per-seed values, the stages' timing and `extra`."""
  summary = {"settings": dataclasses.asdict(settings) if dataclasses.is_dataclass(settings) else settings,
             "seeds": list(seeds), "summary": summarize(results, metrics),
             "per_seed": {v: [{m: r.get(m) for m in metrics} for r in rs] for v, rs in results.items()},
             "stages": stage_times(output_dir), **extra}
  file_io.atomic_write_json(summary_path(output_dir), summary)
  return summary
