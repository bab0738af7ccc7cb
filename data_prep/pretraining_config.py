"""The settings of pretraining data generation (`create_pretraining_data`'s flags, the shard engine's input).

Apart from the binary (`create_pretraining_data`) and the engine (`pretraining_shards`) so that both import it and
neither imports the other. `FORMAT_VERSION` is the shard format's: it enters every shard's fingerprint and manifest.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

from data_prep import pretraining_instances as pi
from data_prep.text_lines import ERROR_MODES

FORMAT_VERSION = 1
LONG_LINE_POLICIES = ("split", "truncate", "keep")


@dataclasses.dataclass
class GenerationConfig:
  """Everything `create_pretraining_data` needs; field names are the flag names.

  Attributes:
    input_file: comma-separated files or glob patterns (each pattern must match at least one file).
    output_file: one path (with num_output_shards > 1 a prefix: `<prefix>-00000-of-00008`) or a comma list of
      shard paths.
    spm_model_file: SentencePiece model (ids <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4).
    vocab_file: accepted for reference compatibility; ignored (WordPiece data is not supported).
    do_lower_case: lower-case the text before tokenizing.
    tokenizer_mode: `FullTokenizer` mode; "hf" (default, the one default of the whole recipe: vocabulary,
      pretraining data, fine-tuning data, SavedModels) is HF's slow tokenizer (`` and '' become ", special-token
      strings in the text become their ids — counted in the stats as `lines_with_special_token_text`);
      "reference" the reference's preprocess_text + encode_pieces (§2.1: quotes and special-token strings stay
      plain text); "upstream_py3" the upstream code under Python 3 (§2.2 item 3). Whatever the mode, give the same
      one to train_sentencepiece, create_finetuning_data and the export.
    options: the instance-creation options (reference flags).
    random_seed: the one seed of every draw (>= 0).
    dupe_factor: passes over the data, each with new masks / segment choices.
    num_output_shards: shards to write (0 = one per comma-separated output path).
    num_workers: parallel processes (1 = in this process).
    shuffle_buffer_size: per-shard instance shuffle buffer (records in RAM per worker).
    long_line_policy: lines with more tokens than max_seq_length - 3: "split" into consecutive sentences of at most
      that many tokens (default), "truncate" to that many, or "keep" (reference: the pair truncation cuts them).
    errors: "strict" (default) fails on undecodable UTF-8 naming file:line; "replace" uses U+FFFD and counts lines.
    stats_file: where to write the stats JSON (default `<output>.stats.json`).
    progress: draw a progress line on stderr.
  """
  input_file: str
  output_file: str
  spm_model_file: str
  vocab_file: Optional[str] = None
  do_lower_case: bool = True
  tokenizer_mode: str = "hf"
  options: pi.InstanceOptions = dataclasses.field(default_factory=pi.InstanceOptions)
  random_seed: int = 12345
  dupe_factor: int = 40
  num_output_shards: int = 0
  num_workers: int = 1
  shuffle_buffer_size: int = 20000
  long_line_policy: str = "split"
  errors: str = "strict"
  stats_file: Optional[str] = None
  progress: bool = True

  def validate(self) -> None:
    self.options.validate()
    if self.random_seed < 0:
      raise ValueError(f"--random_seed must be >= 0, got {self.random_seed}.")
    if self.dupe_factor < 1:
      raise ValueError(f"--dupe_factor must be >= 1, got {self.dupe_factor}.")
    if self.num_workers < 1:
      raise ValueError(f"--num_workers must be >= 1, got {self.num_workers}.")
    if self.shuffle_buffer_size < 1:
      raise ValueError(f"--shuffle_buffer_size must be >= 1, got {self.shuffle_buffer_size}.")
    if self.long_line_policy not in LONG_LINE_POLICIES:
      raise ValueError(f"--long_line_policy must be one of {LONG_LINE_POLICIES}, got {self.long_line_policy!r}.")
    if self.errors not in ERROR_MODES:
      raise ValueError(f"--errors must be one of {ERROR_MODES}, got {self.errors!r}.")
    if not self.spm_model_file:
      raise ValueError("--spm_model_file is required (WordPiece-only data from --vocab_file is not supported).")

  def generation_key(self) -> Dict[str, object]:
    """The settings that determine the output bytes (for the fingerprint; no worker count, no paths)."""
    return {"format_version": FORMAT_VERSION, "do_lower_case": self.do_lower_case,
            "tokenizer_mode": self.tokenizer_mode, "options": dataclasses.asdict(self.options),
            "random_seed": self.random_seed, "dupe_factor": self.dupe_factor,
            "shuffle_buffer_size": self.shuffle_buffer_size, "long_line_policy": self.long_line_policy,
            "errors": self.errors}

  def stats_generation(self, spm_hash: str) -> Dict[str, object]:
    """The stats file's `generation` section: `generation_key` plus the SentencePiece model's SHA-256
    (`spm_model_sha256`), by which the pretraining task refuses records of two models, or of another model than
    task.spm_model_file, whose ids would be other pieces (the piece counts may agree)."""
    return dict(self.generation_key(), spm_model_sha256=spm_hash)
