"""SQuAD evaluation vs transformers' squad_metrics (an independent implementation of the official v2.0 script)."""

import json
import re
import types

from absl import flags
import numpy as np
import pytest

from tasks import squad_evaluate as ev


def _dataset(questions):
  """questions: list of (qid, [answer texts]) → an official nested dataset (one paragraph)."""
  context = "The quick brown fox jumps over the lazy dog in Paris, France, in 1990."
  qas = []
  for qid, answers in questions:
    qas.append({"id": qid, "question": "q?", "is_impossible": not answers,
                "answers": [{"text": a, "answer_start": max(context.find(a), 0)} for a in answers]})
  return [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]


def _oracle():
  """transformers' squad_metrics, the oracle, imported and never skipped (audit s29, 3).

  requirements-test.txt pins transformers 4.57.6, which ships the module; if an upgrade drops it, these tests must
  fail and say so rather than skip quietly and leave the official-scorer comparison unchecked.
  """
  try:
    from transformers.data.metrics import squad_metrics
  except ImportError as e:
    raise ImportError(f"transformers.data.metrics.squad_metrics, the SQuAD oracle of "
                      f"tests/tasks/test_squad_evaluate.py, did not import ({e}); install the pinned transformers of "
                      f"requirements-test.txt") from e
  return squad_metrics


def _oracle_examples(dataset):
  return [types.SimpleNamespace(qas_id=qa["id"], answers=qa["answers"])
          for a in dataset for p in a["paragraphs"] for qa in p["qas"]]


def test_answer_normalisation_and_token_f1():
  assert ev.normalize_answer("  The  Quick, brown-fox!  ") == "quick brownfox"
  assert ev.normalize_answer("an apple and a pear") == "apple and pear"
  assert ev.compute_exact("Paris, France", "paris france") == 1
  assert ev.compute_f1("the lazy dog", "lazy dog in Paris") == pytest.approx(2 * (2 / 4) * 1 / (2 / 4 + 1))
  assert ev.compute_f1("", "") == 1.0 and ev.compute_f1("", "dog") == 0.0
  assert ev._f1_v1("", "") == 0.0  # v1.1 has no empty-answer rule


def test_functions_match_transformers_oracle_on_random_strings():
  sm = _oracle()
  rng = np.random.default_rng(3)
  words = ["the", "a", "an", "Dog", "dog,", "cat", "Paris", "1990", "!", "fox.", "", "an apple"]
  for _ in range(300):
    gold = " ".join(rng.choice(words, int(rng.integers(0, 5))))
    pred = " ".join(rng.choice(words, int(rng.integers(0, 5))))
    assert ev.normalize_answer(pred) == sm.normalize_answer(pred)
    assert ev.compute_exact(gold, pred) == sm.compute_exact(gold, pred)
    assert ev.compute_f1(gold, pred) == pytest.approx(sm.compute_f1(gold, pred), abs=1e-12)


def _random_v2_case(rng, n=60):
  answer_pool = ["brown fox", "the lazy dog", "Paris", "France", "1990", "quick brown fox jumps"]
  questions, preds, na_probs = [], {}, {}
  for i in range(n):
    qid = f"q{i}"
    has = rng.random() < 0.6
    golds = list(rng.choice(answer_pool, int(rng.integers(1, 3)), replace=False)) if has else []
    questions.append((qid, golds))
    r = rng.random()
    preds[qid] = "" if r < 0.25 else (golds[0] if has and r < 0.6 else str(rng.choice(answer_pool)))
    na_probs[qid] = float(np.round(rng.normal(), 1))  # rounded: ties exercise the threshold sweep order
  return _dataset(questions), preds, na_probs


def test_v2_evaluation_equals_oracle_with_no_answer_and_best_threshold():
  sm = _oracle()
  rng = np.random.default_rng(7)
  for _ in range(10):
    dataset, preds, na_probs = _random_v2_case(rng)
    for thresh in (1.0, 0.0, -0.5):
      ours = ev.evaluate_v2(dataset, preds, na_probs, na_prob_thresh=thresh)
      oracle = sm.squad_evaluate(_oracle_examples(dataset), preds, na_probs, thresh)
      assert list(ours) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total", "NoAns_exact",
                            "NoAns_f1", "NoAns_total", "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]
      for key, value in oracle.items():
        assert ours[key] == pytest.approx(value, abs=1e-9), key


def test_best_threshold_search_on_a_crafted_case():
  # q1 answerable & right (na 0.1), q2 unanswerable & answered (na 0.9), q3 unanswerable & answered (na 0.3).
  dataset = _dataset([("q1", ["Paris"]), ("q2", []), ("q3", [])])
  preds = {"q1": "Paris", "q2": "dog", "q3": "fox"}
  na = {"q1": 0.1, "q2": 0.9, "q3": 0.3}
  out = ev.evaluate_v2(dataset, preds, na)
  # Sweep: start at 2 (all null); q1 +1 → 3 at 0.1 (best); q3 -1; q2 -1.
  assert out["best_exact"] == pytest.approx(100.0) and out["best_exact_thresh"] == 0.1
  assert out["exact"] == pytest.approx(100 / 3)
  assert ev.evaluate_v2(dataset, preds, na, na_prob_thresh=0.2)["exact"] == pytest.approx(100.0)
  no_file = ev.evaluate_v2(dataset, preds)
  assert "best_f1" not in no_file and no_file["NoAns_total"] == 2


def test_v1_evaluation_max_over_golds_and_missing_predictions(capsys):
  dataset = _dataset([("a", ["Paris", "Paris, France"]), ("b", ["the lazy dog"]), ("c", ["1990"])])
  out = ev.evaluate_v1(dataset, {"a": "Paris France", "b": "lazy"})
  assert out["exact_match"] == pytest.approx(100 / 3)
  assert out["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)
  assert "Unanswered question c" in capsys.readouterr().err


def _cli(args):
  """Parses `args` as the binary does (flags may sit among the positional files), then runs main."""
  fv = flags.FlagValues()
  ev.define_flags(fv)
  return ev.main(fv(["squad_evaluate"] + [str(a) for a in args]), fv)


def test_cli_detects_version_and_prints_official_json(tmp_path, capsys):
  sm = _oracle()
  rng = np.random.default_rng(11)
  dataset, preds, na_probs = _random_v2_case(rng, n=30)
  data_file, pred_file, na_file = tmp_path / "dev.json", tmp_path / "pred.json", tmp_path / "na.json"
  data_file.write_text(json.dumps({"version": "v2.0", "data": dataset}))
  pred_file.write_text(json.dumps(preds))
  na_file.write_text(json.dumps(na_probs))
  assert _cli([data_file, pred_file, "--na-prob-file", na_file]) == 0
  printed = json.loads(capsys.readouterr().out)
  oracle = sm.squad_evaluate(_oracle_examples(dataset), preds, na_probs)
  assert printed == pytest.approx(dict(oracle))
  out_file = tmp_path / "eval.json"
  _cli([data_file, pred_file, "--out-file", out_file, "--na-prob-thresh", "0.5"])
  assert set(json.loads(out_file.read_text())) == {"exact", "f1", "total", "HasAns_exact", "HasAns_f1",
                                                   "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total"}
  v1 = {"version": "1.1", "data": _dataset([("x", ["Paris"])])}
  data_file.write_text(json.dumps(v1))
  pred_file.write_text(json.dumps({"x": "in Paris"}))
  _cli([data_file, pred_file])
  assert json.loads(capsys.readouterr().out) == {"exact_match": 0.0, "f1": pytest.approx(100 * 2 / 3)}
  with pytest.raises(ValueError, match="v2.0 option"):
    _cli([data_file, pred_file, "-n", na_file])


# ------------------------------------------------------------------------------------------- bad input files


def _files(tmp_path, dataset, preds, na=None, version="v2.0"):
  data_file, pred_file = tmp_path / "dev.json", tmp_path / "pred.json"
  data_file.write_text(json.dumps({"version": version, "data": dataset}))
  pred_file.write_text(json.dumps(preds))
  paths = [data_file, pred_file]
  if na is not None:
    (tmp_path / "na.json").write_text(json.dumps(na))
    paths += ["--na-prob-file", tmp_path / "na.json"]
  return paths


def test_predictions_that_are_not_an_id_to_text_object_are_named(tmp_path):
  dataset = _dataset([("a", ["Paris"]), ("b", [])])
  # Before: a JSON list ended in ZeroDivisionError (no prediction matched, total 0).
  with pytest.raises(ValueError, match=r"predictions file .*pred\.json: expected a JSON object mapping each question "
                                       r"id to its answer text.*got a JSON array"):
    _cli(_files(tmp_path, dataset, ["Paris", ""]))
  with pytest.raises(ValueError, match=r"pred\.json: 1 of 2 predictions are not answer texts \(e\.g\. 'a' → a JSON "
                                       r"array\).*looks like nbest_predictions\.json"):
    _cli(_files(tmp_path, dataset, {"a": [{"text": "Paris"}], "b": ""}))
  (tmp_path / "broken.json").write_text('{"a": "Paris",')
  with pytest.raises(ValueError, match=r"broken\.json: the predictions file is not valid JSON: .* line 1, column"):
    _cli([tmp_path / "dev.json", tmp_path / "broken.json"])
  with pytest.raises(ValueError, match="expected a JSON object"):
    ev.evaluate_v1(dataset, ["Paris"])  # The functions check too (no ZeroDivisionError).


@pytest.mark.parametrize("version", ["v2.0", "1.1"])
def test_missing_predictions_score_zero_with_a_count(tmp_path, capsys, version):
  questions = [("a", ["Paris"]), ("b", ["1990"]), ("c", ["France"])] + ([("n", [])] if version == "v2.0" else [])
  dataset = _dataset(questions)
  # Before (v2.0): KeyError: 'b' from the HasAns breakdown, and no scores at all.
  assert _cli(_files(tmp_path, dataset, {"a": "Paris", "n": ""} if version == "v2.0" else {"a": "Paris"},
                     version=version)) == 0
  captured = capsys.readouterr()
  out = json.loads(captured.out)
  total = len(questions)
  if version == "v2.0":
    assert out["total"] == total and out["exact"] == pytest.approx(100 * 2 / total)
    assert out["HasAns_total"] == 3 and out["HasAns_exact"] == pytest.approx(100 / 3) and out["NoAns_exact"] == 100
  else:
    assert out == {"exact_match": pytest.approx(100 / 3), "f1": pytest.approx(100 / 3)}
  assert re.search(r"2 of %d questions have no prediction in predictions file .*pred\.json; they score 0" % total,
                   captured.err)
  # With --na-prob-file: the threshold search leaves the missing questions at 0 too.
  na = {"a": 0.1, "n": 0.9}
  v2 = _dataset([("a", ["Paris"]), ("b", ["1990"]), ("n", [])])
  out = ev.evaluate_v2(v2, {"a": "Paris", "n": "dog"}, na)
  assert out["best_exact"] == pytest.approx(100 * 2 / 3) and out["best_exact_thresh"] == 0.1
  assert out["exact"] == pytest.approx(100 / 3)


def test_prediction_ids_not_in_the_data_are_counted(tmp_path, capsys):
  dataset = _dataset([("a", ["Paris"]), ("b", [])])
  preds = {"a": "Paris", "b": "", "zz1": "x", "zz2": "y", "zz3": "z"}
  assert _cli(_files(tmp_path, dataset, preds)) == 0
  err = capsys.readouterr().err
  # Before: nothing was said about them.
  assert re.search(r"Warning: 3 of the 5 prediction ids in predictions file .*pred\.json are not questions of the "
                   r"data file and are ignored: 'zz1', 'zz2', 'zz3'", err)
  many = {f"x{i}": "" for i in range(25)}
  ev.evaluate_v1(_dataset([("a", ["Paris"])]), dict(many, a="Paris"))
  err = capsys.readouterr().err
  assert "25 of the 26 prediction ids" in err and "'x9', ... (15 more)." in err


def test_na_prob_file_is_checked(tmp_path, capsys):
  dataset = _dataset([("a", ["Paris"]), ("b", [])])
  preds = {"a": "Paris", "b": ""}
  with pytest.raises(ValueError, match=r"na-prob file .*na\.json: expected a JSON object mapping each question id to "
                                       r"its no-answer score.*got a JSON array"):
    _cli(_files(tmp_path, dataset, preds, na=[0.1, 0.2]))
  with pytest.raises(ValueError, match=r"na\.json: no score for 1 of the 2 predicted questions \('b'\)"):
    _cli(_files(tmp_path, dataset, preds, na={"a": 0.1}))  # Before: KeyError: 'b'
  with pytest.raises(ValueError, match=r"na\.json: 1 of 2 no-answer scores are not numbers \(e\.g\. 'b' → a JSON "
                                       r"string\)"):
    _cli(_files(tmp_path, dataset, preds, na={"a": 0.1, "b": "high"}))
  assert _cli(_files(tmp_path, dataset, preds, na={"a": 0.1, "b": 0.5, "other": 1.0})) == 0
  assert re.search(r"Warning: 1 ids in na-prob file .*na\.json are not predicted questions", capsys.readouterr().err)


def test_malformed_data_file_is_named(tmp_path):
  dataset = _dataset([("a", ["Paris"]), ("b", [])])
  del dataset[0]["paragraphs"][0]["qas"][1]["answers"]
  with pytest.raises(ValueError, match=r"dev\.json: article 0 \('t'\), paragraph 0, question b: missing key "
                                       r"'answers'"):
    _cli(_files(tmp_path, dataset, {"a": "Paris"}))  # Before: KeyError: 'answers'
  (tmp_path / "dev.json").write_text('{"version": "v2.0",\n "data": [}')
  with pytest.raises(ValueError, match=r"dev\.json: the data file is not valid JSON: .* line 2, column 11"):
    _cli([tmp_path / "dev.json", tmp_path / "pred.json"])


@pytest.mark.parametrize("version", ["v2.0", "1.1"])
def test_a_repeated_question_id_is_refused(tmp_path, version):
  # Before: v1 scored both questions against the one prediction of the id (50.0 for a perfect model) and v2 counted
  # the id once (total 1 of 2 questions).
  dataset = _dataset([("1", ["Paris"]), ("2", ["1990"])])
  dataset.append(_dataset([(1, ["France"])])[0])
  preds = {"1": "France", "2": "1990"}
  with pytest.raises(ValueError, match=r"dev\.json: article 1 \('t'\), paragraph 0, question 1: the question id 1 is "
                                       r"used again \(first at article 0 \('t'\), paragraph 0, question 1\)\..*Fix "
                                       r"the file: give each question its own id"):
    _cli(_files(tmp_path, dataset, preds, version=version))
  with pytest.raises(ValueError, match=r"data: article 1 .*the question id 1 is used again"):
    (ev.evaluate_v2 if version == "v2.0" else ev.evaluate_v1)(dataset, preds)


@pytest.mark.parametrize("version", ["v2.0", "1.1"])
def test_integer_question_ids_match_their_string_keys(tmp_path, capsys, version):
  # The reader accepts integer ids, but predictions.json / null_odds.json keys are strings (json.dumps).
  # Before: no id matched; the CLI printed {"exact_match": 0.0, "f1": 0.0} and warned of unknown ids.
  dataset = _dataset([(1, ["Paris"]), (2, ["1990"])] + ([(3, [])] if version == "v2.0" else []))
  preds = {"1": "Paris", "2": "1990", **({"3": ""} if version == "v2.0" else {})}
  assert _cli(_files(tmp_path, dataset, preds, na={"1": 0.1, "2": 0.2, "3": 0.9} if version == "v2.0" else None,
                     version=version)) == 0
  captured = capsys.readouterr()
  out = json.loads(captured.out)
  assert out[("exact" if version == "v2.0" else "exact_match")] == 100.0 and out["f1"] == 100.0
  assert "not questions of the data file" not in captured.err
  assert ev.evaluate_v2(dataset, {1: "Paris", 2: "1990", 3: ""}, {1: 0.1, 2: 0.2, 3: 0.9})["f1"] == 100.0


_CONTEXT = "Paris is in France."


def _flat_rows():
  """HF-datasets rows: one answerable question, one unanswerable (an empty answer list)."""
  return [{"id": "a", "title": "t", "context": _CONTEXT, "question": "Where?",
           "answers": {"text": ["Paris"], "answer_start": [0]}},
          {"id": "n", "title": "t", "context": _CONTEXT, "question": "Who?",
           "answers": {"text": [], "answer_start": []}}]


def test_flat_rows_are_evaluated_as_the_task_reads_them(tmp_path, capsys):
  """The fine-tuning task reads HF-datasets rows (tasks.squad.reading); the evaluator converts them the same way.
  Before: "article 0 (None): missing key 'paragraphs'. Fix the file"."""
  rows = _flat_rows()
  data_file, pred_file = tmp_path / "flat.json", tmp_path / "pred.json"
  data_file.write_text(json.dumps({"version": "v2.0", "data": rows}))
  pred_file.write_text(json.dumps({"a": "Paris", "n": ""}))
  assert _cli([data_file, pred_file]) == 0
  out = json.loads(capsys.readouterr().out)
  assert (out["exact"], out["HasAns_total"], out["NoAns_total"]) == (100.0, 1, 1)
  data_file.write_text(json.dumps({"data": rows[:1]}))
  assert _cli([data_file, pred_file]) == 0
  assert json.loads(capsys.readouterr().out) == {"exact_match": 100.0, "f1": 100.0}


def test_answerless_rows_without_a_version_are_scored_as_v2_or_named(tmp_path, capsys):
  """Flat rows mark an unanswerable question only by its empty answer list. Without a "version" the file was taken
  for v1.1 and scoring crashed at max() of no answers; now it is scored as v2.0, --version=1.1 names the question
  and the fix, and --version=2.0 scores a versionless nested file as v2.0."""
  context, rows = _CONTEXT, _flat_rows()
  data_file, pred_file = tmp_path / "flat.json", tmp_path / "pred.json"
  data_file.write_text(json.dumps({"data": rows}))
  pred_file.write_text(json.dumps({"a": "Paris", "n": ""}))
  assert _cli([data_file, pred_file]) == 0
  out = json.loads(capsys.readouterr().out)
  assert (out["exact"], out["HasAns_total"], out["NoAns_total"]) == (100.0, 1, 1)
  with pytest.raises(ValueError, match=r"question 'n' has no answers.*--version=2\.0"):
    _cli([data_file, pred_file, "--version=1.1"])
  nested = tmp_path / "nested.json"
  nested.write_text(json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
      {"id": "a", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 0}]}]}]}]}))
  assert _cli([nested, pred_file]) == 0
  assert json.loads(capsys.readouterr().out) == {"exact_match": 100.0, "f1": 100.0}
  assert _cli([nested, pred_file, "--version=2.0"]) == 0
  assert json.loads(capsys.readouterr().out)["HasAns_total"] == 1
