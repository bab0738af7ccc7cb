"""The text-in predictors on an OpenVINO export folder (issue 18): question answering (span and squad_v2 heads),
multiple choice and token classification give the TF model directory's answers and structure, and a folder of the
wrong head is refused naming the head it is and the one needed."""

import json
import os

import keras
import numpy as np
import pytest

pytest.importorskip("openvino")

from official_albert import AlbertConfig  # noqa: E402
from official_albert import pipelines  # noqa: E402
from official_albert.checkpoints.loading import build_model  # noqa: E402
from official_albert.checkpoints.native import save_pretrained  # noqa: E402
from official_albert.serving import openvino_export as ove  # noqa: E402
from tests import tiny  # noqa: E402

pytestmark = pytest.mark.slow  # an OpenVINO export of every task head (docs/design.md, Test tiers)

TINY = dict(tiny.MODEL)
CONTEXT = ("Naïve readers of the old library found twelve modules in 1990. By 2001 the catalogue listed about three "
           "hundred and forty, or seven percent, of the files; the parser was rewritten twice. A blue heron nested "
           "on the roof of the west wing, and the gardeners planted tulips beside the gate every spring.")
QUESTIONS = ["What nested on the roof?", "How many modules were there in 1990?"]
TAGS = ["O", "B-LOC", "I-LOC", "B-PER"]
NUM_CHOICES = 3
QA = dict(max_seq_length=48, doc_stride=16, max_query_length=16)


@pytest.fixture(scope="module")
def exports(tmp_path_factory, spm_model_file):
  """{head: (model dir, f32 OpenVINO folder)} of tiny random models."""
  root = tmp_path_factory.mktemp("task_pipelines_ov")
  out = {}
  for i, head in enumerate(("span", "squad_v2", "multiple_choice", "token_classifier")):
    keras.utils.set_random_seed(40 + i)
    model = build_model(head, AlbertConfig(**TINY), len(TAGS), NUM_CHOICES)
    rng = np.random.default_rng(i)
    for variable in model.weights:  # random biases / LayerNorms, and logits far enough apart to rank the same
      value = np.asarray(variable)
      scale = 50.0 if "classifier" in variable.path else 1.0
      variable.assign((value * scale + rng.normal(0, 0.1, value.shape)).astype(value.dtype))
    model_dir = str(tmp_path_factory.mktemp(head))
    save_pretrained(model, model_dir, spm_model_file=spm_model_file)
    if head == "token_classifier":
      with open(os.path.join(model_dir, "labels.json"), "w") as f:
        json.dump({"labels": TAGS}, f)
    out[head] = (model_dir, ove.export_openvino(model_dir, str(root / head), head=head, precision="f32", seq_length=48,
                                                num_choices=NUM_CHOICES))
  return out


@pytest.mark.slow
@pytest.mark.parametrize("head", ["span", "squad_v2"])
def test_question_answering_folder_matches_the_model_dir(exports, head):
  model_dir, folder = exports[head]
  theirs = pipelines.question_answering(model_dir, QUESTIONS, CONTEXT, top_k=3, **QA)
  ours = pipelines.question_answering(folder, QUESTIONS, CONTEXT, top_k=3, **QA)
  assert len(ours) == len(theirs) == 2
  for mine, tf_answers in zip(ours, theirs):
    assert [(a["answer"], a["start"], a["end"]) for a in mine] == [(a["answer"], a["start"], a["end"])
                                                                    for a in tf_answers]
    np.testing.assert_allclose([a["score"] for a in mine], [a["score"] for a in tf_answers], atol=1e-4)
    assert all(CONTEXT[a["start"]:a["end"]] == a["answer"] for a in mine)
  if head == "squad_v2":  # the null answer ranks first (null score > 0) or after every span
    tf_all, ov_all = (pipelines.question_answering(src, QUESTIONS[0], CONTEXT, top_k=100, **QA)
                      for src in exports[head])
    assert [a["answer"] for a in ov_all] == [a["answer"] for a in tf_all]
    null = ov_all[0] if ov_all[0]["answer"] == "" else ov_all[-1]
    assert (null["answer"], null["start"], null["end"]) == ("", 0, 0) and 0 < null["score"] < 1


def test_multiple_choice_folder_matches_the_model_dir(exports):
  model_dir, folder = exports["multiple_choice"]
  contexts = ["Tom has a red ball. He plays with it every day.", "A blue heron nested on the roof."]
  questions = ["Tom plays _ .", "What nested on the roof?"]
  choices = [["every day", "never", "at night"], ["a heron", "a gardener", "the parser"]]
  theirs = pipelines.multiple_choice(model_dir, contexts, questions, choices, max_seq_length=64, max_qa_length=16)
  ours = pipelines.multiple_choice(folder, contexts, questions, choices, max_seq_length=64, max_qa_length=16)
  for mine, tf_row in zip(ours, theirs):
    assert (mine["label"], mine["choice"]) == (tf_row["label"], tf_row["choice"])
    np.testing.assert_allclose(mine["scores"], tf_row["scores"], atol=1e-4)
  # The best choice leads by far more than the TF / OpenVINO difference, so the label comparison means something.
  assert all(np.sort(r["scores"])[-1] - np.sort(r["scores"])[-2] > 1e-3 for r in theirs)
  with pytest.raises(ValueError, match="4 choices per question, but the model takes 3"):
    pipelines.multiple_choice(folder, contexts[0], questions[0], choices[0] + ["once"], max_seq_length=64,
                              max_qa_length=16)


def test_token_classification_folder_matches_the_model_dir(exports):
  model_dir, folder = exports["token_classifier"]
  texts = ["Ann lives in  Zürich-based Paris", "déjà vu, 1990: the blue heron"]
  theirs = pipelines.token_classification(model_dir, texts, seq_length=48)
  ours = pipelines.token_classification(folder, texts, seq_length=48)
  for mine, tf_words in zip(ours, theirs):
    assert [(w["word"], w["start"], w["end"], w["label"]) for w in mine] == [
        (w["word"], w["start"], w["end"], w["label"]) for w in tf_words]
    np.testing.assert_allclose([w["score"] for w in mine], [w["score"] for w in tf_words], atol=1e-4)
  assert {w["label"] for row in ours for w in row} <= set(TAGS)


def test_a_folder_of_another_head_is_refused_naming_both(exports):
  with pytest.raises(ValueError, match=r"question_answering needs a span or squad_v2 export, but .*multiple_choice "
                                       r"is a multiple_choice export; export the model with --format=openvino "
                                       r"--head=span"):
    pipelines.question_answering(exports["multiple_choice"][1], QUESTIONS[0], CONTEXT, **QA)
  with pytest.raises(ValueError, match="token_classification needs a token_classifier export, but .* is a span export"):
    pipelines.token_classification(exports["span"][1], "Ann lives in Paris")
  with pytest.raises(ValueError, match="multiple_choice needs a multiple_choice export, but .* is a token_classifier "
                                       "export"):
    pipelines.multiple_choice(exports["token_classifier"][1], "a", "b", ["c", "d", "e"])
  with pytest.raises(ValueError, match="classify needs a classifier export, but .* is a token_classifier export"):
    pipelines.classify(exports["token_classifier"][1], "Ann lives in Paris")
