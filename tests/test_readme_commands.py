"""README.md and docs/*.md run: every shell command in them is run here at tiny scale, or excused with a reason.

(docs/distributed_training.md has its own test with its own markers: tests/test_distributed_docs.py.)

Commands are extracted, never copied into this file: every line of a ```bash / ```sh block (backslash continuations
joined, comments left out) and every inline `python -m ...`, `make ...`, `pip install ...` or `cp ...` span. Each
one must be in RUNS (run in that order, each by `bash -c` in one scratch folder, `python` = this interpreter, a
`python -m` forked from one TensorFlow import: tests/warm_python.py) or in
NOT_RUN (with the reason it cannot run here and what checks it instead); `python -m MODULE` alone is a mention (the
module must exist). A command in neither table, or a table entry that matches no command, fails
`test_every_documented_command_is_run_or_excused`, so a new command is never silently untested.

Tiny scale is reached one way, SIZES: a table of literal replacements applied to every command run (vocabulary
size, dupe factor, shards, workers, and after each `--experiment=` a `--config_file` holding a tiny model, batch and
step count); every replacement must apply to some command. The placeholders the docs write as words (DIR, OUT,
PATH, DATA, PRED, `a|b|c` alternatives) are filled per command in RUNS. The inputs the README assumes are made
here, small: corpus text (this repository's docs), a GLUE MRPC folder, a SQuAD file and predictions for it.
"""

import importlib.util
import json
import pathlib
import random
import re
import shlex
import shutil
import subprocess

import pytest

from tests import warm_python
from tests.conftest import docs_shell_env

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [REPO_ROOT / "README.md"] + sorted(p for p in (REPO_ROOT / "docs").glob("*.md")
                                          if p.name != "distributed_training.md") + sorted(
    (REPO_ROOT / "experiments" / "projects").glob("*/README.md"))  # the research projects' commands

# ------------------------------------------------------------------------------------------------- the tables
SIZES = [
    ("--vocab_size=30000", "--vocab_size=300"),
    ("--dupe_factor=40", "--dupe_factor=1"),
    ("--num_output_shards=64", "--num_output_shards=2"),
    ("--num_workers=8", "--num_workers=1"),
    ("--experiment=albert_base_v2_pretrain", "--experiment=albert_base_v2_pretrain --config_file=tiny_pretrain.yaml"),
    ("--experiment=glue/mrpc", "--experiment=glue/mrpc --config_file=tiny_glue.yaml"),
    ("--experiment=text_classification", "--experiment=text_classification --config_file=tiny_glue.yaml"),
    ("--experiment=text_regression", "--experiment=text_regression --config_file=tiny_glue.yaml"),
    ("--experiment=text_embedding", "--experiment=text_embedding --config_file=tiny_embedding.yaml"),
    ("task.matryoshka_dims=[768,384,192]", "task.matryoshka_dims=[32,16,8]"),  # (the tiny model is 32 wide)
    ("--experiment=text_ranking", "--experiment=text_ranking --config_file=tiny_ranking.yaml"),
    ("--experiment=text_multiple_choice", "--experiment=text_multiple_choice --config_file=tiny_choice.yaml"),
]
_TINY_MODEL = ("  model: {vocab_size: 300, embedding_size: 16, hidden_size: 32, num_hidden_layers: 2, "
               "num_attention_heads: 2, intermediate_size: 64, max_position_embeddings: 512}\n")
_TINY_TRAINER = ("trainer: {train_steps: 4, warmup_steps: 1, steps_per_loop: 2, checkpoint_interval: 2, "
                 "summary_interval: 2, validation_interval: 2, validation_steps: 2}\n")
TINY_CONFIGS = {
    "tiny_pretrain.yaml": "task:\n" + _TINY_MODEL + "  train_data: {global_batch_size: 4, shuffle_buffer_size: 16}\n"
                          "  validation_data: {global_batch_size: 4}\n" + _TINY_TRAINER,
    # No task.model here: fine-tuning takes the model of task.init_checkpoint (the tiny pretrained one), predict and
    # export the model of model_dir; the commands run as the README writes them.
    "tiny_glue.yaml": "task:\n  train_data: {global_batch_size: 4}\n"
                      "  validation_data: {global_batch_size: 4}\n  predict_data: {global_batch_size: 4}\n"
                      + _TINY_TRAINER.replace("validation_steps: 2", "validation_steps: -1"),
    # (text_embedding has no predict_data: an embedder is served by pipelines.embed)
    "tiny_embedding.yaml": "task:\n  train_data: {global_batch_size: 4}\n  validation_data: {global_batch_size: 4}\n"
                           + _TINY_TRAINER.replace("validation_steps: 2", "validation_steps: -1"),
    "tiny_ranking.yaml": "task:\n  train_data: {global_batch_size: 4, seq_length: 64}\n"
                         "  validation_data: {global_batch_size: 4, seq_length: 64}\n"
                         + _TINY_TRAINER.replace("validation_steps: 2", "validation_steps: -1"),
    "tiny_choice.yaml": "task:\n  train_data: {global_batch_size: 4, seq_length: 64}\n"
                        "  validation_data: {global_batch_size: 4, seq_length: 64}\n"
                        + _TINY_TRAINER.replace("validation_steps: 2", "validation_steps: -1"),
}

_CONVERT = ("python -m official_albert.convert_checkpoint --input_format=hf|tf1|native --input=PATH "
            "--output_format=native|hf|tf1 --output_dir=OUT")
_FORMATS = {"--input_format=hf|tf1|native": "--input_format={}", "--output_format=native|hf|tf1": "--output_format={}"}
# (documented command, placeholder fillings: one run per dict), in run order.
RUNS = [
    ("python -m data_prep.train_sentencepiece --input=corpus.txt --model_prefix=30k-clean --vocab_size=30000", [{}]),
    ("python -m data_prep.create_pretraining_data --input_file='corpus/*.txt' --output_file=out/train "
     "--spm_model_file=30k-clean.model --max_seq_length=512 --dupe_factor=40 --num_output_shards=64 --num_workers=8",
     [{}]),
    ("python -m data_prep.create_pretraining_data --input_file='heldout/*.txt' --output_file=out/dev "
     "--spm_model_file=30k-clean.model --max_seq_length=512 --dupe_factor=1 --num_output_shards=4", [{}]),
    # The recipe's glob out/train-* also matches the .manifest.json sidecars written beside each shard.
    ("python -m official_albert.train --experiment=albert_base_v2_pretrain --mode=train_and_eval --model_dir=DIR "
     "--params_override=\"task.train_data.input_path=out/train-*,task.validation_data.input_path=out/dev-*,"
     "task.spm_model_file=30k-clean.model\"", [{"DIR": "runs/pretrain"}]),
    # Every format in and out once; the last makes the init_checkpoint the fine-tuning command names.
    (_CONVERT, [{"hf|tf1|native": "native", "native|hf|tf1": "tf1", "PATH": "runs/pretrain", "OUT": "converted/tf1"},
                {"hf|tf1|native": "tf1", "native|hf|tf1": "hf", "PATH": "converted/tf1", "OUT": "converted/hf"},
                {"hf|tf1|native": "hf", "native|hf|tf1": "native", "PATH": "converted/hf",
                 "OUT": "albert_base_v2_native"}]),
    ("python -m data_prep.create_finetuning_data --task=glue/mrpc --input_dir=glue_data "
     "--spm_model_file=30k-clean.model --output_dir=records --splits=train,dev,test", [{}]),
    # Raw GLUE folder in (records built and cached in the model_dir), then the records tool for large jobs.
    ("python -m official_albert.train --experiment=glue/mrpc --mode=train_and_eval --model_dir=runs/mrpc "
     "--params_override=\"task.init_checkpoint=albert_base_v2_native,task.train_data.input_path=glue_data,"
     "task.validation_data.input_path=glue_data\"", [{}]),
    ("python -m official_albert.train --experiment=glue/mrpc --mode=predict --model_dir=runs/mrpc "
     "--params_override=\"task.predict_data.input_path=glue_data\"", [{}]),
    ("python -m official_albert.export_saved_model --model_dir=DIR --export_dir=OUT --seq_length=128 "
     "--head=classifier", [{"DIR": "runs/mrpc", "OUT": "export/mrpc"}]),
    # docs/serving_openvino.md: the OpenVINO folder of the same model, laid out as a Model Server repository.
    ("python -m official_albert.export_saved_model --model_dir=runs/mrpc --export_dir=export/mrpc_ov "
     "--head=classifier --format=openvino", [{}]),
    # docs/litert.md: the on-device folder of the same model.
    ("python -m official_albert.export_saved_model --model_dir=runs/mrpc --export_dir=export/mrpc_litert "
     "--head=classifier --format=litert", [{}]),
    ("mkdir -p models/albert_mrpc/1", [{}]),
    ("cp export/mrpc_ov/openvino_model.xml export/mrpc_ov/openvino_model.bin models/albert_mrpc/1/", [{}]),
    ("python -m official_albert.fill_mask --model_dir=DIR --text=\"Hello I'm a [MASK] model.\" --top_k=5",
     [{"DIR": "runs/pretrain"}]),
    ("python -m data_prep.tokenize_corpus --input_file='corpus/*.txt' --spm_model_file=30k-clean.model "
     "--output_dir=tokens", [{}]),
    ("python -m data_prep.extend_vocabulary --spm_model_file=30k-clean.model --new_pieces_file=words.txt "
     "--output_model_file=extended.model --model_dir=DIR --output_model_dir=OUT",
     [{"DIR": "runs/pretrain", "OUT": "runs/extended"}]),
    # Your own data: CSV in, predictions CSV and a SavedModel with label strings out.
    ("python -m official_albert.train --experiment=text_classification --mode=train_and_eval --model_dir=runs/tickets "
     "--params_override=\"task.init_checkpoint=albert_base_v2_native,task.train_data.input_path=data/train.csv,"
     "task.validation_data.input_path=data/dev.csv,task.text_column=body,task.label_column=queue\"", [{}]),
    ("python -m official_albert.train --experiment=text_classification --mode=predict --model_dir=runs/tickets "
     "--params_override=\"task.predict_data.input_path=data/new.csv,task.id_column=ticket_id\"", [{}]),
    ("python -m official_albert.export_saved_model --model_dir=runs/tickets --export_dir=serve/tickets "
     "--head=classifier", [{}]),
    # docs/recipe.md, Which checkpoint answers: the run's best as a model directory of its own.
    ("python -m official_albert.convert_checkpoint --input_format=native --input=runs/tickets/model.ckpt-best "
     "--output_format=native --output_dir=runs/tickets_best", [{}]),
    # docs/early_exit.md: exit heads trained on a two-class CSV, exported at a patience and (OpenVINO) at a depth of
    # the tiny model's 2 iterations, then the workload at one patience and one repetition.
    ("python -m official_albert.train --experiment=text_classification --mode=train_and_eval --model_dir=runs/topic "
     "--params_override=\"task.exit_heads=true,task.init_checkpoint=albert_base_v2_native,"
     "task.train_data.input_path=train.csv,task.validation_data.input_path=dev.csv\"",
     [{"input_path=train.csv": "input_path=topic/train.csv", "input_path=dev.csv": "input_path=topic/dev.csv"}]),
    ("python -m official_albert.export_saved_model --model_dir=runs/topic --export_dir=export/topic_p2 "
     "--head=classifier --patience=2", [{}]),
    ("python -m official_albert.export_saved_model --model_dir=runs/topic --export_dir=export/topic_ov_d6 "
     "--head=classifier --depth=6 --format=openvino", [{"--depth=6": "--depth=1"}]),
    ("python -m experiments.benchmark --workload=early_exit --model_dir=runs/topic --eval_file=dev.csv "
     "--dtype=bfloat16 --batch_size=8 --patience=1,2,3,4,5,6 --openvino --output_dir=bench_exit",
     [{"--eval_file=dev.csv": "--eval_file=topic/dev.csv", "--patience=1,2,3,4,5,6": "--patience=1 --repeats=1"}]),
    # docs/long_inputs.md: a 4096-position block-sparse model from the HF directory converted above.
    ("python -m official_albert.convert_checkpoint --input_format=hf --input=albert_base_v2_hf --output_format=native "
     "--output_dir=albert_base_4096 --max_position_embeddings=4096 --attention_type=block_sparse",
     [{"albert_base_v2_hf": "converted/hf"}]),
    # docs/embeddings.md: similarity fine-tuning (regression on scored pairs) and the encoder export with `embed`.
    ("python -m official_albert.train --experiment=text_regression --mode=train_and_eval --model_dir=runs/sts "
     "--params_override=\"task.init_checkpoint=albert_base_v2_native,task.train_data.input_path=data/sts_train.csv,"
     "task.validation_data.input_path=data/sts_dev.csv,task.text_column=sentence1,task.text_pair_column=sentence2,"
     "task.label_column=score\"", [{}]),
    ("python -m official_albert.export_saved_model --model_dir=runs/sts --export_dir=serve/sts_embed --head=encoder",
     [{}]),
    # docs/retrieval.md: a bi-encoder on (anchor, positive) pairs with MNRL and Matryoshka widths.
    ("python -m official_albert.train --experiment=text_embedding --mode=train_and_eval --model_dir=runs/embedder "
     "--params_override=\"task.init_checkpoint=albert_base_v2_native,task.train_data.input_path=data/pairs_train.csv,"
     "task.validation_data.input_path=data/pairs_dev.csv,task.anchor_column=anchor,task.positive_column=positive,"
     "task.loss=mnrl,task.matryoshka_dims=[768,384,192]\"", [{}]),
    # docs/retrieval.md: the embedder as a sentence-transformers folder, and a reranker on query groups.
    ("python -m official_albert.convert_checkpoint --input_format=native --input=runs/embedder --output_format=hf "
     "--output_dir=runs/embedder_st", [{}]),
    ("python -m tasks.retrieval_evaluate --model_dir=runs/embedder --data_dir=scifact --split=test "
     "--output_file=scifact.json", [{}]),
    ("python -m official_albert.train --experiment=text_ranking --mode=train_and_eval --model_dir=runs/reranker "
     "--params_override=\"task.init_checkpoint=albert_base_v2_native,task.train_data.input_path=data/groups_train.jsonl,"
     "task.validation_data.input_path=data/groups_dev.jsonl,task.query_column=query,task.positive_column=positive,"
     "task.negative_column=negatives,task.num_negatives=3\"", [{}]),
    # docs/retrieval.md: a reranker on a BEIR-format set: the embedder's runs, groups mined from the train split's,
    # validated on the dev split's.
    ("python -m tasks.retrieval_evaluate --model_dir=runs/embedder --data_dir=scifact --split=train "
     "--run_file=runs/scifact-train.trec", [{}]),
    ("python -m data_prep.mine_hard_negatives --data_dir=scifact --split=train --run_file=runs/scifact-train.trec "
     "--output_file=data/scifact_groups.jsonl --num_negatives=7", [{}]),
    ("python -m tasks.retrieval_evaluate --model_dir=runs/embedder --data_dir=scifact --split=dev "
     "--run_file=runs/scifact-dev.trec", [{}]),
    ("python -m official_albert.train --experiment=text_ranking --mode=train_and_eval "
     "--model_dir=runs/reranker_scifact --params_override=\"task.init_checkpoint=albert_base_v2_native,"
     "task.train_data.input_path=data/scifact_groups.jsonl,task.num_negatives=7,task.validation_data.input_path=scifact,"
     "task.validation_candidates=runs/scifact-dev.trec,task.rerank_depth=20\"", [{}]),
    ("python -m tasks.retrieval_evaluate --first_stage=bm25 --data_dir=scifact --split=test "
     "--rerank_model_dir=runs/reranker_scifact", [{}]),
    ("python -m tasks.retrieval_evaluate --model_dir=runs/embedder --data_dir=scifact --rank_only "
     "--run_file=runs/scifact-test.trec", [{}]),
    ("python -m official_albert.train --experiment=text_ranking --mode=predict --model_dir=runs/reranker_scifact "
     "--params_override=\"task.predict_data.input_path=scifact,task.predict_candidates=runs/scifact-test.trec,"
     "task.rerank_depth=100\"", [{}]),
    # docs/recipe.md: multiple choice on one's own rows.
    ("python -m official_albert.train --experiment=text_multiple_choice --mode=train_and_eval --model_dir=runs/quiz "
     "--params_override=\"task.init_checkpoint=albert_base_v2_native,task.train_data.input_path=data/quiz_train.jsonl,"
     "task.validation_data.input_path=data/quiz_dev.jsonl,task.num_choices=4\"", [{}]),
    ("python -m tasks.squad_evaluate DATA PRED [--na-prob-file F] [--version 1.1|2.0]",
     [{"DATA": "squad/dev-v1.1.json", "PRED": "squad/predictions.json", " [--na-prob-file F]": "",
       " [--version 1.1|2.0]": ""}]),
]
_WORKLOADS = ("encoder_inference|pretrain_step|finetune_step|finetune_padding|train_loop|input_pipeline|gemm|compile|"
              "serving|tokenize|data_prep|dynamic_data|openvino_inference")  # (long_inputs: its own entry)
_MNLI_ONE_MODEL = ("needs the MNLI release and a trained glue/mnli model; tests/tasks/test_mnli_one_model.py runs the "
                   "same four reads of one glue/mnli model_dir through train.run on a tiny model and GLUE folder")
NOT_RUN = {
    "python -m official_albert.train --experiment=glue/mnli --mode=predict --model_dir=runs/mnli "
    "--params_override=\"task.predict_data.input_path=glue_data\"": _MNLI_ONE_MODEL,
    "python -m official_albert.train --experiment=glue/mnli-mm --mode=eval --model_dir=runs/mnli "
    "--params_override=\"task.validation_data.input_path=glue_data\"": _MNLI_ONE_MODEL,
    "python -m official_albert.train --experiment=glue/mnli-mm --mode=predict --model_dir=runs/mnli "
    "--params_override=\"task.predict_data.input_path=glue_data\"": _MNLI_ONE_MODEL,
    "python -m official_albert.train --experiment=glue/mnli --mode=predict --model_dir=runs/mnli "
    "--params_override=\"task.task_name=ax,task.predict_data.input_path=glue_data\"": _MNLI_ONE_MODEL,
    "make demo": "5.5 minutes end to end; tests/experiments/test_demo.py runs the same stages (--quick); here "
                 "`make -n demo` checks the target",
    "python -m experiments.demo --curve": "the full demo plus a fine-tuning run per kept pretraining checkpoint "
                                          "(~8 minutes); tests/experiments/test_demo.py runs it --quick with the "
                                          "curve",
    "make test": "the whole suite, this file included; `make -n test` checks the target",
    "make test-fast": "the suite less the tests marked `large`, this file's recipe run among them (minutes); "
                      "`make -n test-fast` checks the target",
    "make venv": "installs the core requirements into ./.venv (the first step of `make demo`); `make -n venv` checks "
                 "the target",
    "make lint": "ruff over the tree, run by `make test`; `make -n lint` checks the target",
    "make test-under-load": "the `timing` tests beside busy processes (minutes); `make -n test-under-load` checks the "
                            "target, tests/test_conftest_load.py the load it starts",
    "make format": "rewrites the files a change touches (yapf); `make -n format` checks the target",
    "make bench": "long benchmarks (not for CI); `make -n bench` checks the target, its command is parsed below",
    "python -m experiments.benchmark --suite=default --output_dir=bench_out":
        "long benchmark; its flags are parsed (tests/experiments/test_benchmark*.py run tiny workloads)",
    f"python -m experiments.benchmark --workload={_WORKLOADS} --preset=albert-base-v2 --batch_size=8 "
    "--seq_length=128 --dtype=float32,bfloat16 --compare=hf_torch,keras_hub":
        "long benchmark (and peers not installed in CI); its flags are parsed once per workload",
    "python -m experiments.benchmark --workload=serving_load --preset=albert-base-v2 --batch_size=16 --seq_length=128 "
    "--output_dir=bench_serving": "starts a server and loads it for minutes per backend; "
                                  "tests/experiments/test_benchmark_server_load.py runs the workload at the tiny size "
                                  "against a real server",
    "python -m experiments.benchmark --workload=serving_load --preset=tiny --batch_size=16 --seq_length=128":
        "the same workload at the tiny preset (a minute or two, with a 10,000-request soak per backend); "
        "tests/experiments/test_benchmark_server_load.py runs it with a smaller budget against a real server",
    "python -m experiments.backend_check --preset=albert-base-v2 --batch_size=8 --seq_length=128 "
    "--dtypes=float32,bfloat16 --output_file=backend_check.json":
        "albert-base timings for an accelerator; tests/experiments/test_backend_check.py runs the same binary at tiny "
        "scale on the CPU, with TensorFlow absent",
    "pip install .": "installs into the environment; tests/test_packaging.py builds and checks the package",
    "pip install 'official-albert[<extra>]'": "a pattern, not a command; tests/test_packaging.py installs the "
                                              "built wheel and checks every extra's requirements",
    "pip install -r requirements-openvino.txt": "installs into the environment (`make test` installs it); "
                                                "tests/test_packaging.py checks the `openvino` extra",
    "pip install -r requirements-retrieval.txt": "installs into the environment (`make test` installs it: the "
                                                 "Makefile's EXTRAS); the retrieval study's BM25 rows need it",
    "python -m experiments.projects.retrieval.study --output_dir=out/retrieval_study":
        "the study: ~48 min on 2 cores (pretraining and 6 fine-tuning runs); the --quick command below runs its "
        "every stage at a small size",
    "python -m experiments.projects.retrieval.study --output_dir=out/retrieval_gpu_pretrained "
    "--pretrained_dir=out/early_exit_study/pretrained --rerank_learning_rate=5e-5 --rerank_mining=biencoder":
        "the study from the early-exit study's GPU-pretrained model (a GPU and ~50 min on 2 cores); its flags parse "
        "here (test_excused_commands_still_resolve) and the --quick command below runs every stage",
    "python -m experiments.projects.retrieval.gpu_pretraining --step=arrays --output_dir=out/retrieval_gpu128":
        "the full corpus' records at 128 pieces, 8 copies (~1 min, 32 MB of arrays for a GPU host); "
        "tests/experiments/projects/retrieval/test_gpu_pretraining.py runs it on the --quick corpus",
    "python -m experiments.projects.retrieval.gpu_pretraining --step=convert --output_dir=out/retrieval_gpu128 "
    "--hf_dir=pretrained_hf":
        "needs the GPU host's pretrained folder; tests/experiments/projects/retrieval/test_gpu_pretraining.py "
        "converts a 2-step pretrain_torch.py run of the --quick arrays",
    "python -m experiments.projects.retrieval.study --output_dir=out/retrieval_gpu128 --seq_length=128 "
    "--pretrained_dir=out/retrieval_gpu128/gpu/pretrained --rerank_learning_rate=5e-5 --rerank_mining=biencoder":
        "the study from the GPU route's model (a GPU, then ~100 min on 2 cores); its flags parse here "
        "(test_excused_commands_still_resolve) and the --quick command below runs every stage",
    "python -m experiments.projects.retrieval.study --quick --seeds=1,2 --output_dir=/tmp/retrieval_quick":
        "tests/experiments/projects/retrieval/test_study.py runs it with these flags (into tmp_path, large tier) and "
        "recomputes its summary from the saved rankings",
    "pip install -r requirements-serve.txt": "installs into the environment (`make test` installs it); "
                                             "tests/test_packaging.py checks the `serve` extra",
    "python -m official_albert.serve --model_dir=runs/mrpc --model_name=mrpc --model_dir=runs/embedder "
    "--model_name=embedder --port=8080": "a foreground server (it runs until SIGTERM); "
                                         "tests/official_albert/serving/test_server.py starts it the same way on tiny "
                                         "models and sends it the documented requests",
    "python -m official_albert.serve --model_dir=runs/topic_exit --model_name=topic --port=8080 --patience=5 "
    "--depthwise_batching --slots=16": "a foreground server (it runs until SIGTERM); tests/official_albert/serving/"
                                       "test_depthwise.py starts it the same way on a tiny exit-head model",
    "python -m experiments.benchmark --workload=depthwise_serving --model_dir=DIR --eval_file=DEV.tsv --patience=5 "
    "--batch_size=16": "needs a fine-tuned exit-head model and minutes of load; its flags are parsed below, "
                       "tests/experiments/test_benchmark_depthwise.py runs the workload at a tiny size",
    "python -m experiments.benchmark --workload=depthwise_serving --model_dir=DIR --eval_file=DEV.tsv --patience=5 "
    "--batch_size=16 --openvino --rows=full_depth,in_call_exit,depthwise,full_depth_openvino,in_call_exit_openvino,"
    "depthwise_openvino": "the same with the OpenVINO modes (minutes of load); its flags are parsed below, "
                          "test_benchmark_depthwise.py checks the mode choice and the OpenVINO summary",
    "docker build -t albert-serve:0.3.0 .": "needs docker; tests/official_albert/serving/test_serving_docs.py checks "
                                            "the Dockerfile's command, ports and model path",
    "docker run --rm -p 8080:8080 -p 8081:8081 -v $PWD/runs/mrpc:/mnt/models albert-serve:0.3.0":
        "needs docker and the image above; test_grpc_server.py runs the same server command (HTTP and gRPC ports) "
        "without a container",
    "kubectl apply -f albert-mrpc.yaml": "needs a Kubernetes cluster with KServe; tests/official_albert/serving/"
                                         "test_serving_docs.py parses the manifest and checks its command and flags",
    "pip install -r requirements-keras-hub.txt": "installs into the environment (`make test` installs it); "
                                                 "tests/test_packaging.py checks the `keras-hub` extra",
    "pip install -r requirements-litert.txt": "installs into the environment (`make test` installs it); "
                                              "tests/test_packaging.py checks the `litert` extra",
    "python -m official_albert.convert_checkpoint --input_format=keras_hub|hf_tf --input=DIR --output_format=native "
    "--output_dir=OUT": "needs a KerasHub preset / a TFAlbert* folder: tests/official_albert/checkpoints/"
                        "test_keras_hub_presets.py::test_binary_commands_of_the_docs and test_hf_tf_checkpoints.py::"
                        "test_binary_contract_command run this command's main on each",
    "python -m official_albert.export_saved_model --model_dir=DIR --export_dir=OUT --head=classifier "
    "--format=openvino": "recipe.md's synopsis of docs/serving_openvino.md's command, which runs above with these "
                         "flags, DIR and OUT filled (runs/mrpc, export/mrpc_ov); a second run would only export the "
                         "same model the same way again",
    "python -m official_albert.export_saved_model --model_dir=DIR --export_dir=OUT --head=encoder":
        "a synopsis of the next command (docs/embeddings.md), which runs on the fine-tuned model above; "
        "tests/official_albert/serving/test_embedding.py exports a sentence-transformers folder the same way",
    "python -m official_albert.convert_checkpoint --input_format=native --input=DIR --output_format=keras_hub "
    "--output_dir=OUT --model_type=classifier": "needs keras-hub: tests/official_albert/checkpoints/"
                                                "test_keras_hub_presets.py::test_binary_commands_of_the_docs runs it",
    "python -m official_albert.export_saved_model --model_dir=runs/mrpc --export_dir=export/mrpc_ov_int8 "
    "--head=classifier --format=openvino --precision=int8 --calibration_file=calibration.txt":
        "the int8 gate on a 4-step model scores noise; tests/official_albert/serving/test_openvino_export.py runs "
        "int8 exports (gate passed, and refused on a broken calibration)",
    "docker run --rm -p 8000:8000 -v $PWD/models:/models openvino/model_server:latest --model_name albert_mrpc "
    "--model_path /models/albert_mrpc --rest_port 8000": "needs docker and the Model Server image; the repository "
                                                          "layout it reads is made by the two commands before it",
    "python -m experiments.benchmark --workload=long_inputs --dtype=float32,bfloat16 --compare=hf_torch "
    "--output_dir=bench_long": "long benchmark (hours on 2 cores); its flags are parsed below, "
                               "tests/experiments/test_benchmark_long_inputs.py runs the workload at a tiny size",
    "python -m experiments.benchmark.long_inputs --backend=jax --isolate=group --time_budget_s=400 "
    "--output_dir=bench_long_gpu": "the accelerator run (Keras on JAX); its flags are parsed below, "
                                   "tests/experiments/test_benchmark_long_inputs.py runs a JAX row without TensorFlow",
    **{f"python -m experiments.benchmark.long_inputs --backend={backend} --impls=ours --seq_lengths=4096 "
       f"--dtypes=float32,bfloat16 --modes=inference --warmup=0 --repeats=2 --output_dir=bench_long_{short}":
       "minutes at 4096 on 2 cores; tests/experiments/test_benchmark_long_inputs.py runs the workload at a tiny size "
       "(the openvino backend included) and its flags are parsed below" for backend, short in (("openvino", "ov"),
                                                                                           ("tensorflow", "tf"))},
    "python -m experiments.projects.long_inputs.study --pretrained_dir=demo_out/model "
    "--spm_model_file=demo_out/spm/spiece.model --output_dir=long_range_out":
        "hours at the full size on 2 cores (needs the demo's pretrained model); "
        "tests/experiments/projects/long_inputs/test_study.py runs the quick size of the three variants",
    "python -m experiments.projects.long_inputs.finetune_jax --stage=prepare --pretrained_dir=demo_out/model "
    "--spm_model_file=demo_out/spm/spiece.model --output_dir=long_range_jax":
        "needs the demo's pretrained model (minutes of pretraining); "
        "tests/experiments/projects/long_inputs/test_finetune_jax.py runs "
        "both stages on a tiny model (the records checked against the task's, fine-tuning without TensorFlow)",
    "python -m experiments.projects.long_inputs.finetune_jax --stage=prepare --pretrained_dir=demo_out/model "
    "--spm_model_file=demo_out/spm/spiece.model --output_dir=long_range_marked --keys=marked":
        "needs the demo's pretrained model; tests/experiments/projects/long_inputs/test_study.py checks the marked "
        "pools on the real "
        "corpus and tests/experiments/projects/long_inputs/test_finetune_jax.py runs prepare on a tiny model",
    "python -m experiments.projects.long_inputs.finetune_jax --stage=finetune --output_dir=long_range_marked "
    "--attention_types=block_sparse,truncated --fresh_documents --min_pieces=20 --max_pieces=120 --train_steps=2000 "
    "--batch_size=8 --learning_rate=3e-4 --save_weights_dir=long_range_marked/w1":
        "the accelerator run (minutes); tests/experiments/projects/long_inputs/test_finetune_jax.py runs finetune "
        "without TensorFlow",
    "python -m experiments.projects.long_inputs.finetune_jax --stage=finetune --output_dir=long_range_jax":
        "reads the prepare stage's output; tests/experiments/projects/long_inputs/test_finetune_jax.py runs it "
        "without TensorFlow",
    **{f"python -m experiments.projects.ablations.study {args}": "a study is minutes to hours on 2 cores "
       "(experiments/projects/ablations/README.md); "
       "tests/experiments/projects/ablations/test_study.py parses every one of these with the binary's flags and "
       "runs --quick table5 "
       "end to end" for args in (
           "--study=table5 --seeds=3 --output_dir=ablations/table5",
           "--study=table5 --corpus=my_corpus.txt --seeds=3 --steps=1500 --output_dir=ablations/mine",
           "--study=table4 --seeds=3 --output_dir=ablations/table4",
           "--study=table3 --seeds=3 --output_dir=ablations/table3",
           "--study=dropout --seeds=3 --output_dir=ablations/dropout",
           "--study=smoothness --seeds=1 --output_dir=ablations/smoothness",
           "--study=table5 --quick --seeds=1 --output_dir=ablations/quick",
           "--study=table5 --seeds=1 --steps=800 --output_dir=ablations/table5_800 --downstream=order",
           "--study=table5 --quick --seeds=1 --output_dir=ablations/quick --downstream=order",
           "--study=table5 --seeds=3 --glue_dir=../shared/data/glue --output_dir=ablations/table5",
           "--study=table5 --seeds=1 --seq_length=128 --batch_size=32 --downstream=order "
           "--output_dir=ablations/table5_s128",
           "--study=table4 --seeds=1 --glue_dir=../shared/data/glue --output_dir=ablations/table4",
           "--study=dropout --seeds=1 --glue_dir=../shared/data/glue --output_dir=ablations/dropout",
           "--study=table3 --seeds=1 --glue_dir=../shared/data/glue --output_dir=ablations/table3")},
    "python -m experiments.projects.early_exit.study --stage=data|pretrain|finetune|bench|report "
    "--output_dir=out/early_exit_study":
        "the study: hours on 2 cores (a 12-iteration model fine-tuned 12 times, timed per seed); its stages are the "
        "train binary and the early_exit workload run above, tests/experiments/projects/early_exit/test_study.py "
        "checks the report stage on made-up results and the GPU pretrainer's output loading",
    "python experiments/projects/early_exit/pretrain_torch.py --arrays out/early_exit_study/pretrain_arrays.npz "
    "--vocab_size 4000 --output_dir OUT/pretrained --steps 12000":
        "12,000 steps on a GPU host with PyTorch; tests/experiments/projects/early_exit/test_study.py runs it by path "
        "for 2 steps on made-up arrays and loads its output with our HF reader",
    "python experiments/projects/early_exit/pretrain_torch.py --arrays out/retrieval_gpu128/gpu/pretrain_arrays.npz "
    "--vocab_size 4000 --output_dir pretrained_hf --steps 14000 --max_seconds 480":
        "8 minutes on a GPU host with PyTorch; tests/experiments/projects/retrieval/test_gpu_pretraining.py runs it "
        "by path for 2 steps on the --quick corpus' arrays and converts its output for the study",
    **{f"python -m experiments.projects.early_exit.study {args} --output_dir=out/early_exit_study": "two stages of "
       "the study "
       "above, on its fine-tuned models (minutes on 2 cores); the same test covers the report stage" for args in (
           "--stage=bench --tasks=topic --seeds=1,2,3 --timed_examples=100",
           "--stage=report --tasks=topic --seeds=1,2,3",
           "--stage=finetune --tasks=sst2 --seeds=1,2,3",
           "--stage=bench --tasks=sst2,topic --seeds=1,2,3 --timed_examples=100",
           "--stage=report --tasks=topic,sst2 --seeds=1,2,3")},
    "python -m data_prep.inspect_pretraining_data --input_path=GLOB [--dynamic_masking --spm_model_file=M "
    "--max_seq_length=S --max_predictions_per_seq=P] --num_examples=K [--output_file=F]":
        "a synopsis with optional parts; tests/data_prep/test_inspect_pretraining_data.py runs it on static records "
        "and on the dynamic pipeline, with and without --output_file",
    "python -m experiments.projects.long_inputs.pretrain_jax --stage=prepare --pretrained_dir=demo_out/model "
    "--spm_model_file=demo_out/spm/spiece.model --corpus_dir=demo_out/corpus --output_dir=long_pretrain":
        "needs the demo's pretrained model and corpus (minutes of pretraining); tests/experiments/"
        "projects/long_inputs/test_pretrain_jax.py runs both stages on a tiny model (the pieces checked against the "
        "tokenizer's)",
    "python -m experiments.projects.long_inputs.pretrain_jax --stage=pretrain --output_dir=long_pretrain "
    "--attention_type=block_sparse "
    "--train_steps=3000 --batch_size=8":
        "the accelerator run (minutes at 4096); tests/experiments/projects/long_inputs/test_pretrain_jax.py runs it "
        "without TensorFlow "
        "and SentencePiece at 256 pieces",
    "python -m experiments.projects.long_inputs.pretrain_jax --stage=pretrain --output_dir=long_pretrain "
    "--attention_type=block_sparse "
    "--train_steps=3000 --batch_size=8 --learning_rate=5e-4 --save_model_dir=long_pretrain/continued":
        "the accelerator run; tests/experiments/projects/long_inputs/test_pretrain_jax.py runs it with "
        "--save_model_dir (the saved "
        "model scores the held-out text as the run's last evaluation)",
    "python -m experiments.projects.long_inputs.finetune_jax --stage=finetune --output_dir=long_range_jax "
    "--attention_types=block_sparse "
    "--pretrained_model_dir=long_pretrain/continued --fresh_documents --min_pieces=20 --max_pieces=120 "
    "--train_steps=2500 --batch_size=8 --learning_rate=3e-4 --save_weights_dir=long_range_jax/w1":
        "the accelerator run (minutes); tests/experiments/projects/long_inputs/test_finetune_jax.py runs finetune with "
        "--pretrained_model_dir, --save_weights_dir and --init_weights_dir without TensorFlow",
}


# ------------------------------------------------------------------------------------------------- extraction
_FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
_INLINE = re.compile(r"`([^`]+)`")
_COMMAND = re.compile(r"(python -m |make |pip install |cp )")


def _normalize(command):
  command = " ".join(command.split())
  return re.sub(r"\| ", "|", command)  # a `a|b|` alternative list broken over two lines


def documented_commands():
  """{command: [doc file name, ...]} of every shell command in the docs (see the module docstring)."""
  found = {}
  for doc in DOCS:
    text = doc.read_text(encoding="utf-8")
    for language, body in _FENCE.findall(text):
      if language not in ("bash", "sh", "shell", "console"):
        continue
      for line in body.replace("\\\n", " ").splitlines():
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if line and not line.startswith("#"):
          found.setdefault(_normalize(line), []).append(doc.name)
    for span in _INLINE.findall(_FENCE.sub("", text)):
      span = _normalize(span)
      if _COMMAND.match(span):
        found.setdefault(span, []).append(doc.name)
  return found


def _is_sent_to_the_server(command):
  """docs/serving.md's example requests: tests/official_albert/serving/test_server.py::test_the_documented_requests
  sends each to a live server (they need one running, which this file's scratch runs do not start)."""
  return command.startswith("curl ") and "localhost:8080/" in command


def _is_mention(command):
  return bool(re.fullmatch(r"python -m [\w.]+", command))


def _substituted(command, fill):
  for old, new in list(fill.items()) + SIZES:
    command = command.replace(old, new)
  return command


def test_every_documented_command_is_run_or_excused():
  commands = documented_commands()
  runs = {command for command, _ in RUNS}
  unclassified = [c for c in commands
                  if c not in runs and c not in NOT_RUN and not _is_mention(c) and not _is_sent_to_the_server(c)]
  assert not unclassified, ("documented commands neither run nor excused here (add them to RUNS or NOT_RUN):\n  "
                            + "\n  ".join(f"{c}   [{', '.join(commands[c])}]" for c in unclassified))
  stale = [c for c in list(runs) + list(NOT_RUN) if c not in commands]
  assert not stale, "entries that match no documented command any more:\n  " + "\n  ".join(stale)
  for mention in filter(_is_mention, commands):
    assert importlib.util.find_spec(mention.split()[-1]) is not None, mention
  # Every size substitution is used, and every placeholder of a run is filled.
  planned = [_substituted(c, fill) for c, fills in RUNS for fill in fills]
  for old, new in SIZES:
    assert any(new in c for c in planned), f"SIZES entry {old!r} applies to no command"
  for command in planned:
    assert not re.search(r"\b(DIR|OUT|PATH|DATA|PRED)\b|\w\|\w", command), command


def test_excused_commands_still_resolve():
  for command in NOT_RUN:
    words = shlex.split(command)
    if words[0] == "make" and shutil.which("make"):
      proc = subprocess.run(["make", "-n", words[1]], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
      assert proc.returncode == 0, (command, proc.stderr)
  from absl import flags

  from experiments.benchmark import driver
  from experiments.benchmark import long_inputs
  from experiments.projects.retrieval import gpu_pretraining
  from experiments.projects.retrieval import study as retrieval_study
  # Binaries whose excused commands' flags must parse as documented (the benchmark's, per workload, below).
  flag_definers = {"experiments.benchmark.long_inputs": long_inputs.define_flags,
                   "experiments.projects.retrieval.study": retrieval_study.define_flags,
                   "experiments.projects.retrieval.gpu_pretraining": gpu_pretraining.define_flags}
  for command in NOT_RUN:
    words = shlex.split(command)
    if len(words) > 3 and words[:2] == ["python", "-m"] and words[2] in flag_definers:
      fv = flags.FlagValues()
      flag_definers[words[2]](fv)
      fv([words[2]] + words[3:])
      continue
    if not command.startswith("python -m experiments.benchmark "):
      continue
    args = shlex.split(command)[3:]
    workloads = next((a.split("=", 1)[1].split("|") for a in args if a.startswith("--workload=")), [None])
    for workload in workloads:
      fv = flags.FlagValues()
      driver.define_flags(fv)
      fv(["benchmark"] + [f"--workload={workload}" if a.startswith("--workload=") else a for a in args])
  pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
  assert "[project]" in pyproject and "[project.scripts]" in pyproject


# ------------------------------------------------------------------------------------------------- the run
def _make_inputs(work):
  """What the README assumes the reader has: corpus text (+ held-out text), GLUE MRPC, a SQuAD file."""
  text = "\n".join((REPO_ROOT / name).read_text(encoding="utf-8") for name in ("docs/reference.md", "README.md"))
  documents = [d.strip() for d in re.split(r"\n\s*\n", text) if d.strip()]
  (work / "corpus").mkdir()
  (work / "heldout").mkdir()
  (work / "corpus.txt").write_text("\n".join(documents) + "\n", encoding="utf-8")
  cut = len(documents) * 9 // 10
  (work / "corpus" / "docs.txt").write_text("\n\n".join(documents[:cut]) + "\n", encoding="utf-8")
  (work / "heldout" / "docs.txt").write_text("\n\n".join(documents[cut:]) + "\n", encoding="utf-8")
  rng = random.Random(0)
  words = text.split()
  sentence = lambda: " ".join(rng.choice(words) for _ in range(rng.randint(5, 15))).replace("\t", " ")
  mrpc = work / "glue_data" / "MRPC"
  mrpc.mkdir(parents=True)
  header = "#1 ID\t#2 ID\t#1 String\t#2 String"
  for split, rows in (("train", 16), ("dev", 8)):
    lines = [f"Quality\t{header}"] + [f"{i % 2}\t{i}\t{i + 50}\t{sentence()}\t{sentence()}" for i in range(rows)]
    (mrpc / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
  lines = [f"index\t{header}"] + [f"{i}\t{i}\t{i + 50}\t{sentence()}\t{sentence()}" for i in range(6)]
  (mrpc / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
  context = "ALBERT shares its parameters across layers and factorizes the embedding."
  qas = [{"id": "q1", "question": "What does ALBERT share?", "answers": [{"text": "its parameters",
                                                                          "answer_start": 13}]},
         {"id": "q2", "question": "What is factorized?", "answers": [{"text": "the embedding", "answer_start": 59}]}]
  (work / "squad").mkdir()
  (work / "squad" / "dev-v1.1.json").write_text(json.dumps(
      {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]}))
  predictions = {"q1": "its parameters", "q2": "factorizes the embedding"}  # EM 1 and 0, F1 1 and 2/3
  (work / "squad" / "predictions.json").write_text(json.dumps(predictions))
  (work / "words.txt").write_text("zebrafish\nalbertology\n", encoding="utf-8")
  (work / "data").mkdir()
  for split, rows in (("train", 24), ("dev", 8), ("new", 5)):
    lines = ["ticket_id,body,queue"] + [f"t{i},{sentence().replace(',', ' ')},{('billing', 'network')[i % 2]}"
                                        for i in range(rows)]
    (work / "data" / f"{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
  for split, rows in (("sts_train", 24), ("sts_dev", 8)):
    lines = ["sentence1,sentence2,score"] + [f"{sentence().replace(',', ' ')},{sentence().replace(',', ' ')},"
                                             f"{(i * 7) % 6}.0" for i in range(rows)]
    (work / "data" / f"{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
  for split, rows in (("pairs_train", 24), ("pairs_dev", 8)):
    lines = ["anchor,positive"] + [f"{sentence().replace(',', ' ')},{sentence().replace(',', ' ')}"
                                   for _ in range(rows)]
    (work / "data" / f"{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
  for split, rows in (("groups_train", 12), ("groups_dev", 4)):
    groups = [{"query": sentence(), "positive": sentence(), "negatives": [sentence() for _ in range(3)]}
              for _ in range(rows)]
    (work / "data" / f"{split}.jsonl").write_text("".join(json.dumps(g) + "\n" for g in groups), encoding="utf-8")
  for split, rows in (("quiz_train", 12), ("quiz_dev", 4)):  # (each choice's last word differs: the end is kept)
    quiz = [{"context": sentence(), "question": sentence().replace("_", " "),  # (a "_" is a blank the choice fills)
             "choices": [f"{sentence()} {word}" for word in ("apple", "river", "stone", "cloud")[:2 + i % 3]],
             "label": i % 2} for i in range(rows)]
    (work / "data" / f"{split}.jsonl").write_text("".join(json.dumps(q) + "\n" for q in quiz), encoding="utf-8")
  (work / "topic").mkdir()
  for split, rows in (("train", 24), ("dev", 8)):
    lines = ["text,label"] + [f"{sentence().replace(',', ' ')},{('code', 'prose')[i % 2]}" for i in range(rows)]
    (work / "topic" / f"{split}.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
  scifact = work / "scifact"  # docs/retrieval.md: a BEIR-format folder (distractors: documents no query judges)
  (scifact / "qrels").mkdir(parents=True)
  (scifact / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "t", "text": sentence()}) + "\n"
                                                for i in range(12)), encoding="utf-8")
  (scifact / "queries.jsonl").write_text("".join(json.dumps({"_id": f"q{i}", "text": sentence()}) + "\n"
                                                 for i in range(4)), encoding="utf-8")
  for split in ("test", "dev", "train"):
    (scifact / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\td{i}\t1\n" for i in range(4)), encoding="utf-8")
  for name, body in TINY_CONFIGS.items():
    (work / name).write_text(body, encoding="utf-8")


@pytest.mark.large
@pytest.mark.slow
def test_the_documented_recipe_runs_at_tiny_scale(tmp_path):
  work = tmp_path / "work"
  work.mkdir()
  _make_inputs(work)
  env = docs_shell_env(tmp_path)
  # The 30 Python processes below share the project's compiled bytecode (with PYTHONDONTWRITEBYTECODE=1, as this
  # project's sandboxes set it, each would compile the repository's modules it imports again).
  env.pop("PYTHONDONTWRITEBYTECODE", None)
  outputs = {}
  with warm_python.serving(env) as env:  # (each `python -m` forked from one TensorFlow import)
    for documented, fills in RUNS:
      for fill in fills:
        command = _substituted(documented, fill)
        proc = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, f"{documented}\nran as: {command}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        outputs[command] = proc
  # Stage 2 wrote a manifest beside every shard; stage 3's glob out/train-* matched them and left them out.
  assert sorted(p.name for p in (work / "out").glob("train-*")) == [
      "train-00000-of-00002", "train-00000-of-00002.manifest.json", "train-00001-of-00002",
      "train-00001-of-00002.manifest.json"]
  pretrain = json.loads((work / "runs" / "pretrain" / "eval_results.json").read_text())
  assert pretrain["global_step"] == 4 and 0.0 <= pretrain["masked_lm_accuracy"] <= 1.0
  assert (work / "albert_base_v2_native" / "spiece.model").exists()
  submission = (work / "runs" / "mrpc" / "predictions" / "MRPC.tsv").read_text().splitlines()
  assert submission[0] == "index\tprediction" and [r.split("\t")[0] for r in submission[1:]] == [str(i) for i in
                                                                                                  range(6)]
  assert (work / "export" / "mrpc" / "saved_model.pb").exists()
  assert (work / "export" / "mrpc_litert" / "model.tflite").exists()
  fill_mask = next(p.stdout for c, p in outputs.items() if "fill_mask" in c)
  assert len([line for line in fill_mask.splitlines() if line.startswith("{")]) == 5
  assert (work / "tokens" / "tokens-000000").exists() and (work / "runs" / "extended" / "spiece.model").exists()
  tickets = (work / "runs" / "tickets" / "predictions" / "new.predictions.csv").read_text().splitlines()
  assert len(tickets) == 6 and tickets[1].startswith("t0,"), tickets[:2]
  assert (work / "serve" / "tickets" / "saved_model.pb").exists()
  sts = json.loads((work / "runs" / "sts" / "eval_results.json").read_text())
  assert sts["global_step"] == 4 and "pearson" in json.dumps(sts).lower(), sts
  assert (work / "serve" / "sts_embed" / "saved_model.pb").exists()
  assert (work / "runs" / "embedder_st" / "modules.json").exists()
  reranker = json.loads((work / "runs" / "reranker" / "eval_results.json").read_text())
  assert reranker["global_step"] == 4 and reranker["queries"] == 4 and "ndcg@10" in reranker, reranker
  assert (work / "export" / "topic_p2" / "saved_model.pb").exists()
  assert (work / "export" / "topic_ov_d6" / "openvino_model.xml").exists()
  bench = json.loads((work / "bench_exit" / "results.json").read_text())["workloads"]["early_exit"]
  assert {r["name"] for r in bench["rows"]} >= {"tf_full_b1", "tf_patience_1_b8", "openvino_patience_1_b8"}
  squad = json.loads(next(p.stdout for c, p in outputs.items() if "squad_evaluate" in c).strip().splitlines()[-1])
  assert squad["exact_match"] == pytest.approx(50.0) and squad["f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
