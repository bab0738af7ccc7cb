"""Reading SQuAD v1.1 / v2.0 JSON files into `SquadExample`s (reference §5.2 "Examples"), with named errors.

A malformed file is reported with the file, the article (index and title), the paragraph index, the question id
when there is one, the missing or wrong key and the expected layout — never a bare `KeyError` or a JSON error
without the file name, since the user has to find the entry among ~100k questions.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from typing import Any, List, Optional, Tuple

from official_albert import file_io
from tasks import squad_evaluate_inputs

logger = logging.getLogger(__name__)

NESTED_LAYOUT = ('{"version": ..., "data": [{"title": ..., "paragraphs": [{"context": ..., "qas": [{"id": ..., '
                 '"question": ..., "answers": [{"text": ..., "answer_start": ...}], "is_impossible": ... (v2.0)}]}]}]}')
FLAT_LAYOUT = ('{"data": [{"id": ..., "title": ..., "context": ..., "question": ..., "answers": {"text": [...], '
               '"answer_start": [...]}}]} (HF datasets rows)')


class SquadDataError(ValueError):
  """A SQuAD file is malformed; the message names the file, the entry and the question id."""


@dataclasses.dataclass
class SquadExample:
  """One question.

  Attributes:
    qas_id: question id.
    question_text: the question.
    paragraph_text: the original context.
    orig_answer_text: the first gold answer ("" when impossible; None when the file has no answer).
    start_char: its character offset in `paragraph_text` (-1 when impossible / unknown).
    is_impossible: SQuAD 2.0 unanswerable question.
    answers: every gold answer text (for evaluation).
  """
  qas_id: str
  question_text: str
  paragraph_text: str
  orig_answer_text: Optional[str] = None
  start_char: int = -1
  is_impossible: bool = False
  answers: List[str] = dataclasses.field(default_factory=list)


def _json_kind(value: Any) -> str:
  return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
      type(value), "number")


def _field(entry: Any, key: str, kind: type, where: str, layout: str = NESTED_LAYOUT) -> Any:
  """entry[key], checked to be present and of `kind`; else a SquadDataError naming `where`, the key and the layout."""
  if not isinstance(entry, dict):
    raise SquadDataError(f"{where}: expected a JSON object, got a JSON {_json_kind(entry)}. Fix the file; expected "
                         f"layout: {layout}")
  if key not in entry:
    raise SquadDataError(f"{where}: missing key {key!r}. Fix the file; expected layout: {layout}")
  value = entry[key]
  kinds = (int, float) if kind is float else kind
  if not isinstance(value, kinds) or (kind in (int, float) and isinstance(value, bool)):
    raise SquadDataError(f"{where}: {key!r} is a JSON {_json_kind(value)}, expected a JSON "
                         f"{_json_kind(kind()) if kind not in (int, float) else 'number'}. Fix the file; expected "
                         f"layout: {layout}")
  return value


def _answer_start(answer: Any, where: str) -> int:
  """An answer's character offset: an integer (or an integral number / digit string, as older tools wrote it)."""
  value = _field(answer, "answer_start", object, where)
  try:
    start = int(value)
  except (TypeError, ValueError):
    start = None
  if start is None or isinstance(value, bool) or start != value and str(start) != str(value).strip():
    raise SquadDataError(f"{where}: 'answer_start' must be a character offset (an integer), got {value!r}.")
  if start < 0:
    raise SquadDataError(f"{where}: 'answer_start' is {start}; a character offset counts from 0 at the context's "
                         "start (an unanswerable question has no answers, or 'is_impossible': true).")
  return start


_TRUTH = {"true": True, "false": False, "1": True, "0": False}


def _is_impossible(qa: dict, default: bool, where: str) -> bool:
  """The question's `is_impossible`: a JSON boolean, 0 / 1, or the strings "true" / "false" some converters write
  ("false" is no answerless question: bool("false") would make it one)."""
  if "is_impossible" not in qa:
    return default
  value = qa["is_impossible"]
  if isinstance(value, bool):
    return value
  if isinstance(value, int) and value in (0, 1):
    return bool(value)
  if isinstance(value, str) and value.strip().lower() in _TRUTH:
    return _TRUTH[value.strip().lower()]
  raise SquadDataError(f"{where}: 'is_impossible' must be true or false, got {value!r}.")


def _load_json(path: str):
  """The parsed file; a JSON or encoding error names the file and the fix."""
  return file_io.read_json(path, fix="Fix the file or download it again (a SQuAD file is one UTF-8 JSON object).",
                           error=SquadDataError)


def _flat_to_nested(path: str, data: List[dict]) -> List[dict]:
  """HF-datasets rows (id/question/context/answers{answer_start, text}) → official articles/paragraphs/qas."""
  paragraphs: "collections.OrderedDict[Tuple[str, str], dict]" = collections.OrderedDict()
  first_row = {}  # str(id) → row index: a repeated id is named by its rows here (check_dataset sees only articles).
  for i, row in enumerate(data):
    where = f"{path}: row {i}" + (f" (id {row['id']!r})" if isinstance(row, dict) and "id" in row else "")
    qid = _field(row, "id", object, where, FLAT_LAYOUT)
    if str(qid) in first_row:
      raise SquadDataError(f"{where}: the question id {qid!r} is used again (first at row {first_row[str(qid)]}). "
                           "Predictions and scores keep one answer per id. Fix the file: give each question its own "
                           "id (e.g. prefix the ids of merged files).")
    first_row[str(qid)] = i
    context = _field(row, "context", str, where, FLAT_LAYOUT)
    question = _field(row, "question", str, where, FLAT_LAYOUT)
    key = (row.get("title", ""), context)
    para = paragraphs.setdefault(key, {"context": context, "qas": []})
    answers = row.get("answers") or {"text": [], "answer_start": []}
    texts = _field(answers, "text", list, f"{where}, 'answers'", FLAT_LAYOUT)
    starts = _field(answers, "answer_start", list, f"{where}, 'answers'", FLAT_LAYOUT)
    if len(texts) != len(starts):
      raise SquadDataError(f"{where}: 'answers' has {len(texts)} texts but {len(starts)} answer_start values; they "
                           "must pair up.")
    qa = {"id": qid, "question": question, "answers": [{"text": t, "answer_start": s} for t, s in zip(texts, starts)]}
    if "is_impossible" in row:
      qa["is_impossible"] = row["is_impossible"]
    para["qas"].append(qa)
  return [{"title": "", "paragraphs": list(paragraphs.values())}]


def load_dataset(path: str) -> Tuple[List[dict], str]:
  """Reads a SQuAD file (official nested format, or flat HF-datasets rows) → (articles, version "1.1"/"2.0")."""
  return parse_dataset(path, _load_json(path))


def parse_dataset(path: str, data: Any) -> Tuple[List[dict], str]:
  """`load_dataset` of the already parsed JSON `data` of `path` (the evaluator has parsed the file already)."""
  if not isinstance(data, dict) or "data" not in data:
    raise SquadDataError(f"{path}: not a SQuAD file (expected a JSON object with 'data', got a JSON "
                         f"{_json_kind(data)}{' without data' if isinstance(data, dict) else ''}). Expected layout: "
                         f"{NESTED_LAYOUT}")
  articles = _field(data, "data", list, path)
  if articles and isinstance(articles[0], dict) and "paragraphs" not in articles[0]:
    if "context" not in articles[0]:
      raise SquadDataError(f"{path}: article 0 ({articles[0].get('title', '')!r}): missing key 'paragraphs' (and "
                           f"no 'context' for a flat row). Expected layout: {NESTED_LAYOUT} or {FLAT_LAYOUT}")
    articles = _flat_to_nested(path, articles)
    # Flat files mark unanswerable questions only by an empty answer list; their version field decides.
  try:
    squad_evaluate_inputs.check_dataset(articles, path, need_answers=False)
  except ValueError as e:
    raise SquadDataError(str(e)) from None
  version = squad_evaluate_inputs.detect_version({"version": data.get("version", ""), "data": articles})
  return articles, version


def read_squad_examples(path: str, is_training: bool, version_2_with_negative: Optional[bool] = None
                        ) -> List[SquadExample]:
  """Reads a SQuAD v1.1/v2.0 file.

  Args:
    path: the JSON file.
    is_training: training needs exactly one answer per answerable question (reference rule).
    version_2_with_negative: None = from the file; True allows unanswerable questions.

  Raises:
    SquadDataError: invalid JSON, a missing or mistyped key, a question id used twice (both places named), empty
      context, an answer text not at its answer_start, or a training question without exactly one answer; the
      message names the file, the article and paragraph, the question id and the key.
  """
  articles, version = load_dataset(path)
  v2 = version == "2.0" if version_2_with_negative is None else version_2_with_negative
  examples, off_start = [], []
  for a_index, article in enumerate(articles):
    title = article.get("title", "")
    for p_index, para in enumerate(article["paragraphs"]):
      where_p = f"{path}: article {a_index} ({title!r}), paragraph {p_index}"
      context = _field(para, "context", str, where_p)
      for qa in para["qas"]:
        qid = qa["id"]
        where = f"{where_p}, question {qid}"
        question = _field(qa, "question", str, where)
        if not context.strip():
          raise SquadDataError(f"{path}: question {qid}: empty context ({where_p}).")
        if is_training and "answers" not in qa and not qa.get("is_impossible"):
          _field(qa, "answers", list, f"{where} (training data needs the gold answer)")
        answers = qa.get("answers") or []
        is_impossible = _is_impossible(qa, v2 and not answers, where)
        if is_impossible and not v2:
          raise SquadDataError(f"{path}: question {qid} is unanswerable but the data is SQuAD v1.1.")
        parsed = []
        for k, ans in enumerate(answers):
          text = _field(ans, "text", str, f"{where}, answer {k}")
          start = _answer_start(ans, f"{where}, answer {k}")
          if context[start:start + len(text)] != text:
            if is_training:
              raise SquadDataError(
                  f"{path}: question {qid}: answer {text!r} is not at answer_start={start} "
                  f"(context there: {context[start:start + len(text)]!r}).")
            # Scoring reads only the answers' texts (the official scripts ignore answer_start): counted, kept.
            off_start.append(qid)
            start = -1
          parsed.append((text, start))
        if is_training and not is_impossible and answers and not parsed[0][0].strip():
          raise SquadDataError(f"{path}: question {qid}: the answer's text is empty; an answerable training question "
                               "needs its answer (an unanswerable one has no answers, or 'is_impossible': true).")
        if is_impossible:
          orig, start_char = "", -1
        elif answers:
          if is_training and len(answers) != 1:
            raise SquadDataError(f"{path}: question {qid}: training questions need exactly 1 answer, "
                                 f"got {len(answers)}.")
          orig, start_char = parsed[0]
        elif is_training:
          raise SquadDataError(f"{path}: question {qid}: training question has no answer.")
        else:
          orig, start_char = None, -1
        examples.append(SquadExample(
            qas_id=qid, question_text=question, paragraph_text=context, orig_answer_text=orig,
            start_char=start_char, is_impossible=is_impossible, answers=[text for text, _ in parsed]))
  if off_start:
    logger.warning("%s: %d answers of %d questions are not at their answer_start (e.g. question %s); they are scored "
                   "by their text, and give no span label.", path, len(off_start), len(set(off_start)), off_start[0])
  logger.info("%s: %d SQuAD v%s examples.", path, len(examples), "2.0" if v2 else "1.1")
  return examples
