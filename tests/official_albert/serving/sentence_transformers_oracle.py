"""Builds a sentence-transformers ALBERT model with random weights, saves it and encodes texts (the test oracle).

Run in its own process with USE_TF=0 (sentence-transformers imports transformers' Trainer, which reaches for
transformers' TensorFlow code when TensorFlow is installed and tf-keras is not):

  USE_TF=0 python tests/official_albert/serving/sentence_transformers_oracle.py --output_dir=D --texts_file=T \
      --spm_model_file=M [--pooling=cls,max] [--normalize] [--max_seq_length=N] [--seed=S] \
      [--prompts='{"query": "query: "}' --default_prompt_name=query]

Writes the model folder to D/model and `SentenceTransformer(D/model).encode(texts)` to D/expected.npy (the model is
reloaded from the folder first, so the vectors are those of the saved files; tokenized as the original ALBERT, see
below; with `--prompts`, the folder's config_sentence_transformers.json holds them and `encode` prepends the default
prompt).

  USE_TF=0 python tests/official_albert/serving/sentence_transformers_oracle.py --jobs_file=J

runs several such jobs in one process (J: a JSON list of {flag name: value}, one dict a command line's flags):
importing torch, transformers and sentence-transformers is ~15 s of CPU, each job's model a second or two.
"""

import argparse
import json
import os

import numpy as np


def _parser():
  parser = argparse.ArgumentParser()
  parser.add_argument("--output_dir")
  parser.add_argument("--texts_file")
  parser.add_argument("--spm_model_file")
  parser.add_argument("--pooling", default="mean")
  parser.add_argument("--normalize", action="store_true")
  parser.add_argument("--max_seq_length", type=int, default=None)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--prompts", default=None, help="JSON {name: prompt text}")
  parser.add_argument("--default_prompt_name", default=None)
  parser.add_argument("--jobs_file", default=None, help="JSON list of jobs, each {flag name: value}")
  return parser


def main():
  parser = _parser()
  args = parser.parse_args()
  if args.jobs_file:
    with open(args.jobs_file, encoding="utf-8") as f:
      jobs = [argparse.Namespace(**{**vars(parser.parse_args([])), **job}) for job in json.load(f)]
  else:
    jobs = [args]
  for job in jobs:
    if not (job.output_dir and job.texts_file and job.spm_model_file):
      parser.error("--output_dir, --texts_file and --spm_model_file are required (or --jobs_file)")
    _run(job)


def _run(args):
  """One job: the model folder under args.output_dir and its expected.npy."""
  import sentence_transformers  # pylint: disable=g-import-not-at-top
  from sentence_transformers import models  # pylint: disable=g-import-not-at-top
  from sentence_transformers import SentenceTransformer  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top
  torch.manual_seed(args.seed)
  config = transformers.AlbertConfig(vocab_size=1000, embedding_size=16, hidden_size=32, num_hidden_layers=3,
                                     num_attention_heads=2, intermediate_size=48, hidden_act="gelu_new",
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  model = transformers.AlbertModel(config).eval()
  with torch.no_grad():
    for name, param in model.named_parameters():
      if "LayerNorm" in name or name.endswith("bias"):
        param.add_(0.1 * torch.randn_like(param))
  base = os.path.join(args.output_dir, "base")
  model.save_pretrained(base)
  transformers.AlbertTokenizer(args.spm_model_file).save_pretrained(base)
  modules = [models.Transformer(base, max_seq_length=args.max_seq_length)]
  pooling = args.pooling.split(",")
  modules.append(models.Pooling(config.hidden_size, pooling_mode=pooling[0] if len(pooling) == 1 else pooling))
  if args.normalize:
    modules.append(models.Normalize())
  folder = os.path.join(args.output_dir, "model")
  prompts = json.loads(args.prompts) if args.prompts else None
  SentenceTransformer(modules=modules, device="cpu", prompts=prompts,
                      default_prompt_name=args.default_prompt_name).save(folder)
  with open(args.texts_file, encoding="utf-8") as f:
    texts = json.load(f)
  # Tokenized as the original ALBERT (and HF's slow AlbertTokenizer built from spiece.model, and FullTokenizer):
  # the tokenizer files transformers saves register SentencePiece's user-defined symbols ( ( ) " - . – £ € ) as
  # added tokens, and the tokenizers loaded from them split the text at those first (docs/embeddings.md).
  reloaded = SentenceTransformer(folder, device="cpu")
  reloaded[0].processor = transformers.AlbertTokenizer(args.spm_model_file,
                                                       model_max_length=reloaded[0].tokenizer.model_max_length)
  np.save(os.path.join(args.output_dir, "expected.npy"), reloaded.encode(texts, batch_size=8, convert_to_numpy=True))
  print(f"sentence-transformers {sentence_transformers.__version__}: {folder}")


if __name__ == "__main__":
  main()
