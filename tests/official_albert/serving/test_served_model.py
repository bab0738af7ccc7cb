"""A folder opened for the server (serving.served_model): its head and outputs, exit heads at a patience, answers
equal to the pipelines on the same folder, and the folders it refuses at start-up, each named with the reason."""

import importlib.util
import json
import os
import re
import shutil
import tracemalloc

import keras
import numpy as np
import pytest

from official_albert import AlbertConfig
from official_albert.checkpoints.loading import build_model
from official_albert.checkpoints.native import save_pretrained
from official_albert.serving import embedding
from official_albert.serving import pipelines
from official_albert.serving import served_model
from official_albert.serving.remembered_ids import RememberedIds

TINY = dict(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32)
TEXTS = ["the invoice is wrong", "it crashes on start", "great work", "a"]


def _save(root, name, head, num_labels, spm_model_file, labels_json=None, **options):
  keras.utils.set_random_seed(3)
  model = build_model(head, AlbertConfig(**TINY), num_labels, **options)
  save_pretrained(model, str(root / name), spm_model_file=spm_model_file)
  if labels_json is not None:
    (root / name / "labels.json").write_text(json.dumps(labels_json))
  return str(root / name)


def test_a_classifier_with_exit_heads_answers_as_classify_at_its_patience(tmp_path, spm_model_file):
  folder = _save(tmp_path, "exits", "classifier", 3, spm_model_file, exit_heads=True)
  model = served_model.ServedModel("m", folder, patience=1)
  assert (model.head, model.backend, model.has_exits, model.labels) == ("classifier", "model_directory", True,
                                                                       ["LABEL_0", "LABEL_1", "LABEL_2"])
  assert [o["name"] for o in model.outputs_metadata()] == ["label", "label_id", "probabilities", "exit_iteration"]
  out = model.predict(TEXTS)
  want = pipelines.classify(folder, TEXTS, patience=1)
  assert out["label"].tolist() == [r["label"] for r in want]
  assert out["exit_iteration"].tolist() == [r["exit_iteration"] for r in want]
  np.testing.assert_allclose(out["probabilities"], [[r["probabilities"][n] for n in model.labels] for r in want],
                             atol=1e-6)


def test_a_classifier_packs_at_the_directorys_recorded_length_as_classify(tmp_path, spm_model_file):
  """A trainer directory's params.yaml records its predict length (8 here, under the model's 32 positions): the
  served answers — plain, at a patience, and for pairs (what /rerank sends a classifier) — are `classify(folder)`'s,
  which packs at that length, not at the positions."""
  folder = _save(tmp_path, "recorded length", "classifier", 3, spm_model_file, exit_heads=True)
  (tmp_path / "recorded length" / "params.yaml").write_text("task:\n  predict_data:\n    seq_length: 8\n")
  texts, pairs = [" ".join(TEXTS * 3), TEXTS[0]], [TEXTS[1], " ".join(TEXTS * 2)]
  answers = {}
  for patience in (None, 1):
    served = served_model.ServedModel("m", folder, patience=patience)
    for p in (None, pairs):
      out = answers[patience, p is None] = served.predict(texts, p)
      want = pipelines.classify(folder, texts, text_pairs=p, patience=patience)
      assert out["exit_iteration"].tolist() == [r["exit_iteration"] for r in want]
      np.testing.assert_allclose(out["probabilities"], [[r["probabilities"][n] for n in served.labels] for r in want],
                                 atol=1e-6)
    assert served.seq_length == 8
    # Token counts (the batcher's order, /v1/rerank's usage) are cut at that length too, as the texts are.
    assert [served.token_count(texts[0]), served.token_count(texts[1], pairs[1])] == [8, 8]
    assert served.token_count("a", "a") == 2 * len(served.tokenizer.encode_ids_batch(["a"])[0]) + 3
  # (the length matters: packed at the positions, the long text's probabilities move by ~9.4e-6, 9 x the tolerance;
  # ~4e-5 and a bar of 1e-5 before each weight got its own initializer, which changed these initial weights)
  at_positions = pipelines.classify(folder, texts[:1], seq_length=32)[0]["probabilities"]
  assert np.abs(answers[None, True]["probabilities"][0] - [at_positions[n] for n in served.labels]).max() > 5e-6


def test_a_pretrainer_directory_is_served_as_an_encoder(tmp_path, spm_model_file):
  folder = _save(tmp_path, "pre", "pretrainer", None, spm_model_file)
  model = served_model.ServedModel("e", folder)
  assert model.head == "encoder" and model.predict(TEXTS)["sentence_embedding"].shape == (4, 32)
  assert model.outputs_metadata() == [{"name": "sentence_embedding", "datatype": "FP32", "shape": [-1, 32]}]


def test_refused_folders_are_named_with_the_reason(tmp_path, spm_model_file):
  multi = _save(tmp_path, "multi", "classifier", 2, spm_model_file,
                {"task": "text_classification", "labels": ["a", "b"], "multi_label": True})
  with pytest.raises(served_model.ModelLoadError, match=re.escape(multi) + ": a multi-label classifier is not"):
    served_model.ServedModel("m", multi)
  # Without labels.json, an HF config.json's problem_type says it (the folder was served as a softmax classifier,
  # where pipelines.classify answers its sigmoids).
  if importlib.util.find_spec("transformers") and importlib.util.find_spec("torch"):
    from tests.official_albert.oracle import hf_config  # noqa: PLC0415 (the torch oracle)
    from tests.official_albert.oracle import make_hf_model  # noqa: PLC0415 (the torch oracle)
    from tests.official_albert.oracle import save_hf  # noqa: PLC0415 (the torch oracle)
    hf_multi = str(tmp_path / "hf_multi")
    save_hf(make_hf_model("AlbertForSequenceClassification", hf_config(
        **TINY, num_labels=3, problem_type="multi_label_classification"), seed=5), hf_multi)
    shutil.copy(spm_model_file, os.path.join(hf_multi, "spiece.model"))
    with pytest.raises(served_model.ModelLoadError, match=re.escape(hf_multi) + ": a multi-label classifier is not"):
      served_model.ServedModel("h", hf_multi)
  with pytest.raises(served_model.ModelLoadError, match="no such folder"):
    served_model.ServedModel("x", str(tmp_path / "missing"))
  broken = tmp_path / "broken"
  broken.mkdir()
  with pytest.raises(served_model.ModelLoadError, match=re.escape(str(broken)) + ": cannot be served"):
    served_model.ServedModel("b", str(broken))


def test_litert_exports_answer_as_the_pipelines(tmp_path, spm_model_file):
  pytest.importorskip("ai_edge_litert")
  from official_albert.serving import embedding
  from official_albert.serving import litert_export
  encoder = litert_export.export_litert(_save(tmp_path, "enc", "encoder", None, spm_model_file), str(tmp_path / "e"),
                                        "encoder", "f32", seq_length=32)
  classifier = litert_export.export_litert(_save(tmp_path, "cls", "classifier", 3, spm_model_file),
                                           str(tmp_path / "c"), "classifier", "f32", seq_length=32)
  served = served_model.ServedModel("e", encoder)
  assert (served.backend, served.head) == ("litert", "encoder")
  np.testing.assert_allclose(served.predict(TEXTS)["sentence_embedding"], embedding.embed(encoder, TEXTS), atol=1e-5)
  rows = [([2, 15, 27, 3], [1, 1, 1, 1], [0, 0, 0, 0]), ([2, 40, 3, 9, 3, 0], [1, 1, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0])]
  runtime = pipelines.open_export_folder(encoder)
  for k, (ids, mask, types) in enumerate(rows):  # token ids: the export's graph on the same ids
    alone = runtime({"input_word_ids": np.asarray([ids], np.int32), "input_mask": np.asarray([mask], np.int32),
                     "input_type_ids": np.asarray([types], np.int32)})["sentence_embedding"]
    np.testing.assert_allclose(served.predict([served_model.TokenIds(*map(tuple, r)) for r in rows])[
        "sentence_embedding"][k], np.asarray(alone)[0], atol=1e-5)
  served = served_model.ServedModel("c", classifier)
  assert (served.backend, served.head, served.takes_pairs) == ("litert", "classifier", True)
  out, want = served.predict(TEXTS, TEXTS[::-1]), pipelines.classify(classifier, TEXTS, text_pairs=TEXTS[::-1])
  assert out["label"].tolist() == [r["label"] for r in want]
  np.testing.assert_allclose(out["probabilities"], [[r["probabilities"][n] for n in served.labels] for r in want],
                             atol=1e-5)


def _run_on_ids(folder, head, ids, mask, types):
  """The model of `folder` called in process on token ids (the reference of the served `input_word_ids`)."""
  import tensorflow as tf

  from official_albert.serving import embedding
  if head == "encoder":
    model = embedding.load_embedder(folder)[0]
  else:
    model = pipelines.resolve_model(folder, head, None, True, "hf")[0]
  inputs = {k: tf.constant(np.asarray(v, np.int32)) for k, v in (("input_word_ids", ids), ("input_mask", mask),
                                                                  ("input_type_ids", types))}
  return model(inputs, training=False)


def test_a_regression_head_answers_its_score_as_classify(tmp_path, spm_model_file):
  """A one-output classifier (STS-B style): `score` = classify's predicted value, from text and from token ids."""
  folder = _save(tmp_path, "reg", "classifier", 1, spm_model_file)
  served = served_model.ServedModel("r", folder)
  assert served.outputs_metadata() == [{"name": "score", "datatype": "FP32", "shape": [-1]}]
  out = served.predict(TEXTS, TEXTS[::-1])
  assert list(out) == ["score"]
  np.testing.assert_allclose(out["score"], [r["score"] for r in pipelines.classify(folder, TEXTS,
                                                                                   text_pairs=TEXTS[::-1])], atol=1e-5)
  ids = served.predict([served_model.TokenIds((2, 15, 3), (1, 1, 1), (0, 0, 0))])
  np.testing.assert_allclose(ids["score"], np.asarray(_run_on_ids(folder, "classifier", [[2, 15, 3]], [[1, 1, 1]],
                                                                  [[0, 0, 0]])["logits"])[:, 0], atol=1e-5)
  with pytest.raises(served_model.ModelLoadError, match="regression head"):
    served.enable_depthwise(2)


def test_a_regression_exit_head_exits_at_the_servers_exit_threshold(tmp_path, spm_model_file):
  """--exit_threshold reaches a regression head's exit rule, from text and from token ids (the server had no way to
  set it: every regression exit model was served at classify's default 0.1)."""
  folder = _save(tmp_path, "reg exits", "classifier", 1, spm_model_file, exit_heads=True)
  ids = [served_model.TokenIds((2, 15, 3), (1, 1, 1), (0, 0, 0))]
  exits = {}
  for threshold in (None, 1e-12):
    served = served_model.ServedModel("r", folder, patience=1, exit_threshold=threshold)
    out = served.predict(TEXTS)
    want = pipelines.classify(folder, TEXTS, patience=1, **({} if threshold is None else
                                                             {"exit_threshold": threshold}))
    assert out["exit_iteration"].tolist() == [r["exit_iteration"] for r in want]
    np.testing.assert_allclose(out["score"], [r["score"] for r in want], atol=1e-6)
    exits[threshold] = (set(out["exit_iteration"].tolist()), served.predict(ids)["exit_iteration"].tolist())
  # (the tiny head's score moves by less than 0.1 per iteration: out after 2 of 3; never "unchanged" at 1e-12)
  assert exits == {None: ({2}, [2]), 1e-12: ({3}, [3])}


def test_token_ids_answer_as_the_model_on_the_same_ids(tmp_path, spm_model_file):
  """Rows of different lengths in one call (padded with mask 0) give each row's answer of the model on its own ids."""
  import tensorflow as tf
  rows = [([2, 15, 27, 3], [1, 1, 1, 1], [0, 0, 0, 0]), ([2, 40, 3, 9, 3, 0], [1, 1, 1, 1, 1, 0], [0, 0, 0, 1, 1, 0]),
          ([2, 3], [1, 1], [0, 0])]
  classifier = served_model.ServedModel("c", _save(tmp_path, "cls", "classifier", 3, spm_model_file))
  encoder = served_model.ServedModel("e", _save(tmp_path, "enc", "encoder", None, spm_model_file))
  for served in (classifier, encoder):
    assert [i["name"] for i in served.inputs_metadata()][-3:] == ["input_word_ids", "input_mask", "input_type_ids"]
    assert (served.id_limits.vocab_size, served.id_limits.max_length) == (1000, 32)
    out = served.predict([served_model.TokenIds(*map(tuple, r)) for r in rows])
    for k, (ids, mask, types) in enumerate(rows):
      alone = _run_on_ids(served.folder, served.head, [ids], [mask], [types])
      if served is encoder:
        np.testing.assert_allclose(out["sentence_embedding"][k], np.asarray(alone["sentence_embedding"])[0],
                                   atol=1e-5)
        continue
      probabilities = tf.nn.softmax(alone["logits"], axis=-1).numpy()[0]
      np.testing.assert_allclose(out["probabilities"][k], probabilities, atol=1e-5)
      assert out["label"][k] == served.labels[int(np.argmax(probabilities))] and "exit_iteration" not in out


def test_question_answering_and_token_classification_answer_as_their_pipelines(tmp_path, spm_model_file):
  from official_albert.serving import task_pipelines
  qa_folder = _save(tmp_path, "qa", "squad_v2", None, spm_model_file)
  qa = served_model.ServedModel("q", qa_folder)
  assert (qa.head, qa.id_limits) == ("question_answering", None)
  questions, contexts = ["who sat on the mat?", "where is it?"], ["the cat sat on the mat all day long", "in Paris"]
  out = qa.predict(questions, contexts)
  want = task_pipelines.question_answering(qa_folder, questions, contexts)  # (the windows it fits to 32 positions)
  assert out["answer"].tolist() == [a["answer"] for a in want]
  assert out["start"].tolist() == [a["start"] for a in want] and out["end"].tolist() == [a["end"] for a in want]
  np.testing.assert_allclose(out["score"], [a["score"] for a in want], atol=1e-5)
  tag_folder = _save(tmp_path, "tag", "token_classifier", 3, spm_model_file,
                     {"task": "tagging", "labels": ["O", "B-PER", "I-PER"]})
  with pytest.raises(served_model.ModelLoadError, match="holds a question_answering head"):
    served_model.ServedModel("t", qa_folder, head="token_classifier")
  tagger = served_model.ServedModel("t", tag_folder, head="token_classifier")
  assert [o["name"] for o in tagger.outputs_metadata()] == ["words"] and tagger.labels == ["O", "B-PER", "I-PER"]
  texts = ["Ann lives in Paris", "ok", "  spaced   words here "]
  got = [json.loads(w) for w in tagger.predict(texts)["words"]]
  want = task_pipelines.token_classification(tag_folder, texts)
  assert [[(w["word"], w["start"], w["end"], w["label"]) for w in r] for r in got] == [
      [(w["word"], w["start"], w["end"], w["label"]) for w in r] for r in want]
  np.testing.assert_allclose([w["score"] for r in got for w in r], [w["score"] for r in want for w in r], atol=1e-5)


def test_multiple_choice_answers_as_its_pipeline_for_each_choice_count(tmp_path, spm_model_file):
  """Each count k answers as the pipeline loading the folder for k, from one set of weights (a new k loaded the
  folder again and kept that copy: up to 15 of them)."""
  from official_albert.serving import task_pipelines
  folder = _save(tmp_path, "mc", "multiple_choice", None, spm_model_file)
  served = served_model.ServedModel("m", folder, head="multiple_choice")
  served.warm_up()
  contexts, questions = ["Tom has a red ball.", "The cat sat on the mat."], ["Tom has a _ ball.", "Where did it sit?"]
  for choices in ([["red", "blue", "green", "big"], ["mat", "tree", "car", "box"]], [["red", "blue"], ["mat", "tree"]],
                  [["red", "blue", "big"], ["mat", "tree", "box"]], [["red", "blue"], ["tree", "mat"]]):
    rows, pairs = served.task_rows({"context": contexts, "question": questions, "choices": choices})
    assert pairs is None and len({served.group(r) for r in rows}) == 1
    out = served.predict(rows)
    want = task_pipelines.multiple_choice(folder, contexts, questions, choices)
    assert out["label"].tolist() == [w["label"] for w in want] and out["choice"].tolist() == [w["choice"] for w in want]
    np.testing.assert_allclose(out["scores"], [w["scores"] for w in want], atol=1e-5)
  assert sorted(served.choice_models) == [2, 3, 4]
  weights = [{id(v) for v in m.weights} for m in served.choice_models.values()]
  assert all(w == weights[0] for w in weights) and len(weights[0]) == len(served.model.weights)
  assert [m.num_choices for m in served.choice_models.values()] == list(served.choice_models)


def test_fill_mask_answers_as_its_pipeline_and_refuses_texts_without_a_mask(tmp_path, spm_model_file):
  from official_albert.serving import http_protocols
  folder = _save(tmp_path, "pre", "pretrainer", None, spm_model_file)
  served = served_model.ServedModel("f", folder, head="fill_mask")
  texts = ["the cat sat on the [MASK].", "[MASK] is in [MASK]."]
  rows, pairs = served.task_rows({"text": texts})
  got = [json.loads(p) for p in served.predict(rows)["predictions"]]
  want = pipelines.fill_mask(folder, texts)
  assert pairs is None and served.outputs_metadata() == [{"name": "predictions", "datatype": "BYTES", "shape": [-1]}]
  flat = lambda r: r if isinstance(r[0], dict) else [p for mask in r for p in mask]  # noqa: E731
  for g, w in zip(got, want):
    assert [(p["token"], p["token_str"], p["sequence"]) for p in flat(g)] == [
        (p["token"], p["token_str"], p["sequence"]) for p in flat(w)]
    np.testing.assert_allclose([p["score"] for p in flat(g)], [p["score"] for p in flat(w)], atol=1e-5)
  with pytest.raises(http_protocols.ApiError, match=re.escape("text[1]: no [MASK] token")):
    served.task_rows({"text": ["a [MASK]", "no mask here"]})


def test_a_batch_tokenizes_each_text_once(tiny_model_dirs):
  """The batcher's token counts (and an embeddings answer's usage) and the pipeline's packing read one encoding of
  each text (`serving.remembered_ids`), and the answers are the pipeline's on a fresh tokenizer."""
  for head in ("classifier", "encoder"):
    model = served_model.ServedModel("m", tiny_model_dirs[head])
    before = model.tokenizer.encoded
    counts = [model.token_count(t) for t in TEXTS]
    out = model.predict(TEXTS)
    [model.token_count(t) for t in TEXTS]  # (usage, after the answer)
    assert model.tokenizer.encoded - before == len(TEXTS)
    assert counts == [len(ids) + 2 for ids in model.tokenizer.tokenizer.encode_ids_batch(TEXTS)]
    if head == "classifier":
      assert out["label"].tolist() == [r["label"] for r in pipelines.classify(tiny_model_dirs[head], TEXTS)]
    else:
      np.testing.assert_allclose(out["sentence_embedding"], embedding.embed(tiny_model_dirs[head], TEXTS),
                                 rtol=0, atol=1e-6)


class _LongTokenizer:
  """Two ids for every three characters (a SentencePiece model's rate on English: 64,678 ids for 100,000 characters),
  each id a small int, so the test measures the cache, not the ints."""

  def encode_ids_batch(self, texts):
    return [[7] * (2 * len(t) // 3) for t in texts]


def test_remembered_ids_are_bounded_by_size_not_only_by_count():
  """Audit s29 safety 2: the cache kept 4096 texts, each with a tuple of every id (8 bytes a pointer), whatever their
  size: at --max_text_chars=100000 that is gigabytes per served model, never freed. Now it holds at most max_bytes
  (its own accounting and what tracemalloc sees retained after 64 texts of 100,000 characters), and still answers
  the remembered texts without the tokenizer."""
  bound = 8 << 20  # (an entry is ~0.37 MB: 22 fit; one over bound // 16 would not be kept at all)
  cache = RememberedIds(_LongTokenizer(), max_bytes=bound)
  tracemalloc.start()
  try:
    before = tracemalloc.get_traced_memory()[0]
    for i in range(64):
      assert len(cache.encode_ids_batch([f"{i:02d}" + "x" * 99_998])[0]) == 66_666
    retained = tracemalloc.get_traced_memory()[0] - before
  finally:
    tracemalloc.stop()
  assert retained < bound + (1 << 20), f"{retained} bytes retained by a cache bounded at {bound}"
  assert 0 < cache.held_bytes <= bound
  encoded = cache.encoded
  assert cache.encode_ids_batch(["63" + "x" * 99_998]) == [[7] * 66_666] and cache.encoded == encoded
