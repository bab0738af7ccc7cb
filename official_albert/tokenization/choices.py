"""Multiple-choice packing (RACE, reference §5.3): one `[CLS] article [SEP] question+option [SEP]` row per option.

Shared by the RACE records (`tasks.race`, which re-exports `qa_text`) and the multiple-choice predictor
(`serving.task_pipelines.multiple_choice`), so a prediction packs its choices exactly as the records were made.

A question with "_" has every "_" replaced by the option, otherwise the text is "question option"; the qa part keeps
its LAST `max_qa_length` tokens (the option sits there) and the article is cut from the end to fit. As in the
reference, which looks for "_" in the preprocessed question, a blank is also any character that NFKD turns into "_"
(the full-width "＿" of CJK texts, the dashed / wavy low lines) unless the tokenizer keeps accents (no NFKD).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence

from official_albert.tokenization.tokenizer import pack_ids

# The reference's RACE rows: 512 pieces, of which the question and option keep at most 128.
REFERENCE_SEQ_LENGTH, REFERENCE_QA_LENGTH = 512, 128
# The blanks of a tokenizer that NFKDs (keep_accents False): "_" and every character whose NFKD form is "_" (U+FE33,
# U+FE34, U+FE4D-U+FE4F, U+FF3F; a test checks the list against `unicodedata`), since the reference's
# `preprocess_text` (NFKD) runs before its `"_" in question`. A regex character class for Python's re and RE2 alike.
NFKD_BLANKS = "[_\ufe33\ufe34\ufe4d-\ufe4f\uff3f]"
_BLANKS = {False: re.compile(NFKD_BLANKS), True: re.compile("_")}  # by keep_accents


def fit_qa_length(max_seq_length: int, max_qa_length: Optional[int] = None) -> int:
  """The question+option cap for rows of `max_seq_length` pieces; a value given is kept.

  Why: the reference's 128 is kept wherever it fits (records made by `create_finetuning_data` with its default still
  match), but a model of fewer than 132 positions (a tiny model's 128) would be refused outright. There the
  reference's quarter of the row is kept instead: 128 pieces keep 32 for the question and option.
  """
  if max_qa_length is not None:
    return check_qa_length(int(max_qa_length))
  if max_seq_length >= REFERENCE_QA_LENGTH + 4:
    return REFERENCE_QA_LENGTH
  return max(1, REFERENCE_QA_LENGTH * max_seq_length // REFERENCE_SEQ_LENGTH)


def check_qa_length(max_qa_length: int) -> int:
  """`max_qa_length`, or ValueError when it is below 1.

  Why: the qa part keeps `qa_ids[-max_qa_length:]`; 0 would keep all of it (no cap, and the article's negative cut
  then drops its end and the option with it) and -k would drop the question's first k pieces and the article.
  """
  if max_qa_length < 1:
    raise ValueError(f"max_qa_length={max_qa_length}: the question+option cap must be at least 1 (each row keeps the "
                     "last max_qa_length pieces of the question and option); set --max_qa_length / "
                     "task.max_qa_length / multiple_choice(max_qa_length=...) to a positive number (the reference's "
                     "128), or leave it unset to fit the model's length.")
  return max_qa_length


def qa_text(question: str, option: str, keep_accents: bool = False) -> str:
  """Fills every "_" blank with the option, else "question option" (reference).

  Args:
    question, option: the raw texts (the tokenizer preprocesses the result).
    keep_accents: the tokenizer's `keep_accents`. False (the reference's and FullTokenizer's default): a character
      that the preprocessing's NFKD turns into "_" ("＿") is a blank too, as the reference tests "_" on the
      preprocessed question; True: the tokenizer does no NFKD, so only "_" is.
  """
  blank = _BLANKS[bool(keep_accents)]
  if blank.search(question):
    return blank.sub(lambda _: option, question)  # (a function: the option's backslashes stay text)
  return question + " " + option


def pack_choices(tokenizer, article: str, question: str, options: Sequence[str], max_seq_length: int = 512,
                 max_qa_length: int = 128) -> List[Dict[str, List[int]]]:
  """One packed row (`pack_ids`, padded to `max_seq_length`) per option.

  Args:
    tokenizer: a `FullTokenizer`.
    article, question, options: the passage, the question (may hold "_" blanks) and the option texts.
    max_seq_length, max_qa_length: reference 512 / 128 (max_qa_length at least 1).
  """
  check_qa_length(max_qa_length)
  if max_seq_length < max_qa_length + 4:
    raise ValueError(f"max_seq_length={max_seq_length} must be at least max_qa_length + 4 = {max_qa_length + 4}.")
  article_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(article))
  rows = []
  for option in options:
    # (A duck-typed tokenizer without `keep_accents` gets the reference's NFKD blanks.)
    qa = qa_text(question, option, getattr(tokenizer, "keep_accents", False))
    qa_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(qa))
    qa_ids = qa_ids[-max_qa_length:]  # Keep the end: the option sits there.
    # The reference cuts the article (not longest-first) so that the question and option always fit.
    rows.append(pack_ids(article_ids[:max_seq_length - len(qa_ids) - 3], qa_ids, max_seq_length))
  return rows
