"""A retrieval set in BEIR's folder format, read as BEIR's `GenericDataLoader` reads it.

The folder holds `corpus.jsonl` (`{"_id", "title", "text"}` per line), `queries.jsonl` (`{"_id", "text"}`) and
`qrels/<split>.tsv` (`query-id`, `corpus-id`, `score`, tab-separated, a header line first): the layout of BEIR,
MTEB's retrieval tasks and most retrieval sets published since; any of the three may be gzip-compressed instead
(`corpus.jsonl.gz`, as large sets are published). A document is embedded as BEIR's dense models embed
it, `(title + " " + text).strip()` (the text alone when there is no title); a judgment of grade 0 is "judged, not
relevant"; the queries scored are the qrels' queries with a document of grade > 0 (as BEIR and sentence-transformers'
InformationRetrievalEvaluator score them).

Where BEIR's loader is silent, the reading is strict, as the row tasks read users' files (`tasks.row_files`):
files are read a line at a time; a line that is not a JSON object with a string `_id` and `text`, or a qrels line
without three fields and an integer grade, is an error naming file:line and the fix; an id given twice with the same
text is read once (a counted warning), with another text it is an error naming both lines (BEIR keeps the last one
silently); a qrels line for a query the queries file lacks is an error (BEIR raises a bare KeyError), one for a
document the corpus lacks is counted and logged (it stays relevant, so it counts in recall's denominator, as in
BEIR and the evaluator). The qrels' first line is skipped only when it is a header (its grade is not a number):
BEIR skips it always, which drops the first judgment of a file written without one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Dict, Iterator, List, Set, Tuple

from official_albert import file_io
from tasks.row_files import lone_surrogate
from tasks.row_files import text_lines
from tasks.row_files import TextDataError

logger = logging.getLogger(__name__)

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_FOLDER = "qrels"


@dataclasses.dataclass
class RetrievalSet:
  """Texts by id and the graded qrels of one split (`read_beir`)."""
  corpus: Dict[str, str]
  queries: Dict[str, str]
  qrels: Dict[str, Dict[str, int]]
  folder: str = ""
  split: str = ""

  def scored_query_ids(self) -> List[str]:
    """The queries with a judgment of grade > 0, in the queries file's order: those BEIR scores (a query judged only
    with grade 0, or not at all, has nothing to find)."""
    return [q for q in self.queries if any(g > 0 for g in self.qrels.get(q, {}).values())]

  def identical_ids(self, query_ids: List[str]) -> Dict[str, Set[str]]:
    """query → {its own id} where the corpus holds a document of that id not judged relevant to it: the `ignore`
    of BEIR's ignore_identical_ids (a query that is itself a document scores cosine 1.0 against it)."""
    return {q: {q} for q in query_ids if q in self.corpus and self.qrels.get(q, {}).get(q, 0) <= 0}

  def files(self) -> List[str]:
    """The three files this split is read from (corpus, queries, qrels)."""
    return split_files(self.folder, self.split)

  def run_candidates(self, run: Dict[str, List[Tuple[str, float]]], run_file: str, query_ids: List[str],
                     run_depth: int = 100, ignore_identical_ids: bool = True) -> Dict[str, List[str]]:
    """Each of `query_ids`' candidates in `run` (a run file's, `official_albert.retrieval.run_files`), best first,
    the query's own id left out unless judged relevant (`identical_ids`; kept with `ignore_identical_ids` False).

    Raises:
      ValueError: the run ranks none for one of `query_ids`, or names a document the corpus lacks (a run of
        another split or corpus: the message says how to write this split's, at `run_depth`).
    """
    missing = [q for q in query_ids if q not in run]
    if missing:
      raise ValueError(
          f"{run_file} ranks no candidate for {len(missing)} of the {len(query_ids)} queries that {self.folder} "
          f"judges on its {self.split!r} split (e.g. {missing[:3]}); the run must be a first stage's ranking of this "
          f"split's queries: write it with `python -m tasks.retrieval_evaluate --model_dir=EMBEDDER "
          f"--data_dir={self.folder} --split={self.split} --run_file={run_file} --run_depth={run_depth}`.")
    unknown = sorted({d for q in query_ids for d, _ in run[q] if d not in self.corpus})
    if unknown:
      raise ValueError(f"{run_file} ranks {len(unknown)} document id(s) that {self.folder}'s corpus lacks (e.g. "
                       f"{unknown[:3]}): the run was written on another corpus; write it again on this folder.")
    left_out = self.identical_ids(query_ids) if ignore_identical_ids else {}
    extra = len(set(run) - set(query_ids))
    if extra:
      logger.info("%s: %d ranked queries that %s does not judge on %r are left out.", run_file, extra, self.folder,
                  self.split)
    return {q: [d for d, _ in run[q] if d not in left_out.get(q, ())] for q in query_ids}


def split_files(folder: str, split: str) -> List[str]:
  """[corpus.jsonl, queries.jsonl, qrels/<split>.tsv] of `folder`, each as `<name>.gz` where only that exists
  (large sets are published gzip-compressed; `row_files.text_lines` reads them as they decompress)."""
  root = folder.rstrip("/")
  paths = [f"{root}/{CORPUS_FILE}", f"{root}/{QUERIES_FILE}", f"{root}/{QRELS_FOLDER}/{split}.tsv"]
  return [p + ".gz" if not file_io.exists(p) and file_io.exists(p + ".gz") else p for p in paths]


def check_files(folder: str, split: str) -> List[str]:
  """`split_files(folder, split)`, once each exists (else FileNotFoundError listing the splits the folder has)."""
  paths = split_files(folder, split)
  for path in paths:
    if not file_io.exists(path):
      splits = sorted({p.rsplit("/", 1)[-1].split(".tsv")[0]
                       for p in file_io.glob(f"{folder.rstrip('/')}/{QRELS_FOLDER}/*.tsv*")})
      raise FileNotFoundError(f"{path} does not exist: a BEIR-format folder holds {CORPUS_FILE}, {QUERIES_FILE} and "
                              f"{QRELS_FOLDER}/<split>.tsv, each plain or as <name>.gz (this folder's splits: "
                              f"{splits or 'none'}).")
  return paths


def is_beir_folder(input_path: str) -> bool:
  """Whether `input_path` names one folder (a BEIR-format set, which `read_beir` reads and checks), not files."""
  path = input_path.strip()
  return bool(path) and "," not in path and file_io.isdir(path)


def _objects(path: str) -> Iterator[Tuple[int, dict]]:
  """(line number, object) of a JSONL file; blank lines passed over."""
  for number, line in text_lines(path):
    if not line.strip():
      continue
    try:
      value = json.loads(line)
    except json.JSONDecodeError as e:
      raise TextDataError(f"{path}:{number}: not JSON ({e.msg}); each line must be one JSON object.") from None
    if not isinstance(value, dict):
      raise TextDataError(f"{path}:{number}: a JSON {type(value).__name__}, not an object with \"_id\" and \"text\".")
    surrogate = lone_surrogate(line, value)
    if surrogate:
      raise TextDataError(f"{path}:{number}: {surrogate}.")
    yield number, value


def _texts(path: str, document: bool) -> Dict[str, str]:
  """id → text of corpus.jsonl (`document`: the title joined in front) or queries.jsonl."""
  texts: Dict[str, str] = {}
  lines: Dict[str, int] = {}
  repeated = 0
  for number, row in _objects(path):
    key, text, title = row.get("_id"), row.get("text"), row.get("title") if document else None
    if isinstance(key, int) and not isinstance(key, bool):
      key = str(key)  # (ids written as JSON numbers: the qrels name them as text)
    if not isinstance(key, str) or not key:
      raise TextDataError(f"{path}:{number}: \"_id\" must be a non-empty string, got {key!r}.")
    if not isinstance(text, str) or (title is not None and not isinstance(title, str)):
      raise TextDataError(f"{path}:{number}: \"text\"" + (" and \"title\"" if document else "") +
                          f" must be strings (id {key!r}; got text {text!r}" + (f", title {title!r}" if document
                                                                                else "") + ").")
    if title is not None:
      text = (title + " " + text).strip()
    elif document:
      text = text.strip()
    if key in texts:
      if texts[key] != text:
        raise TextDataError(f"{path}:{number}: id {key!r} again, with another text than on line {lines[key]}; give "
                            "each text its own id (an id must name one text).")
      repeated += 1
      continue
    texts[key], lines[key] = text, number
  if repeated:
    logger.warning("%s: %d lines repeat an id with the same text; each read once.", path, repeated)
  shared = len(texts) - len(set(texts.values()))
  if shared and document:
    logger.warning("%s: %d documents have the text of another id: they score exactly alike, and equal scores rank "
                   "the relevant documents last (official_albert.retrieval.metrics), where pytrec_eval breaks ties "
                   "by id: a metric may be below the one pytrec_eval gives on these ids.", path, shared)
  if not texts:
    raise TextDataError(f"{path}: no rows; expected one JSON object per line with \"_id\" and \"text\".")
  return texts


def _qrels(path: str, queries: Dict[str, str], corpus: Dict[str, str]) -> Dict[str, Dict[str, int]]:
  qrels: Dict[str, Dict[str, int]] = {}
  where: Dict[Tuple[str, str], int] = {}
  missing_documents, first = 0, True
  for number, line in text_lines(path):
    fields = line.rstrip("\r\n").split("\t")
    if not line.strip():
      continue
    if len(fields) < 3:
      trec = len(line.split()) == 4  # TREC's qrels: query Q0 document grade, space-separated
      raise TextDataError(f"{path}:{number}: {len(fields)} tab-separated field(s); a qrels line is query-id, "
                          "corpus-id and score (an integer grade), separated by tabs" +
                          (" (this line reads as TREC's `query Q0 document grade`: keep fields 1, 3 and 4, "
                           "tab-separated)." if trec else "."))
    query, document, grade_text = fields[0].strip(), fields[1].strip(), fields[2].strip()
    try:
      grade = int(grade_text)
    except ValueError:
      if first:  # the header (query-id, corpus-id, score)
        first = False
        continue
      raise TextDataError(f"{path}:{number}: score {grade_text!r} is not an integer grade (0 = judged not relevant, "
                          "1 or more = relevant).") from None
    first = False
    if query not in queries:
      raise TextDataError(f"{path}:{number}: query {query!r} is not in {QUERIES_FILE}; add it there or remove its "
                          "judgments.")
    previous = qrels.setdefault(query, {}).get(document)
    if previous is not None and previous != grade:
      raise TextDataError(f"{path}:{number}: ({query!r}, {document!r}) graded {grade} here and {previous} on line "
                          f"{where[query, document]}; keep one grade per pair.")
    qrels[query][document], where[query, document] = grade, number
    missing_documents += document not in corpus
  if missing_documents:
    logger.warning("%s: %d judgments name documents %s lacks; they still count as relevant (recall's denominator), "
                   "as BEIR counts them.", path, missing_documents, CORPUS_FILE)
  if not any(grade > 0 for grades in qrels.values() for grade in grades.values()):
    raise TextDataError(f"{path}: no judgment with a grade above 0, so no query can be scored.")
  return qrels


def read_texts(folder: str) -> RetrievalSet:
  """The corpus and the queries of a BEIR-format folder, without judgments (`qrels` empty): what reranking a run
  for a split whose judgments are hidden (a leaderboard's test split) needs.

  Raises:
    FileNotFoundError, TextDataError: as `read_beir`.
  """
  root = folder.rstrip("/")
  paths = []
  for name in (CORPUS_FILE, QUERIES_FILE):
    path = f"{root}/{name}"
    path = path + ".gz" if not file_io.exists(path) and file_io.exists(path + ".gz") else path
    if not file_io.exists(path):
      raise FileNotFoundError(f"{path} does not exist: a BEIR-format folder holds {CORPUS_FILE} and {QUERIES_FILE}, "
                              "each plain or as <name>.gz.")
    paths.append(path)
  return RetrievalSet(_texts(paths[0], document=True), _texts(paths[1], document=False), {}, folder, "")


def read_beir(folder: str, split: str = "test") -> RetrievalSet:
  """The corpus, the queries and `qrels/<split>.tsv` of a BEIR-format folder (the module docstring).

  Raises:
    FileNotFoundError: a file is missing (the message lists the splits the folder has).
    TextDataError: a malformed line or an id conflict, naming file:line and the fix.
  """
  corpus_path, queries_path, qrels_path = check_files(folder, split)
  corpus = _texts(corpus_path, document=True)
  queries = _texts(queries_path, document=False)
  return RetrievalSet(corpus, queries, _qrels(qrels_path, queries, corpus), folder, split)
