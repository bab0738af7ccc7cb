"""Text-in predictors of the fine-tuned heads (issue 18): question answering, multiple choice, token classification.

Stub models with chosen logits check the selection logic (the answer in a later window at exact character offsets,
the max-context rule, the v2 null answer, the argmax choice, labels on words' first pieces); tiny random models check
that a model directory's head is read and that the packing is the records'.
"""

import logging
import shutil

import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert import pipelines
from official_albert.data import squad_features
from official_albert.tokenization import choices
from official_albert.tokenization import FullTokenizer
from official_albert.tokenization.alignment import align_tokens
from official_albert.tokenization.alignment import answer_token_span
from tasks import race
from tests import tiny

CONTEXT = ("Naïve readers of the old library found twelve modules in 1990. By 2001 the catalogue listed about three "
           "hundred and forty, or seven percent, of the files; the parser was rewritten twice. A blue heron nested "
           "on the roof of the west wing, and the gardeners  planted\ttulips beside the gate every spring.")
QUESTION = "what nested on the roof?"


@pytest.fixture(scope="module")
def tokenizer(spm_model_file):
  return FullTokenizer(spm_model_file)


class _SpanStub:
  """A span head whose logits are chosen per paragraph token: `score(p, j)` → (start, end) logit of paragraph token
  p at offset j of its window. The window is found by matching its paragraph ids against the whole paragraph's (it
  must be unique), so the stub does not depend on the windowing under test."""

  def __init__(self, para_ids, score, cls=(0.0, 0.0)):
    self.para_ids, self.score, self.cls, self.windows = list(para_ids), score, cls, []

  def __call__(self, inputs, training=False):
    ids, types, mask = (np.asarray(inputs[k]) for k in ("input_word_ids", "input_type_ids", "input_mask"))
    start, end = np.zeros(ids.shape, np.float32), np.zeros(ids.shape, np.float32)
    for b in range(ids.shape[0]):
      positions = np.flatnonzero((types[b] == 1) & (mask[b] == 1))[:-1]  # the paragraph, without the last [SEP]
      window = ids[b, positions].tolist()
      offsets = [k for k in range(len(self.para_ids) - len(window) + 1) if self.para_ids[k:k + len(window)] == window]
      assert len(offsets) == 1, "the stub needs a paragraph whose windows are unique"
      self.windows.append((offsets[0], len(window)))
      for j, position in enumerate(positions):
        start[b, position], end[b, position] = self.score(offsets[0] + j, j)
      start[b, 0], end[b, 0] = self.cls
    return {"start_logits": start, "end_logits": end}


class _SquadV2Stub(_SpanStub):
  """The original v2 head's outputs from the same chosen logits: top starts, top ends per start, `cls_logits`."""

  def __init__(self, para_ids, score, cls_logit, start_n_top=5, end_n_top=5):
    super().__init__(para_ids, score)
    self.cls_logit, self.start_n_top, self.end_n_top = cls_logit, start_n_top, end_n_top

  def __call__(self, inputs, training=False):
    out = super().__call__(inputs)
    p_mask = np.asarray(inputs["p_mask"])
    start = np.where(p_mask == 1, -1e30, out["start_logits"])
    end = np.where(p_mask == 1, -1e30, out["end_logits"])
    start_lp = start - np.log(np.exp(start - start.max(-1, keepdims=True)).sum(-1, keepdims=True)) - start.max(
        -1, keepdims=True)
    end_lp = end - np.log(np.exp(end - end.max(-1, keepdims=True)).sum(-1, keepdims=True)) - end.max(-1, keepdims=True)
    start_idx = np.argsort(-start_lp, -1, kind="stable")[:, :self.start_n_top]
    end_idx = np.argsort(-end_lp, -1, kind="stable")[:, :self.end_n_top]
    batch = start.shape[0]
    return {"start_top_log_probs": np.take_along_axis(start_lp, start_idx, -1), "start_top_index": start_idx,
            "end_top_log_probs": np.repeat(np.take_along_axis(end_lp, end_idx, -1)[:, None], self.start_n_top,
                                           1).reshape(batch, -1),
            "end_top_index": np.repeat(end_idx[:, None], self.start_n_top, 1).reshape(batch, -1),
            "cls_logits": np.full([batch], self.cls_logit, np.float32)}


def _paragraph(tokenizer):
  tokens = tokenizer.tokenize(CONTEXT)
  return tokenizer.convert_tokens_to_ids(tokens), align_tokens(tokens, CONTEXT, lower=True)


def _token_span(alignment, text):
  return answer_token_span(alignment, CONTEXT.index(text), len(text))


# ------------------------------------------------------------------------------------------------ QA: windows
def test_qa_answer_in_a_later_window_at_exact_character_offsets(tokenizer):
  para_ids, alignment = _paragraph(tokenizer)
  first, last = _token_span(alignment, "blue heron")
  window_tokens = 48 - len(tokenizer.tokenize(QUESTION)) - 3
  assert first >= window_tokens, "the answer must lie beyond the first window"
  stub = _SpanStub(para_ids, lambda p, j: (10.0 * (p == first), 10.0 * (p == last)))
  result = pipelines.question_answering(stub, QUESTION, CONTEXT, tokenizer=tokenizer, max_seq_length=48,
                                        doc_stride=16, max_query_length=16)
  assert result["answer"] == "blue heron" == CONTEXT[result["start"]:result["end"]]
  assert result["start"] == CONTEXT.index("blue heron") and result["score"] > 0.5
  assert len(stub.windows) >= 3 and stub.windows[0][0] == 0
  # A batch of questions (one context broadcast) and top_k: lists, best first, offsets into the context.
  two = pipelines.question_answering(stub, [QUESTION, "where?"], CONTEXT, top_k=3, tokenizer=tokenizer,
                                     max_seq_length=48, doc_stride=16, max_query_length=16, batch_size=3)
  assert [len(r) for r in two] == [3, 3] and two[0][0]["answer"] == two[1][0]["answer"] == "blue heron"
  assert all(CONTEXT[a["start"]:a["end"]] == a["answer"] for r in two for a in r)
  assert two[0][0]["score"] >= two[0][1]["score"] >= two[0][2]["score"]


def test_qa_a_question_cut_at_max_query_length_is_warned_about(tokenizer, caplog):
  """Review s50: a question longer than max_query_length lost its end (often the question words) without a word."""
  para_ids, alignment = _paragraph(tokenizer)
  first, last = _token_span(alignment, "blue heron")
  stub = _SpanStub(para_ids, lambda p, j: (10.0 * (p == first), 10.0 * (p == last)))
  long_question = "in the story about the lake and the birds that live near it, " + QUESTION
  caplog.set_level(logging.WARNING)
  fits = len(tokenizer.tokenize(QUESTION))
  pipelines.question_answering(stub, [QUESTION, long_question], CONTEXT, tokenizer=tokenizer, max_seq_length=64,
                               doc_stride=16, max_query_length=fits)
  assert (f"1 question(s) longer than max_query_length={fits} pieces were cut to their first {fits} (e.g. ['1'])"
          in caplog.text)


def test_qa_max_context_rule_rejects_a_start_outside_its_best_window(tokenizer):
  """Token X scores highest only at the edge of window 2, but window 1 gives it more context: X must lose to Y."""
  para_ids, alignment = _paragraph(tokenizer)
  window_tokens = 48 - len(tokenizer.tokenize(QUESTION)) - 3
  x, y = 17, 30  # windows start at 0 and 16 (stride 16): X is at offset 1 of window 2 and 17 of window 1
  assert x < window_tokens and min(x, window_tokens - 1 - x) > 1 and y < 16 + window_tokens
  x_text, y_text = (CONTEXT[alignment.starts[p]:alignment.ends[p]] for p in (x, y))
  assert x_text and y_text and x_text != y_text

  def score(p, j):
    if p == x:
      return (20.0, 20.0) if j < 4 else (0.0, 0.0)
    return (5.0, 5.0) if p == y else (0.0, 0.0)

  stub = _SpanStub(para_ids, score)
  result = pipelines.question_answering(stub, QUESTION, CONTEXT, tokenizer=tokenizer, max_seq_length=48,
                                        doc_stride=16, max_query_length=16)
  assert (result["answer"], result["start"]) == (y_text, alignment.starts[y])
  assert stub.windows[1][0] == 16
  # Not rigged: the same score for X inside window 1 (where X has the most context) makes X the answer.
  stub = _SpanStub(para_ids, lambda p, j: (20.0, 20.0) if p == x and j >= 4 else score(p, j))
  result = pipelines.question_answering(stub, QUESTION, CONTEXT, tokenizer=tokenizer, max_seq_length=48,
                                        doc_stride=16, max_query_length=16)
  assert (result["answer"], result["start"]) == (x_text, alignment.starts[x])


# ------------------------------------------------------------------------------------------------ QA: null answer
@pytest.mark.parametrize("cls_logit,threshold,null_first", [(2.0, 0.0, True), (-2.0, 0.0, False), (2.0, 3.0, False)])
def test_qa_v2_null_answer_when_the_null_score_wins(tokenizer, cls_logit, threshold, null_first):
  para_ids, alignment = _paragraph(tokenizer)
  first, last = _token_span(alignment, "blue heron")
  stub = _SquadV2Stub(para_ids, lambda p, j: (10.0 * (p == first), 10.0 * (p == last)), cls_logit)
  kwargs = dict(tokenizer=tokenizer, max_seq_length=48, doc_stride=16, max_query_length=16,
                null_score_threshold=threshold)
  best = pipelines.question_answering(stub, QUESTION, CONTEXT, **kwargs)
  null = {"answer": "", "score": pytest.approx(1 / (1 + np.exp(-cls_logit))), "start": 0, "end": 0}
  if null_first:
    assert best == null
  else:
    assert best["answer"] == "blue heron" == CONTEXT[best["start"]:best["end"]]
  ranked = pipelines.question_answering(stub, QUESTION, CONTEXT, top_k=50, **kwargs)
  assert ranked.count(null) == 1 and (ranked[0] == null) == null_first
  # version_2=False: the squad_v2 head without the null answer (the reference's unthresholded predictions).
  assert pipelines.question_answering(stub, QUESTION, CONTEXT, version_2=False, **kwargs)["answer"] == "blue heron"


def test_qa_span_head_null_answer_bert_style(tokenizer):
  """version_2=True on a span head: null when min [CLS] start+end minus the best span's exceeds the threshold."""
  para_ids, alignment = _paragraph(tokenizer)
  first, last = _token_span(alignment, "blue heron")
  kwargs = dict(tokenizer=tokenizer, max_seq_length=48, doc_stride=16, max_query_length=16, version_2=True)
  for cls, expected in (((6.0, 6.0), ""), ((4.0, 4.0), "blue heron")):
    stub = _SpanStub(para_ids, lambda p, j: (5.0 * (p == first), 5.0 * (p == last)), cls=cls)
    assert pipelines.question_answering(stub, QUESTION, CONTEXT, **kwargs)["answer"] == expected
  # An empty context (no window): the null answer is the only "" of the list (review s50: it came with the n-best's
  # own "" fallback, two empty answers).
  empty = pipelines.question_answering(stub, QUESTION, "", top_k=3, **kwargs)
  assert [a["answer"] for a in empty] == [""], empty
  stub.cls = (6.0, 6.0)  # version_2=None: a span head has no null answer, whatever its [CLS] logits
  assert pipelines.question_answering(stub, QUESTION, CONTEXT, **{**kwargs, "version_2": None})["answer"] == (
      "blue heron")


# ------------------------------------------------------------------------------------------------ multiple choice
class _ChoiceStub:
  def __init__(self, logits):
    self.logits, self.inputs = np.asarray(logits, np.float32), None

  def __call__(self, inputs, training=False):
    self.inputs = {k: np.asarray(v) for k, v in inputs.items()}
    return {"logits": np.tile(self.logits, (self.inputs["input_word_ids"].shape[0], 1))}


def test_multiple_choice_picks_the_argmax_and_packs_as_race(tokenizer):
  article, question = "Tom has a red ball. He plays with it every day.", "Tom plays _ ."
  options = ["every day", "never", "at night", "once"]
  stub = _ChoiceStub([1.0, 5.0, 2.0, 0.0])
  result = pipelines.multiple_choice(stub, article, question, options, tokenizer=tokenizer, max_seq_length=40,
                                     max_qa_length=8)
  expected = np.exp([1.0, 5.0, 2.0, 0.0]) / np.exp([1.0, 5.0, 2.0, 0.0]).sum()
  assert (result["label"], result["choice"]) == (1, "never")
  np.testing.assert_allclose(result["scores"], expected, rtol=1e-6)
  # The rows are RACE's records (cut to the longest choice: the rest is padding).
  records = race.convert_example(race.RaceExample("x", "middle", article, question, options, None), tokenizer, 40, 8)
  length = stub.inputs["input_word_ids"].shape[-1]
  assert not records["input_mask"][..., length:].any()
  for key in ("input_word_ids", "input_mask", "input_type_ids"):
    np.testing.assert_array_equal(stub.inputs[key][0], records[key][..., :length])
  with pytest.raises(ValueError, match="same number"):
    pipelines.multiple_choice(stub, [article, article], [question, question], [options, options[:3]],
                              tokenizer=tokenizer)


def test_multiple_choice_refuses_a_string_where_a_list_of_choices_is_expected(tokenizer):
  """(A string was read one character per choice: choices="ab" answered {'choice': 'a'} with no error.)"""
  stub = _ChoiceStub([1.0, 5.0])
  with pytest.raises(ValueError, match=r"multiple_choice: choices is the string 'ab', not a list"):
    pipelines.multiple_choice(stub, "a text", "which?", "ab", tokenizer=tokenizer)
  with pytest.raises(ValueError, match=r"multiple_choice: choices\[1\] is the string 'cd', not a list"):
    pipelines.multiple_choice(stub, "a text", ["which?", "what?"], [["a", "b"], "cd"], tokenizer=tokenizer)
  with pytest.raises(ValueError, match=r"multiple_choice: choices is the string 'abcd', not a list"):
    pipelines.multiple_choice(stub, "a text", ["which?", "what?"], "abcd", tokenizer=tokenizer)
  assert pipelines.multiple_choice(stub, "a text", "which?", ("ab", "cd"), tokenizer=tokenizer)["choice"] == "cd"


@pytest.mark.parametrize("option", ["n_best_size", "max_answer_length"])
def test_qa_refuses_n_best_size_and_max_answer_length_below_1(tokenizer, option):
  """(Either below 1 let no span through: every question was answered "" at 0, silently.)"""
  para_ids, _ = _paragraph(tokenizer)
  stub = _SpanStub(para_ids, lambda p, j: (0.0, 0.0))
  for bad in (0, -2):
    with pytest.raises(ValueError, match=rf"question_answering: {option}={bad}; give a whole number >= 1"):
      pipelines.question_answering(stub, QUESTION, CONTEXT, tokenizer=tokenizer, **{option: bad})


# ------------------------------------------------------------------------------------------------ token tagging
class _PositionStub:
  """Token logits that name the position: label i wins at position i."""

  def __call__(self, inputs, training=False):
    ids = np.asarray(inputs["input_word_ids"])
    return {"logits": np.tile(np.eye(64, dtype=np.float32)[:ids.shape[1]] * 10.0, (ids.shape[0], 1, 1))}


def test_token_classification_labels_land_on_first_pieces_with_char_offsets(tokenizer, caplog):
  text = "  Zürich-based\tcats  sat on déjà-vu mats "
  words = [("Zürich-based", 2, 14), ("cats", 15, 19), ("sat", 21, 24), ("on", 25, 27), ("déjà-vu", 28, 35),
           ("mats", 36, 40)]
  pieces = [tokenizer.encode_ids(w) for w, _, _ in words]
  assert len(pieces[0]) > 1 and len(pieces[4]) > 1  # multi-piece words
  positions = list(1 + np.cumsum([0] + [len(p) for p in pieces[:-1]]))
  names = [f"P{i}" for i in range(64)]
  result = pipelines.token_classification(_PositionStub(), [text, "short"], tokenizer=tokenizer, labels=names)
  assert [(r["word"], r["start"], r["end"]) for r in result[0]] == words
  assert all(text[r["start"]:r["end"]] == r["word"] for r in result[0])
  assert [r["label"] for r in result[0]] == [f"P{p}" for p in positions]
  assert all(r["score"] > 0.99 for r in result[0]) and result[1][0]["label"] == "P1"
  # A text past seq_length pieces runs in sub-sentences split at word boundaries: every word labelled, each at its
  # first piece of its own sequence (it was cut: the last words had no label). Logged.
  with caplog.at_level(logging.INFO):
    split = pipelines.token_classification(_PositionStub(), text, tokenizer=tokenizer, labels=names, seq_length=8)
  assert [(r["word"], r["start"], r["end"]) for r in split] == words
  assert split[0]["label"] == "P1" and all(r["label"] is not None for r in split)
  assert "run in" in caplog.text and "split at word boundaries" in caplog.text


# ------------------------------------------------------------------------------------------------ directories
@pytest.fixture(scope="module")
def qa_dirs(tiny_model_dirs):
  """The session's random-weight span (SQuAD v1) and squad_v2 directories (tests/tiny.py)."""
  return {head: tiny_model_dirs[head] for head in ("span", "squad_v2")}


def test_qa_reads_the_head_from_the_directory(qa_dirs):
  kwargs = dict(max_seq_length=48, doc_stride=16, max_query_length=16, top_k=30)
  v2 = pipelines.question_answering(qa_dirs["squad_v2"], QUESTION, CONTEXT, **kwargs)
  v1 = pipelines.question_answering(qa_dirs["span"], QUESTION, CONTEXT, **kwargs)
  assert "" in [a["answer"] for a in v2] and "" not in [a["answer"] for a in v1]
  assert all(CONTEXT[a["start"]:a["end"]] == a["answer"] for a in v1 + v2)


# ------------------------------------------------------------------------------ issue 44: used at the model's length
def test_qa_defaults_fit_the_models_length_and_a_longer_one_is_cut_with_a_warning(qa_dirs, caplog):
  """Before: the 64-position directory was refused at the default 384 windows (and at 64 too: a 64-piece question
  cap leaves no room). After: 64-piece windows with the reference's proportions (stride 21, questions at 10), the
  same answers as those set by hand; an explicit 384 is cut to 64 with a warning, not refused."""
  assert squad_features.fit_windows(64) == (21, 10) and squad_features.fit_windows(128) == (128, 64)
  by_hand = pipelines.question_answering(qa_dirs["span"], QUESTION, CONTEXT, max_seq_length=64, doc_stride=21,
                                         max_query_length=10, top_k=5)
  with caplog.at_level(logging.INFO):
    assert pipelines.question_answering(qa_dirs["span"], QUESTION, CONTEXT, top_k=5) == by_hand
  assert "seq_length=64: the recipe's 384 at most the model's max_position_embeddings 64" in caplog.text
  caplog.clear()
  with caplog.at_level(logging.WARNING):
    assert pipelines.question_answering(qa_dirs["span"], QUESTION, CONTEXT, max_seq_length=384, top_k=5) == by_hand
  assert "seq_length=384 is above the model's max_position_embeddings (64)" in caplog.text


def test_qa_windows_default_to_what_the_trainer_directory_recorded(qa_dirs, tmp_path):
  """A trainer's model directory answers as its --mode=predict does: params.yaml's predict length, doc_stride and
  max_query_length are the pipeline's defaults."""
  shutil.copytree(qa_dirs["span"], tmp_path / "run")
  (tmp_path / "run" / "params.yaml").write_text(
      "task:\n  doc_stride: 16\n  max_query_length: 16\n  predict_data:\n    seq_length: 48\n", encoding="utf-8")
  by_hand = pipelines.question_answering(qa_dirs["span"], QUESTION, CONTEXT, max_seq_length=48, doc_stride=16,
                                         max_query_length=16, top_k=5)
  assert pipelines.question_answering(str(tmp_path / "run"), QUESTION, CONTEXT, top_k=5) == by_hand
  assert pipelines.question_answering(qa_dirs["span"], QUESTION, CONTEXT, top_k=5) != by_hand


def test_qa_post_processing_defaults_to_the_run_and_its_export_carries_it(qa_dirs, tmp_path):
  """The run's null_score_threshold, max_answer_length and n_best_size (and windows) are the pipeline's, the
  server's and its SavedModel's defaults: they answered with 0.0 / 30 / 20 and the reference windows fitted to the
  length, so a served v2 model gave other answers than its predictions.json (review s57)."""
  from official_albert.serving import export  # noqa: PLC0415
  from official_albert.serving import qa_settings  # noqa: PLC0415
  from official_albert.serving import served_rows  # noqa: PLC0415
  run = tmp_path / "run"
  shutil.copytree(qa_dirs["squad_v2"], run)
  (run / "params.yaml").write_text(
      "task:\n  doc_stride: 16\n  max_query_length: 8\n  max_answer_length: 2\n  n_best_size: 3\n"
      "  null_score_threshold: 0.0537\n  predict_data:\n    seq_length: 48\n", encoding="utf-8")
  recorded = {"doc_stride": 16, "max_query_length": 8, "max_answer_length": 2, "n_best_size": 3,
              "null_score_threshold": 0.0537}
  assert qa_settings.recorded_qa_settings(str(run)) == recorded
  by_hand = pipelines.question_answering(qa_dirs["squad_v2"], QUESTION, CONTEXT, max_seq_length=48, top_k=3,
                                         **recorded)
  assert pipelines.question_answering(str(run), QUESTION, CONTEXT, top_k=3) == by_hand
  assert pipelines.question_answering(qa_dirs["squad_v2"], QUESTION, CONTEXT, max_seq_length=48, top_k=3,
                                      doc_stride=16, max_query_length=8) != by_hand
  saved = export.export_from_model_dir(str(run), str(tmp_path / "sm"), head="squad_v2", seq_length=48)
  assert pipelines.question_answering(saved, QUESTION, CONTEXT, top_k=3) == by_hand
  from official_albert.checkpoints import loading  # noqa: PLC0415
  model, _ = loading.load_model(str(run), "squad_v2")
  assert served_rows.qa_options(model, str(run)) == {"max_seq_length": 48, **recorded}  # (the server's)
  # Shorter windows than the run's question cap leaves room for: fitted to the length, warned (every call failed).
  short = pipelines.question_answering(str(run), QUESTION, CONTEXT, max_seq_length=10, top_k=3)
  assert short == pipelines.question_answering(qa_dirs["squad_v2"], QUESTION, CONTEXT, max_seq_length=10, top_k=3,
                                               max_answer_length=2, n_best_size=3, null_score_threshold=0.0537)


def test_qa_stub_windows_at_64_positions_hold_the_fitted_question_and_stride(tokenizer):
  para_ids, alignment = _paragraph(tokenizer)
  first, last = _token_span(alignment, "blue heron")
  stub = _SpanStub(para_ids, lambda p, j: (10.0 * (p == first), 10.0 * (p == last)))
  stub.config = AlbertConfig(**tiny.MODEL)  # 64 positions
  result = pipelines.question_answering(stub, QUESTION, CONTEXT, tokenizer=tokenizer)
  assert result["answer"] == "blue heron"
  assert len(tokenizer.tokenize(QUESTION)) > 10  # cut at the fitted 10 pieces: the window keeps 64 - 10 - 3
  assert stub.windows[0] == (0, 51) and stub.windows[1][0] == 21


def test_multiple_choice_reads_a_long_models_whole_article(tokenizer, caplog):
  """Before: the default 512 cut the article of a 1,024-position model at 512 pieces (and refused a 64-position
  model: 512 > 64). After: rows as long as the model's positions (the article whole), and a 64-position model packs
  at 64 with the question+option cap fitted to 16."""
  article = " ".join(["the heron nested on the roof of the west wing every spring"] * 25)
  question, options = "Where did the heron nest?", ["on the roof", "in a tree", "on a car", "in a box"]
  article_pieces = len(tokenizer.tokenize(article))
  assert 512 < article_pieces < 1000
  stub = _ChoiceStub([1.0, 5.0, 2.0, 0.0])
  stub.config = AlbertConfig(**{**tiny.MODEL, "max_position_embeddings": 1024})
  assert pipelines.multiple_choice(stub, article, question, options, tokenizer=tokenizer)["label"] == 1
  assert int(stub.inputs["input_mask"][0].sum(-1).max()) > 512
  assert stub.inputs["input_mask"].shape[-1] == article_pieces + 3 + max(
      len(tokenizer.tokenize(race.qa_text(question, o))) for o in options)
  stub.config = AlbertConfig(**tiny.MODEL)  # 64 positions
  assert choices.fit_qa_length(64) == 16 and choices.fit_qa_length(512) == 128
  pipelines.multiple_choice(stub, article, question, options, tokenizer=tokenizer)
  assert stub.inputs["input_mask"].shape[-1] == 64
  records = race.convert_example(race.RaceExample("x", "middle", article, question, options, None), tokenizer, 64, 16)
  np.testing.assert_array_equal(stub.inputs["input_word_ids"][0], records["input_word_ids"])
  with caplog.at_level(logging.WARNING):
    pipelines.multiple_choice(stub, article, question, options, tokenizer=tokenizer, max_seq_length=512)
  assert stub.inputs["input_mask"].shape[-1] == 64 and "seq_length=512 is above" in caplog.text


def test_an_answer_keeps_the_combining_marks_of_its_last_character(tokenizer):
  """Review s50: the alignment drops combining marks, so a token ended before the mark that follows its last
  letter: the answer "cafe" of "cafe\u0301" (decomposed é), "سلام" of "سلامٌ" (Arabic tanween) — cut mid-character."""
  for context, word in (("we met at the cafe\u0301 near the lake", "cafe\u0301"),
                        ("he said \u0633\u0644\u0627\u0645\u064c to us", "\u0633\u0644\u0627\u0645\u064c")):
    tokens = tokenizer.tokenize(context)
    alignment = align_tokens(tokens, context, tokenizer.do_lower_case)
    at = context.index(word)
    covering = [t for t in range(len(tokens)) if alignment.starts[t] < at + len(word) and alignment.ends[t] > at]
    assert context[alignment.starts[covering[0]]:alignment.ends[covering[-1]]] == word, (context, covering)
