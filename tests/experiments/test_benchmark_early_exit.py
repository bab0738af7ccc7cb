"""The `early_exit` benchmark workload on a tiny model: its rows' answers are the model's own. Never timed."""

import importlib.util
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from experiments.benchmark import core as benchmark
from experiments.benchmark import driver
from experiments.benchmark import early_exit as workload
from official_albert import AlbertConfig
from official_albert.checkpoints import native
from official_albert.modeling import early_exit
from official_albert.modeling.models import AlbertClassifier
from official_albert.tokenization import FullTokenizer

OPENVINO = importlib.util.find_spec("openvino") is not None
TEXTS = ["a good and fine film", "a bad and dull film", "great fun", "awful mess", "lovely warm story",
         "boring cold plot", "best movie ever", "worst movie ever", "it is fine", "not good"]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, spm_model_file):
  root = tmp_path_factory.mktemp("early_exit_bench")
  vocab = FullTokenizer(spm_model_file).vocab_size
  config = AlbertConfig(vocab_size=vocab, embedding_size=16, hidden_size=32, num_hidden_layers=4,
                        num_attention_heads=4, intermediate_size=37, max_position_embeddings=64)
  tf.keras.utils.set_random_seed(0)
  model = AlbertClassifier(config, num_labels=2, exit_heads=True)
  for head in early_exit.exit_heads(model) + [model.classifier]:
    head.output_weights.assign(head.output_weights * 50.0)  # answers that change between iterations
  native.save_pretrained(model, str(root / "with"), spm_model_file)
  native.save_pretrained(AlbertClassifier(config, num_labels=2), str(root / "without"), spm_model_file)
  (root / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(TEXTS)))
  return {"root": root, "model": model, "spm": spm_model_file}


@pytest.mark.large
@pytest.mark.slow
def test_rows_report_the_models_own_answers(dirs, tmp_path):
  settings = benchmark.BenchSettings(workload="early_exit", batch_size=4, seq_length=32, repeats=2, warmup=0,
                                     model_dir=str(dirs["root"] / "with"),
                                     baseline_model_dir=str(dirs["root"] / "without"),
                                     eval_file=str(dirs["root"] / "dev.tsv"), patience=(1, 2), dtypes=("float32",),
                                     openvino=OPENVINO, max_examples=6)
  results = driver.run([settings], str(tmp_path), log=lambda *_: None)
  result = results["workloads"]["early_exit"]
  assert result["status"] == "ok", result
  rows = {r["name"]: r for r in result["rows"]}
  engines = ("tf", "openvino") if OPENVINO else ("tf",)
  assert set(rows) == {f"{e}_{m}_b{b}" for e in engines for m in ("full", "patience_1", "patience_2") for b in (1, 4)}
  if OPENVINO:  # the f32 IR of the same model: the same answers and exits (round-off aside)
    for name in ("full_b1", "patience_1_b4", "patience_2_b1"):
      assert rows[f"openvino_{name}"]["status"] == "ok"
      assert rows[f"openvino_{name}"]["exit_mean"] == pytest.approx(rows[f"tf_{name}"]["exit_mean"], abs=0.2)
      assert rows[f"openvino_{name}"]["accuracy"] == pytest.approx(rows[f"tf_{name}"]["accuracy"], abs=0.1)
  tokenizer = FullTokenizer(dirs["spm"])
  labels = np.arange(len(TEXTS)) % 2
  model = dirs["model"]
  for patience in (0, 1, 2):
    # The model's own answers and exit iterations on each request of 4 (every row answers all 10 examples in requests
    # of the larger batch size, whatever its timed batch size): run here directly, once per patience.
    predictions, exits = [], []
    for batch in workload.packed_batches(tokenizer, TEXTS, 4, 32):
      out = model(batch, patience=patience)
      predictions += list(np.argmax(out["logits"].numpy(), -1))
      exits += list(out["exit_iteration"].numpy()) if patience else [4] * len(batch["input_mask"])
    for b in (1, 4):
      row = rows[f"tf_{'full' if not patience else f'patience_{patience}'}_b{b}"]
      # Timed on the first 6 examples; answered on all 10 (in requests of 4).
      assert row["status"] == "ok" and row["repeats"] == 2 and row["examples"] == 6 and row["evaluated"] == 10
      assert row["accuracy"] == pytest.approx(np.mean(np.asarray(predictions) == labels))
      assert row["exit_mean"] == pytest.approx(np.mean(exits))
      assert row["speedup"] > 0 and row["p99_ms"] >= row["p50_ms"] > 0
  assert rows["tf_full_b1"]["speedup"] == 1.0
  depth = {r["name"]: r for r in result["elastic_depth"]}
  assert {f"tf_{tag}_depth_{k}_b4" for tag in ("baseline", "exit_heads") for k in range(1, 5)} == set(depth)
  assert depth["tf_exit_heads_depth_4_b4"]["accuracy"] == rows["tf_full_b4"]["accuracy"]
  assert "change" in result["exit_heads_cost"]
  assert {g["batch_size"] for g in result["goals"]} == {1, 4}
  assert (tmp_path / "early_exit_frontier.png").exists()
  assert json.loads((tmp_path / "results.json").read_text())["workloads"]["early_exit"]["frontier_chart"]


def test_warmup_makes_that_many_untimed_passes_over_every_request():
  batches = [{"input_mask": np.ones((1, n), np.int32)} for n in range(5, 45, 3)]  # 14 requests, 14 padded lengths
  for warmup, passes in ((0, 1), (1, 1), (3, 3)):
    seen = []

    def call(batch, seen=seen):
      seen.append(batch["input_mask"].shape[1])
      return np.zeros((1, 2)), np.zeros(1)
    row = workload.Row("tf_full_b1", "tf", "float32", 1, call)
    workload._rotate([row], {1: batches}, benchmark.BenchSettings(repeats=2, warmup=warmup), log=lambda *_: None)
    untimed = seen[:len(seen) - 2 * len(batches)]
    assert untimed == [b["input_mask"].shape[1] for b in batches] * passes, warmup  # every length, before timing
    assert len(row.latencies) == 2 * len(batches)


@pytest.fixture(scope="module")
def failing_openvino_export(dirs):
  """The workload with `--openvino` at the default --seq_length=128 (the model has 64 positions) and an exporter
  that writes into its folder, records its length, then fails."""
  calls = []

  def export_openvino(model_dir, export_dir, head, precision, **options):
    calls.append({"export_dir": export_dir, **options})
    with open(f"{export_dir}.part", "w") as f:  # a file of the export, in the caller's folder
      f.write("x")
    raise RuntimeError("no IR in this test")

  from official_albert.serving import openvino_export
  settings = benchmark.BenchSettings(workload="early_exit", batch_size=2, repeats=1, warmup=0, patience=(1,),
                                     model_dir=str(dirs["root"] / "with"), eval_file=str(dirs["root"] / "dev.tsv"),
                                     dtypes=("float32",), openvino=True, max_examples=4)
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(openvino_export, "export_openvino", export_openvino)
    result = workload.early_exit_workload(settings, log=lambda *_: None)
  return result, calls


@pytest.mark.large
@pytest.mark.slow
def test_openvino_exports_at_the_tf_rows_length_and_a_failed_export_is_an_error_row(failing_openvino_export):
  result, calls = failing_openvino_export
  assert [c["seq_length"] for c in calls] == [64, 64]  # --seq_length capped at the positions, as the TF rows are
  rows = {r["name"]: r for r in result["rows"]}
  assert {f"openvino_{m}_b{b}" for m in ("full", "patience_1") for b in (1, 2)} <= set(rows)
  for name, row in rows.items():
    if name.startswith("openvino_"):
      assert row["status"] == "error" and "RuntimeError: no IR in this test" in row["reason"], row
    else:
      assert row["status"] == "ok", row


@pytest.mark.large
@pytest.mark.slow
def test_openvino_exports_are_removed_when_the_workload_ends(failing_openvino_export):
  _, calls = failing_openvino_export
  folders = {os.path.dirname(c["export_dir"]) for c in calls}
  assert len(folders) == 1 and not os.path.exists(folders.pop())


def test_without_a_model_the_workload_says_what_it_needs():
  result = driver.run_workload(benchmark.BenchSettings(workload="early_exit"), log=lambda *_: None)
  assert result["status"] == "skipped" and "--model_dir" in result["reason"]


def test_dev_labels_take_the_models_order_not_a_sorted_one(tmp_path):
  """Without labels.json the names are the ones classify reads (HF id2label, labels.txt): sorted names inverted a
  model whose output 0 is "positive"; a file of bare ids is read as the ids ("10" sorted before "2")."""
  (tmp_path / "dev.tsv").write_text("sentence\tlabel\ngreat film\tpositive\nawful film\tnegative\n", encoding="utf-8")
  (tmp_path / "labels.txt").write_text("positive\nnegative\n", encoding="utf-8")
  settings = benchmark.BenchSettings(workload="early_exit", model_dir=str(tmp_path),
                                     eval_file=str(tmp_path / "dev.tsv"))
  assert workload.labelled_texts(settings, 2)[1].tolist() == [0, 1]
  (tmp_path / "labels.txt").unlink()
  (tmp_path / "dev.tsv").write_text("sentence\tlabel\na\t2\nb\t10\nc\t0\n", encoding="utf-8")
  assert workload.labelled_texts(settings, 11)[1].tolist() == [2, 10, 0]
  with pytest.raises(ValueError, match=r"labels \['0', '10', '2'\] are not the model's[\s\S]*labels.txt"):
    workload.labelled_texts(settings, 3)
