"""A served SQuAD 2.0 model answers its run's questions as the run's `--mode=predict` did (review s58).

A tiny squad_v2 model is fine-tuned for 2 steps from a raw SQuAD JSON, with windows and post-processing other than
the reference's (48-piece windows, stride 16, questions cut at 16, answers of at most 5 pieces, 4-best, and a null
score threshold that splits the questions between "" and a span); `--mode=predict` writes predictions.json. The
server (`python -m official_albert.serve` in a child process, real HTTP on localhost) serves the model directory,
and each question's answer over OIP v2 (`/v2/models/{name}/infer`) must be predictions.json's for that question id:
the server reads the windows, threshold, answer length and n-best size from the run's params.yaml, as predict did.
"""

import json
import re
import shutil

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("prometheus_client")

from official_albert import train  # noqa: E402
from official_albert.checkpoints import loading  # noqa: E402
from official_albert.serving import served_rows  # noqa: E402
from tests import tiny  # noqa: E402
from tests.official_albert.serving.test_server import _outputs  # noqa: E402
from tests.official_albert.serving.test_server import _post  # noqa: E402
from tests.official_albert.serving.test_server import Server  # noqa: E402

pytestmark = pytest.mark.slow  # a fine-tune, two predict runs and a server in a process (docs/design.md, Test tiers)

SEQ = 48
SETTINGS = {"doc_stride": 16, "max_query_length": 16, "max_answer_length": 5, "n_best_size": 4}
TRAINER = {"train_steps": 2, "steps_per_loop": 2, "checkpoint_interval": 2, "validation_interval": 2,
           "summary_interval": 2, "validation_steps": -1, "warmup_steps": 0, "learning_rate": 1e-3,
           "optimizer": "adamw"}
# Contexts longer than one 48-piece window (so that the stride and the max-context rule count), two answerable
# questions and an unanswerable one each.
FACTS = [("The old module", "the library", "a list of strings", "the tests"),
         ("A small function", "the parser file", "the number of rows", "the logger"),
         ("The main class", "the core package", "a sorted dictionary", "the docs")]


def _squad_v2_file(path):
  paragraphs = []
  for i, (subject, place, value, reader) in enumerate(FACTS):
    context = (f"{subject} number {i} is defined in {place} , and it returns {value} to the caller . It was "
               f"written in 199{i} by a team of four people , who also wrote {reader} that check it every night "
               f"before the release is built and shipped to the users of the project .")
    qas = [{"id": f"q{i}a", "question": f"Where is {subject.lower()} number {i} defined ?", "is_impossible": False,
            "answers": [{"text": place, "answer_start": context.index(place)}]},
           {"id": f"q{i}b", "question": "What does it return to the caller ?", "is_impossible": False,
            "answers": [{"text": value, "answer_start": context.index(value)}]},
           {"id": f"q{i}c", "question": "Which colour is the sky over the river ?", "is_impossible": True,
            "answers": []}]
    paragraphs.append({"context": context, "qas": qas})
  path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]}))
  return path


def _override(task, threshold):
  return json.dumps({"task": dict(task, null_score_threshold=threshold), "trainer": TRAINER,
                     "runtime": {"distribution_strategy": "one_device", "seed": 3}})


def _split_threshold(null_odds):
  """A threshold between the middle two null scores: some questions answer "", the others a span."""
  scores = sorted(null_odds.values())
  low, high = scores[len(scores) // 2 - 1], scores[len(scores) // 2]
  threshold = float(f"{(low + high) / 2:.12f}")  # (fixed-point: PyYAML reads 1e-05 as a string)
  assert low < threshold < high, f"the tiny model gave the middle questions the same null score: {scores}"
  return threshold


@pytest.fixture(scope="module")
def squad_run(tmp_path_factory, spm_model_file):
  """{"model_dir", "questions" (id, question, context), "predictions" (predictions.json), "task", "threshold"} of a
  2-step squad_v2 fine-tune and its predict run at a recorded threshold that splits the questions."""
  root = tmp_path_factory.mktemp("squad_run")
  data = str(_squad_v2_file(root / "tiny-v2.0.json"))
  section = lambda batch, training: {"input_path": data, "global_batch_size": batch, "seq_length": SEQ,  # noqa: E731
                                     "is_training": training, "drop_remainder": training, "seed": 1}
  task = {"model": tiny.TRAIN_MODEL, "version_2_with_negative": True, "spm_model_file": spm_model_file,
          "train_data": section(4, True), "predict_data": section(8, False), **SETTINGS}
  model_dir = root / "model"
  train.run("squad_v2", "train", str(model_dir), params_override=_override(task, 0.0))
  first = train.run("squad_v2", "predict", str(model_dir), params_override=_override(task, 0.0))
  threshold = _split_threshold(json.loads(open(first["files"]["null_odds"]).read()))
  # The run as if fine-tuned with that threshold (it takes no part in training): params.yaml records it, and the
  # predict run uses it.
  params = model_dir / "params.yaml"
  text, count = re.subn(r"(?m)^(\s*null_score_threshold:).*$", rf"\g<1> {threshold:.12f}", params.read_text())
  assert count == 1, text
  params.write_text(text)
  out = train.run("squad_v2", "predict", str(model_dir), params_override=_override(task, threshold))
  questions = [(qa["id"], qa["question"], p["context"]) for a in json.loads(open(data).read())["data"]
               for p in a["paragraphs"] for qa in p["qas"]]
  return {"model_dir": str(model_dir), "questions": questions, "task": task, "threshold": threshold,
          "predictions": json.loads(open(out["files"]["predictions"]).read())}


def test_served_answers_equal_the_runs_predictions(squad_run, tmp_path):
  """Every question of the run's file, posted over OIP v2 in batches of 4, gets predictions.json's answer text for
  its id; the recorded threshold gives both null ("") and span answers, so the check covers both."""
  model_dir, questions, predictions = squad_run["model_dir"], squad_run["questions"], squad_run["predictions"]
  assert set(predictions) == {q for q, _, _ in questions}
  assert "" in predictions.values() and any(predictions.values()), predictions
  server = Server(tmp_path, {"squad": model_dir}, "--max_batch_size=8", "--batch_timeout_ms=20")
  try:
    server.wait_ready()
    served = {}
    for start in range(0, len(questions), 4):
      batch = questions[start:start + 4]
      body = {"inputs": [{"name": name, "datatype": "BYTES", "shape": [len(batch)], "data": [q[k] for q in batch]}
                         for name, k in (("question", 1), ("context", 2))]}
      response = _post(f"{server.url}/v2/models/squad/infer", body)
      assert response.status_code == 200, response.text
      served.update(zip([q[0] for q in batch], _outputs(response.json())["answer"]["data"]))
  finally:
    server.stop()
  wrong = {q: {"served": served.get(q), "predictions.json": a} for q, a in predictions.items() if served.get(q) != a}
  assert not wrong, f"{wrong}\n{server.log()}"


def test_a_later_predict_run_at_another_length_leaves_the_served_length(squad_run, tmp_path):
  """Review s58's question: the run recorded predict_data.seq_length=48; a later `--mode=predict` at 64 (its
  validation_data at 64 too) records nothing (params.yaml stays the training run's), so the server and the pipelines
  still answer at 48 with the recorded windows (`pipeline_inputs.default_seq_length` says why)."""
  run = tmp_path / "run"
  shutil.copytree(squad_run["model_dir"], run)
  before = (run / "params.yaml").read_text()
  longer = dict(squad_run["task"]["predict_data"], seq_length=64)
  task = dict(squad_run["task"], predict_data=longer, validation_data=longer)
  out = train.run("squad_v2", "predict", str(run), params_override=_override(task, squad_run["threshold"]))
  assert set(json.loads(open(out["files"]["predictions"]).read())) == set(squad_run["predictions"])
  assert (run / "params.yaml").read_text() == before
  model, _ = loading.load_model(str(run), "squad_v2")
  assert served_rows.qa_options(model, str(run)) == {"max_seq_length": SEQ, **SETTINGS,
                                                     "null_score_threshold": squad_run["threshold"]}
