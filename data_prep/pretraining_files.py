"""Which files a pretraining-data run reads and writes: `--input_file` and `--output_file` resolved to paths.

Shared by create_pretraining_data, tokenize_corpus and the Beam pipeline, so that every tool reads a file named twice
(under any spelling) once, refuses an output named twice, and removes what earlier runs left the same way: the
shards of another shard count, and the temporaries of a killed run (never those of a run writing now).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Callable, Dict, List, Optional, Sequence

from data_prep.pretraining_shards import InputError
from data_prep.pretraining_shards import manifest_path
from official_albert import file_io
from official_albert.tokenization.spm_model import warn_if_unknown_pieces

logger = logging.getLogger("data_prep.create_pretraining_data")


def resolve_input_files(input_file: str, flag: str = "--input_file") -> List[str]:
  """Comma list of files/globs → sorted files per pattern, in pattern order, duplicates removed.

  A file named twice, under any spelling (`a.txt,./a.txt`, a relative and an absolute path, a symlink), is read once,
  under its first spelling: reading it twice would silently put every document twice into the output. An existing
  path is read as written (`notes [v1].txt` is no pattern: `file_io.literal_path`); a pattern leaves out hidden
  files, as a shell's does (`file_io.glob_visible`). `flag` names the setting in errors.
  """
  gfile = file_io.gfile()
  files: List[str] = []
  seen = set()
  patterns = [p.strip() for p in input_file.split(",") if p.strip()]
  if not patterns:
    raise InputError(f"{flag} is empty.")
  for pattern in patterns:
    matched, hidden = ([pattern], []) if file_io.literal_path(pattern) else file_io.glob_visible(pattern)
    if hidden:
      logger.info("%s pattern %r: %d hidden file(s) left out, as a shell's glob leaves them (e.g. %s); name them "
                  "to read them.", flag, pattern, len(hidden), hidden[:2])
    if not matched:
      raise InputError(f"{flag} pattern {pattern!r} matches no file"
                       f"{f' (only hidden ones, e.g. {hidden[0]!r}: name them)' if hidden else ''}.")
    for path in matched:
      if gfile.isdir(path):
        raise InputError(f"{flag} {path!r} is a directory, not a text file.")
      key = file_io.location_key(path)
      if key not in seen:
        seen.add(key)
        files.append(path)
  return files


def resolve_output_files(output_file: str, num_output_shards: int) -> List[str]:
  """The shard paths for `--output_file` / `--num_output_shards`.

  Raises:
    ValueError: the list names one file twice (under any spelling): the second shard would overwrite the first and
      its records would be lost while the stats still counted them; or a folder (it failed at the last rename, after
      the whole run).
  """
  outputs = [p.strip() for p in output_file.split(",") if p.strip()]
  if not outputs:
    raise ValueError("--output_file is empty.")
  for out in outputs:
    if out.endswith(("/", os.sep)) or file_io.isdir(out):
      raise ValueError(f"--output_file {out!r} is a folder; give a file path or a shard prefix in it, e.g. "
                       f"{os.path.join(out.rstrip('/' + os.sep), 'train')!r}.")
  if len(outputs) > 1:
    if num_output_shards not in (0, len(outputs)):
      raise ValueError(f"--num_output_shards={num_output_shards} but --output_file lists {len(outputs)} files.")
    first: Dict[str, str] = {}
    for out in outputs:
      key = file_io.location_key(out)
      if key in first:
        same = "twice" if first[key] == out else f"twice ({first[key]!r} and {out!r} are the same file)"
        raise ValueError(f"--output_file names {out!r} {same}: every shard needs its own file; list distinct paths "
                         "or give one prefix and --num_output_shards.")
      first[key] = out
    return outputs
  n = num_output_shards or 1
  if n == 1:
    return outputs
  return [f"{outputs[0]}-{i:05d}-of-{n:05d}" for i in range(n)]


def check_outputs_apart(input_files: Sequence[str], outputs: Sequence[str], stats_path: str) -> None:
  """Refuses a run whose outputs would replace an input, before anything is read or written.

  Raises:
    InputError: a shard, its manifest or the stats file is an input file (the run renamed its shard over the user's
      corpus, and reported success), or an input is a file a pretraining-data run wrote (a glob over the output
      folder matched a shard, whose manifest is beside it, or a sidecar).
  """
  inputs = {file_io.location_key(path): path for path in input_files}
  for out in [p for out in outputs for p in (out, manifest_path(out))] + [stats_path]:
    if file_io.location_key(out) in inputs:
      raise InputError(f"--output_file: {out!r} is also an input file ({inputs[file_io.location_key(out)]!r}); "
                       "writing it would replace the corpus. Write the shards to another path (e.g. another folder).")
  for path in input_files:
    if path.endswith((".manifest.json", ".stats.json")) or file_io.exists(manifest_path(path)):
      raise InputError(f"--input_file matched {path!r}, a file a pretraining-data run wrote (a shard, its manifest "
                       "or its stats), not text; narrow the pattern to the corpus files (e.g. *.txt).")


def remove_other_shard_counts(output_file: str, num_shards: int, input_files: Sequence[str] = ()) -> None:
  """Removes `<prefix>-NNNNN-of-MMMMM` shards (and sidecars) of an earlier run with another shard count.

  The documented glob `<prefix>-*` would read them beside this run's shards (records of both runs). Only for a
  single `--output_file` prefix: a comma list names its files, and has no shard names to tell apart. Only what a run
  wrote goes: a shard with its manifest beside it, a manifest, a temporary; never an input file (Beam's text shards
  are named `-NNNNN-of-MMMMM` too: a corpus so named was deleted).
  """
  entries = [p.strip() for p in output_file.split(",") if p.strip()]
  if len(entries) != 1:
    return
  prefix = entries[0]
  shard_re = re.compile(re.escape(os.path.basename(prefix)) + r"-\d{5}-of-(\d{5})")
  inputs = {file_io.location_key(path) for path in input_files}

  def ours(path: str) -> bool:
    if file_io.location_key(path) in inputs:
      return False
    return ".tmp-" in path or path.endswith(".manifest.json") or file_io.exists(manifest_path(path))

  removed = remove_stale_shards(f"{prefix}-", shard_re, lambda m, _: int(m.group(1)) != num_shards, ours)
  if removed:
    logger.warning("Removed %d file(s) of an earlier run with another --num_output_shards (the glob %s-* would have "
                   "read them with this run's): %s", len(removed), prefix, removed[:4])


# ----------------------------------------------------------------------------------- leftovers of earlier runs
def remove_temporaries(outputs: Sequence[str]) -> None:
  """Removes the `<out>.tmp-<pid>-...` files a killed run left (`file_io.remove_dead_temporaries`; a local one whose
  process is alive belongs to a run writing the same output now, and is kept); gs:// ones too (one run owns an
  --output_file)."""
  for out in outputs:
    file_io.remove_dead_temporaries(out, owned=True)


def remove_stale_shards(prefix: str, shard_re: re.Pattern[str], is_stale: Callable[[re.Match[str], bool], bool],
                        ours: Callable[[str], bool] = lambda path: True) -> List[str]:
  """Removes the files `<prefix>*` of shards that an earlier run left and this run did not write; returns them.

  An earlier run over more text (`tokenize_corpus`) or with another shard count (`create_pretraining_data`) leaves
  shards that the documented glob (`<prefix>*`) still reads beside the new ones, so the training data would silently
  hold both runs. Called after the new shards are complete, so a failed run loses nothing it did not replace.

  The files are found by listing the prefix's folder, not by globbing `<prefix>*`: a glob reads `[`, `*`, `?` of a
  folder name as a pattern, so `out/run[2]/` deleted `out/run2/`'s shards (another run's) and kept its own.

  Args:
    prefix: the path every shard name starts with (a local or `scheme://` path; `[`, `*`, `?` are literal).
    shard_re: matches a shard's file name in full, without a `.manifest.json` or `.tmp-...` suffix.
    is_stale: (match of the shard name, whether the file is a temporary `.tmp-...` one) → remove it?
    ours: a file's path → whether a run of this tool wrote it (one it did not is kept whatever its name).
  """
  removed = []
  directory, stem = os.path.split(prefix)
  if not file_io.isdir(directory or "."):
    return removed
  listed = os.listdir(directory or ".") if file_io.is_local(prefix) else file_io.gfile().listdir(directory)
  for name in sorted(n.rstrip("/") for n in listed if n.startswith(stem)):
    path = os.path.join(directory, name)
    base = name.split(".tmp-", 1)[0]
    base = base[:-len(".manifest.json")] if base.endswith(".manifest.json") else base
    match = shard_re.fullmatch(base)
    if match and is_stale(match, ".tmp-" in name) and ours(path):
      file_io.remove(path)
      removed.append(path)
  return removed


# ------------------------------------------------------------------------------ a run's first and last steps
def start_run(outputs: Sequence[str], stats_path: str) -> None:
  """Before the first shard is written, in local and Beam mode alike (one function, so the two cannot drift apart).

  Only a finished run has a stats file: a run killed from here on leaves its new shards mixed with the earlier run's,
  and the earlier run's stats would make that mix look complete; so the old stats file goes first, with the
  temporaries a killed run left.
  """
  if file_io.exists(stats_path):
    file_io.remove(stats_path)
  remove_temporaries(outputs)


def warn_special_token_text(lines: int, tokenizer_mode: str, log: logging.Logger = logger) -> None:
  """Warns (once per run, with the run's total) when `lines` input lines spelled a special token that the tokenizer
  turned into its id: every tool of the recipe (create_pretraining_data, tokenize_corpus) gives the same warning."""
  if lines:
    log.warning("%d input lines spell a special token ([CLS], [SEP], [MASK] or <pad>) that --tokenizer_mode=%s "
                "turned into the token's id (HF behaviour); pass --tokenizer_mode=reference (to every tool of the "
                "recipe) to keep such text as plain pieces.", lines, tokenizer_mode)


def finish_run(summary: Dict[str, object], output_file: str, outputs: Sequence[str], input_files: Sequence[str],
               stats_path: str, tokenizer_mode: str, spm_model_file: Optional[str] = None) -> Dict[str, object]:
  """After every shard is written, in local and Beam mode alike: checks the summary, removes what earlier runs left
  and writes the stats file (last: only a finished run has one); returns `summary`.

  Warns about special-token text (`warn_special_token_text`) and many <unk> ids (`spm_model.warn_if_unknown_pieces`;
  given `spm_model_file`, any <unk> with --do_lower_case=false and an uncased model).

  Raises:
    InputError: no instance was made (no text, or too little per document): the empty shards and their manifests
      are removed, as empty shards are not a result worth keeping.
  """
  if int(summary.get("records", 0)) == 0:
    for out in outputs:
      for path in (out, manifest_path(out)):
        if file_io.exists(path):
          file_io.remove(path)
    if int(summary.get("documents_read", 0)) == 0:
      raise InputError(f"no text in --input_file ({', '.join(input_files)}): every line is blank.")
    raise InputError(f"no instance could be made from --input_file ({', '.join(input_files)}): "
                     f"{summary.get('documents', 0)} documents with tokens.")
  remove_other_shard_counts(output_file, len(outputs), input_files)
  warn_special_token_text(int(summary.get("lines_with_special_token_text", 0)), tokenizer_mode)
  generation = summary.get("generation")
  do_lower_case = bool(generation.get("do_lower_case", True)) if isinstance(generation, dict) else True
  warn_if_unknown_pieces(int(summary.get("unk_tokens", 0)), int(summary.get("text_tokens", 0)), do_lower_case, logger,
                         spm_model_file)
  file_io.atomic_write_json(stats_path, summary)
  return summary
