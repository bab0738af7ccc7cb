"""The paper's ablations as studies of variants: what each variant trains, the settings they share, and the paper's
numbers to set beside ours.

Every variant of a study is the tiny demo model (`experiments.pretraining.TINY_MODEL`: E 64, H 128, 4 layers, 4
heads, FFN 512) with one thing changed, trained on the same records, for the same steps, from the same seeds. The
paper's numbers are ALBERT-base after 125k steps of 4096 sequences of 512 (arXiv 1909.11942v6); ours are a model
~1/100 of that width trained ~1/300,000 as long, so the tables compare directions of effects, not values.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, Optional, Tuple

from data_prep import corpus
from experiments import study
from experiments.pretraining import TINY_MODEL

OBJECTIVES = ("none", "nsp", "sop")  # the sentence-level objective a variant trains (Table 5's rows)


@dataclasses.dataclass(frozen=True)
class Variant:
  """One model of a study.

  Attributes:
    name: as the tables print it.
    objective: "sop" (the records' in-document order), "nsp" (records made with `--random_next_sentence`) or "none"
      (the SOP records with `task.sentence_loss_weight=0`: the masked LM alone).
    sharing: `AlbertConfig.sharing` ("all", "attention", "ffn", "none").
    embedding_size: E (None: the tiny model's).
    dropout: hidden and attention-probability dropout.
  """
  name: str
  objective: str = "sop"
  sharing: str = "all"
  embedding_size: Optional[int] = None
  dropout: float = 0.0

  @property
  def slug(self) -> str:
    """The variant's folder name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name).strip("_")

  def model_overrides(self, base: Dict) -> Dict:
    """`task.model` fields of this variant on top of `base` (the study's model)."""
    return dict(base, sharing=self.sharing, embedding_size=self.embedding_size or base["embedding_size"],
                hidden_dropout_prob=self.dropout, attention_probs_dropout_prob=self.dropout)

  def describe(self) -> Dict:
    return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Study:
  """A table or figure of the paper.

  Attributes:
    name: the `--study` value.
    title: what the paper shows there.
    variants: the models trained.
    paper: {variant name: {column: the paper's number}}; a column absent there is printed as "—".
    columns: the table's columns (keys of a run's results), in the paper's order.
    figure: "smoothness" for Figure 1's per-layer curves (also drawn for any study with an all- and a not-shared
      variant).
  """
  name: str
  title: str
  variants: Tuple[Variant, ...]
  paper: Dict[str, Dict[str, float]]
  columns: Tuple[str, ...]
  figure: str = ""

  def variant(self, name: str) -> Variant:
    return next(v for v in self.variants if v.name == name)


SHARING_NAMES = (("all-shared", "all"), ("shared-attention", "attention"), ("shared-FFN", "ffn"),
                 ("not-shared", "none"))
PRETRAINING_COLUMNS = ("parameters", "masked_lm_accuracy", "nsp_accuracy", "sop_accuracy")
DOWNSTREAM = "downstream_average"


def _table3() -> Study:
  # E = 16/32/64/128 at H = 128 are the paper's E = 64/128/256/768 at H = 768 in ratio E/H (1/8 ... 1: E = H has no
  # projection, as the paper's 768 has none).
  variants = tuple(Variant(f"{label} E={e}", sharing=sharing, embedding_size=e)
                   for label, sharing in (("not-shared", "none"), ("all-shared", "all")) for e in (16, 32, 64, 128))
  # The paper's Table 3 (ALBERT-base, H 768, E 64 / 128 / 256 / 768: downstream average and parameters as printed),
  # each beside our variant of the same E/H ratio.
  paper_e = dict(zip((16, 32, 64, 128), (64, 128, 256, 768)))
  printed = {("not-shared", 64): (81.3, 87e6), ("not-shared", 128): (81.7, 89e6), ("not-shared", 256): (81.8, 93e6),
             ("not-shared", 768): (82.3, 108e6), ("all-shared", 64): (79.0, 10e6), ("all-shared", 128): (80.1, 12e6),
             ("all-shared", 256): (79.6, 16e6), ("all-shared", 768): (79.8, 31e6)}
  paper = {f"{label} E={e}": dict(zip((DOWNSTREAM, "parameters"), printed[label, paper_e[e]]))
           for label in ("not-shared", "all-shared") for e in paper_e}
  return Study("table3", "Table 3: embedding size E, not-shared and all-shared (paper: E 64/128/256/768 at H 768; "
               "here E 16/32/64/128 at H 128, the same E/H ratios up to E = H)", variants, paper,
               PRETRAINING_COLUMNS + (DOWNSTREAM,))


def _table4() -> Study:
  variants = tuple(Variant(label, sharing=sharing) for label, sharing in SHARING_NAMES)
  paper = {"all-shared": {DOWNSTREAM: 80.1, "parameters": 12e6}, "shared-attention": {DOWNSTREAM: 81.7,
                                                                                        "parameters": 64e6},
           "shared-FFN": {DOWNSTREAM: 80.2, "parameters": 38e6}, "not-shared": {DOWNSTREAM: 81.6, "parameters": 89e6}}
  return Study("table4", "Table 4: cross-layer parameter sharing (paper: ALBERT-base, E = 128)", variants, paper,
               PRETRAINING_COLUMNS + (DOWNSTREAM,), figure="smoothness")


def _table5() -> Study:
  variants = (Variant("None", objective="none"), Variant("NSP", objective="nsp"), Variant("SOP", objective="sop"))
  paper = {"None": {"masked_lm_accuracy": 54.9, "nsp_accuracy": 52.4, "sop_accuracy": 53.3, DOWNSTREAM: 79.0},
           "NSP": {"masked_lm_accuracy": 54.5, "nsp_accuracy": 90.5, "sop_accuracy": 52.0, DOWNSTREAM: 79.2},
           "SOP": {"masked_lm_accuracy": 54.0, "nsp_accuracy": 78.9, "sop_accuracy": 86.5, DOWNSTREAM: 80.1}}
  return Study("table5", "Table 5: the sentence-level objective (paper: ALBERT-base, held-out pretraining data)",
               variants, paper, ("masked_lm_accuracy", "nsp_accuracy", "sop_accuracy", DOWNSTREAM))


def _dropout() -> Study:
  variants = (Variant("dropout 0.1", dropout=0.1), Variant("no dropout", dropout=0.0))
  return Study("dropout", "Figure 2 / section 4.8: removing dropout (paper: higher MLM accuracy for ALBERT-xxlarge "
               "once it does not overfit, at 1M steps)", variants, {},
               ("masked_lm_accuracy", "sop_accuracy", "train_masked_lm_accuracy", DOWNSTREAM))


def _smoothness() -> Study:
  variants = (Variant("all-shared", sharing="all"), Variant("not-shared", sharing="none"))
  return Study("smoothness", "Figure 1: L2 distance and cosine similarity between each layer's input and output "
               "embeddings (paper: smoother for ALBERT than BERT, not converging to 0)", variants, {},
               PRETRAINING_COLUMNS, figure="smoothness")


STUDIES: Dict[str, Study] = {s.name: s for s in (_table3(), _table4(), _table5(), _dropout(), _smoothness())}


@dataclasses.dataclass
class StudySettings(study.CorpusSettings, study.FinetuneSettings):
  """What every variant of a run shares: corpus, vocabulary, records (the kit's corpus knobs; `seed` is the data's:
  records, vocabulary and held-out split, the same for every variant and seed), model, budget, evaluation,
  fine-tuning (the kit's fine-tuning knobs, as the demo's).

  `full()` is the documented study (the demo's recipe: seq 32 × batch 128, LAMB 0.01, vocabulary 4,000, the demo's
  documentation corpus), `quick()` the test-suite variant.
  """
  train_steps: int
  batch_size: int
  learning_rate: float = 0.01
  warmup_fraction: float = 0.1
  eval_points: int = 5  # held-out evaluations along training (the learning curves), the last at the end
  steps_per_loop: int = 50
  heldout_max: int = 4000  # held-out examples per set, after balancing its labels
  balance_train: bool = True  # subsample the majority label of the training records to 50/50
  probe_examples: int = 512  # held-out examples for Figure 1's per-layer distances
  mixed_precision: str = "float32"
  model: Dict = dataclasses.field(default_factory=lambda: dict(TINY_MODEL))

  @property
  def warmup_steps(self) -> int:
    return max(1, int(self.train_steps * self.warmup_fraction))

  @classmethod
  def full(cls) -> "StudySettings":
    """The demo's corpus and recipe (the README's `make demo` numbers come from the same settings)."""
    return cls(corpus_bytes=None, packages=corpus.DEMO_PACKAGES, vocab_size=4000, seq_length=32,
               max_predictions_per_seq=5, train_steps=1500, batch_size=128)

  @classmethod
  def quick(cls) -> "StudySettings":
    """Small enough for a test: 300 kB of the standard library's documentation, 100 steps of 64."""
    # Every 10th document, not 20th: the 300 kB hold 457 documents, so 45 held-out ones rather than 22.
    return cls(corpus_bytes=300_000, vocab_size=800, seq_length=32, max_predictions_per_seq=5, train_steps=100,
               batch_size=64, dupe_factor=3, eval_points=2,
               heldout_every=10, heldout_max=1500, probe_examples=128, ft_max_train=400, ft_max_dev=200,
               ft_train_steps=30, ft_warmup_steps=3)

  def data_key(self) -> Dict:
    """The settings the shared data depends on (a change rebuilds it)."""
    key = {k: getattr(self, k) for k in ("corpus_bytes", "packages", "vocab_size", "seq_length",
                                         "max_predictions_per_seq", "dupe_factor", "heldout_every", "heldout_max",
                                         "balance_train")}
    return dict(key, data_seed=self.seed)  # its name before `seed` came from the kit: data built then is reused
