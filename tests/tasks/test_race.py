"""RACE: raw release layout, 4-option encoding, truncation and per-level accuracy."""

import json
import os
import re
import sys
import unicodedata

import numpy as np
import pytest

from official_albert.tokenization import choices
from official_albert.tokenization import FullTokenizer
from tasks import race


class _WordTokenizer:
  """One token per word; id = 10 + index of first appearance ([CLS]=2, [SEP]=3)."""

  def __init__(self):
    self.vocab = {"[CLS]": 2, "[SEP]": 3}

  def tokenize(self, text):
    return text.split()

  def convert_tokens_to_ids(self, tokens):
    return [self.vocab.setdefault(t, len(self.vocab) + 10) for t in tokens]


def _article(path, article, questions, options, answers, file_id):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    json.dump({"article": article, "questions": questions, "options": options, "answers": answers, "id": file_id}, f)


@pytest.fixture
def race_dir(tmp_path):
  root = tmp_path / "RACE"
  _article(str(root / "dev" / "middle" / "2.txt"), "Tom has a red ball . He plays every day .",
           ["Tom plays _ .", "What color is the ball ?"],
           [["every day", "never", "at night", "once"], ["red", "blue", "green", "black"]], ["A", "A"], "middle2.txt")
  _article(str(root / "dev" / "middle" / "1.txt"), "Ann reads books .", ["Ann reads _ ."],
           [["books", "maps", "cars", "songs"]], ["A"], "middle1.txt")
  _article(str(root / "dev" / "high" / "10.txt"), "The war ended in 1945 .", ["When did the war end ?"],
           [["1918", "1945", "1939", "2001"]], ["B"], "high10.txt")
  with open(root / "dev" / "high" / "notes.md", "w") as f:
    f.write("not an article")
  return str(tmp_path)


def test_reads_raw_layout_in_sorted_order_with_levels(race_dir):
  examples = race.read_examples(race_dir, "dev")
  assert [(e.example_id, e.level, e.label) for e in examples] == [
      ("middle1.txt-0", "middle", 0), ("middle2.txt-0", "middle", 0), ("middle2.txt-1", "middle", 0),
      ("high10.txt-0", "high", 1)]
  assert [e.level for e in race.read_examples(os.path.join(race_dir, "RACE"), "dev", ["high"])] == ["high"]
  with pytest.raises(FileNotFoundError, match="train"):
    race.read_examples(race_dir, "train")


def test_reads_the_references_all_txt_alone_and_skips_it_beside_the_release_files(race_dir):
  """The reference's user-built `all.txt` holds a level's articles as JSON lines: read alone it gives those
  articles (it was refused as invalid JSON); beside the release files it repeats them, so it is skipped."""
  want = [(e.example_id, e.label) for e in race.read_examples(race_dir, "dev")]
  for level in ("middle", "high"):
    level_dir = os.path.join(race_dir, "RACE", "dev", level)
    names = sorted(n for n in os.listdir(level_dir) if n.endswith(".txt"))
    articles = [json.load(open(os.path.join(level_dir, n))) for n in names]
    with open(os.path.join(level_dir, "all.txt"), "w", encoding="utf-8") as f:
      f.write("".join(json.dumps(a) + "\n" for a in articles))
  assert [(e.example_id, e.label) for e in race.read_examples(race_dir, "dev")] == want
  for level in ("middle", "high"):
    level_dir = os.path.join(race_dir, "RACE", "dev", level)
    for name in os.listdir(level_dir):
      if name != "all.txt":
        os.remove(os.path.join(level_dir, name))
  assert [(e.example_id, e.label) for e in race.read_examples(race_dir, "dev")] == want
  with open(os.path.join(race_dir, "RACE", "dev", "high", "all.txt"), "a", encoding="utf-8") as f:
    f.write("{not json\n")
  with pytest.raises(race.RaceDataError, match=r"all\.txt:2: not a JSON article"):
    race.read_examples(race_dir, "dev")


def test_blank_is_filled_else_question_then_option():
  assert race.qa_text("Tom plays _ and _ .", "ball") == "Tom plays ball and ball ."
  assert race.qa_text("What color is it ?", "red") == "What color is it ? red"


def test_a_blank_is_looked_for_in_the_nfkd_question_as_the_reference(spm_model_file):
  """Before: "_" was looked for in the raw question, the reference's `preprocess_text` (NFKD) runs first, so a
  full-width blank "＿" (U+FF3F) was filled there but gave "question option" here."""
  assert race.qa_text("a \uff3f b", "x") == "a x b"
  assert race.qa_text("I go \ufe4d\ufe4d bus.", "by") == "I go byby bus."
  assert race.qa_text("a \uff3f b", "x", keep_accents=True) == "a \uff3f b x"  # no NFKD: only "_" is a blank
  every_char = [chr(c) for c in range(sys.maxunicode + 1)]
  assert set(re.findall(choices.NFKD_BLANKS, "".join(every_char))) == {
      c for c in every_char if "_" in unicodedata.normalize("NFKD", c)}
  tok = FullTokenizer(spm_model_file)
  question, options = "I go to school \uff3f bus.", ["by", "on", "in", "at"]
  rows = choices.pack_choices(tok, "Tom goes to school.", question, options, 64, 32)
  for row, option in zip(rows, options):  # the reference's order: preprocess both, then fill the blank
    qa = tok.convert_tokens_to_ids(tok.tokenize(tok.preprocess(question).replace("_", tok.preprocess(option))))
    assert row["input_word_ids"][row["input_type_ids"].index(1):sum(row["input_mask"]) - 1] == qa


def test_max_qa_length_below_one_is_refused():
  """Before: 0 kept the whole question+option (no cap; the article's negative cut then dropped the option) and -k
  dropped the question's first k pieces and the article, silently."""
  ex = race.RaceExample("x-0", "high", "a b c", "q r", ["o1", "o2", "o3", "o4"], 0)
  for bad in (0, -1):
    with pytest.raises(ValueError, match=rf"max_qa_length={bad}: .* at least 1 .*--max_qa_length"):
      choices.fit_qa_length(128, bad)
    with pytest.raises(ValueError, match=rf"max_qa_length={bad}: .* at least 1"):
      race.convert_example(ex, _WordTokenizer(), max_seq_length=16, max_qa_length=bad)
  assert choices.fit_qa_length(128, 1) == 1 and choices.fit_qa_length(128) == 32


def test_encoding_layout_and_labels(race_dir):
  tok = _WordTokenizer()
  ex = race.read_examples(race_dir, "dev")[1]  # "Tom plays _ ." with the article about Tom
  f = race.convert_example(ex, tok, max_seq_length=24, max_qa_length=8)
  assert f["input_word_ids"].shape == (4, 24) and f["label_ids"] == 0
  article_ids = tok.convert_tokens_to_ids(ex.article.split())
  for row, option in enumerate(ex.options):
    qa_ids = tok.convert_tokens_to_ids(("Tom plays " + option + " .").split())
    expect = [2] + article_ids + [3] + qa_ids + [3]
    assert f["input_word_ids"][row, :len(expect)].tolist() == expect
    assert (f["input_word_ids"][row, len(expect):] == 0).all()
    assert f["input_type_ids"][row, :len(expect)].tolist() == [0] * (len(article_ids) + 2) + [1] * (len(qa_ids) + 1)
    assert f["input_mask"][row].sum() == len(expect)


def test_qa_keeps_its_last_tokens_and_article_is_cut_from_the_end():
  tok = _WordTokenizer()
  ex = race.RaceExample("x-0", "high", " ".join(f"a{i}" for i in range(50)),
                        " ".join(f"q{i}" for i in range(10)), ["o1", "o2", "o3", "o4"], 3)
  f = race.convert_example(ex, tok, max_seq_length=16, max_qa_length=4)
  row = f["input_word_ids"][0].tolist()
  inv = {v: k for k, v in tok.vocab.items()}
  words = [inv[i] for i in row]
  # qa = last 4 of "q0..q9 o1" → q7 q8 q9 o1; article gets 16 - 4 - 3 = 9 tokens from its start.
  assert words == ["[CLS]"] + [f"a{i}" for i in range(9)] + ["[SEP]", "q7", "q8", "q9", "o1", "[SEP]"]
  assert f["input_mask"].sum() == 64 and f["label_ids"] == 3
  with pytest.raises(ValueError, match="max_qa_length"):
    race.convert_example(ex, tok, max_seq_length=6, max_qa_length=4)


def test_bad_answer_letter_names_the_file(tmp_path):
  path = str(tmp_path / "RACE" / "test" / "high" / "7.txt")
  _article(path, "Text .", ["Q ?"], [["a", "b", "c", "d"]], ["E"], "high7.txt")
  with pytest.raises(race.RaceDataError, match=r"7\.txt: question 0: answer 'E' is not one of A, B, C, D"):
    race.read_race_file(path, "high")
  _article(path, "Text .", ["Q ?"], [["a", "b", "c"]], ["A"], "high7.txt")
  with pytest.raises(race.RaceDataError, match="3 options"):
    race.read_race_file(path, "high")


def test_accuracy_overall_and_per_level():
  labels = [0, 1, 2, 3, 0]
  logits = np.eye(4)[[0, 1, 0, 3, 1]]
  out = race.compute_metrics(labels, logits, ["middle", "middle", "high", "high", "high"])
  assert out["eval_accuracy"] == pytest.approx(3 / 5)
  assert out["accuracy_middle"] == 1.0 and out["accuracy_high"] == pytest.approx(1 / 3)
  assert out["num_middle"] == 2 and out["num_high"] == 3


def test_real_tokenizer_features(race_dir, spm_model_file):
  examples = race.read_examples(race_dir, "dev")
  arrays = race.convert_examples(examples, FullTokenizer(spm_model_file), max_seq_length=48, max_qa_length=16)
  assert arrays["input_word_ids"].shape == (4, 4, 48) and arrays["label_ids"].tolist() == [0, 0, 0, 1]
  assert (arrays["input_word_ids"][:, :, 0] == 2).all()
  # Options differ, so the four rows of one example differ.
  assert len({tuple(r) for r in arrays["input_word_ids"][0]}) == 4


def test_json_lines_split_at_line_feeds_only_and_bad_bytes_are_said(tmp_path, caplog):
  """An article line may hold U+2028 / U+0085 raw (legal in a JSON string, written by `ensure_ascii=False`):
  `splitlines` cut it in two and the file was refused; undecodable bytes were replaced silently."""
  rows = [{"article": "Tom\u2028has a ball\u0085.", "questions": ["Q ?"], "options": [["a", "b", "c", "d"]],
           "answers": ["A"], "id": "a1"},
          {"article": "Ann\u2029reads .", "questions": ["Q ?", "R ?"], "options": [["a", "b", "c", "d"]] * 2,
           "answers": ["B", "C"], "id": "a2"}]
  path = tmp_path / "all.txt"
  path.write_bytes("\r\n".join(json.dumps(r, ensure_ascii=False) for r in rows).encode("utf-8") + b"\r\n")
  examples = race.read_race_file(str(path), "high")
  assert [(e.example_id, e.label) for e in examples] == [("a1-0", 0), ("a2-0", 1), ("a2-1", 2)]
  assert examples[0].article == "Tom\u2028has a ball\u0085."
  path.write_bytes(path.read_bytes().replace(b"Ann", b"A\xffn"))
  with caplog.at_level("WARNING"):
    assert len(race.read_race_file(str(path), "high")) == 3
  assert "1 undecodable byte sequence(s)" in caplog.text and "line 2" in caplog.text
