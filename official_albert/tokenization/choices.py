"""Multiple-choice packing (RACE, reference §5.3): one `[CLS] article [SEP] question+option [SEP]` row per option.

Shared by the RACE records (`tasks.race`, which re-exports `qa_text`) and the multiple-choice predictor
(`serving.task_pipelines.multiple_choice`), so a prediction packs its choices exactly as the records were made.

A question with "_" has every "_" replaced by the option, otherwise the text is "question option"; the qa part keeps
its LAST `max_qa_length` tokens (the option sits there) and the article is cut from the end to fit.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from official_albert.tokenization.tokenizer import pack_ids

# The reference's RACE rows: 512 pieces, of which the question and option keep at most 128.
REFERENCE_SEQ_LENGTH, REFERENCE_QA_LENGTH = 512, 128


def fit_qa_length(max_seq_length: int, max_qa_length: Optional[int] = None) -> int:
  """The question+option cap for rows of `max_seq_length` pieces; a value given is kept.

  Why: the reference's 128 is kept wherever it fits (records made by `create_finetuning_data` with its default still
  match), but a model of fewer than 132 positions (a tiny model's 128) would be refused outright. There the
  reference's quarter of the row is kept instead: 128 pieces keep 32 for the question and option.
  """
  if max_qa_length is not None:
    return int(max_qa_length)
  if max_seq_length >= REFERENCE_QA_LENGTH + 4:
    return REFERENCE_QA_LENGTH
  return max(1, REFERENCE_QA_LENGTH * max_seq_length // REFERENCE_SEQ_LENGTH)


def qa_text(question: str, option: str) -> str:
  """Fills every "_" blank with the option, else "question option" (reference)."""
  if "_" in question:
    return question.replace("_", option)
  return question + " " + option


def pack_choices(tokenizer, article: str, question: str, options: Sequence[str], max_seq_length: int = 512,
                 max_qa_length: int = 128) -> List[Dict[str, List[int]]]:
  """One packed row (`pack_ids`, padded to `max_seq_length`) per option.

  Args:
    tokenizer: a `FullTokenizer`.
    article, question, options: the passage, the question (may hold "_" blanks) and the option texts.
    max_seq_length, max_qa_length: reference 512 / 128.
  """
  if max_seq_length < max_qa_length + 4:
    raise ValueError(f"max_seq_length={max_seq_length} must be at least max_qa_length + 4 = {max_qa_length + 4}.")
  article_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(article))
  rows = []
  for option in options:
    qa_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(qa_text(question, option)))
    qa_ids = qa_ids[-max_qa_length:]  # Keep the end: the option sits there.
    # The reference cuts the article (not longest-first) so that the question and option always fit.
    rows.append(pack_ids(article_ids[:max_seq_length - len(qa_ids) - 3], qa_ids, max_seq_length))
  return rows
