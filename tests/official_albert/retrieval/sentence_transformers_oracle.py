"""The oracle of tests/official_albert/retrieval: sentence-transformers' own losses and retrieval evaluator.

Run in its own process with torch only (USE_TF=0): `python sentence_transformers_oracle.py IN.npz OUT.npz`. Reads
the embeddings and labels the test drew, writes every loss, its gradients with respect to each input, and the
InformationRetrievalEvaluator's metrics.
"""

import json
import sys

import numpy as np
from sentence_transformers import util
from sentence_transformers.sentence_transformer import losses
from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
from sentence_transformers.sentence_transformer.losses.matryoshka import shrink
import torch


def _value_and_grads(fn, *arrays):
  tensors = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
  value = fn(*tensors)
  value.backward()
  return [value.detach().numpy()] + [t.grad.numpy() for t in tensors]


class _Embedded(InformationRetrievalEvaluator):
  """The evaluator with the test's vectors in place of a model's (the text of each query / document is its id)."""

  def __init__(self, vectors, **kwargs):
    super().__init__(**kwargs)
    self.vectors = vectors

  def embed_inputs(self, model, sentences, encode_fn_name=None, prompt_name=None, prompt=None, **kwargs):
    return torch.tensor(np.stack([self.vectors[s] for s in sentences]))


def main(inputs_path, outputs_path):
  data = dict(np.load(inputs_path))
  a, p, n, labels = data["anchors"], data["positives"], data["negatives"], data["labels"]
  scale = float(data["scale"])
  mnrl = losses.MultipleNegativesRankingLoss(None, scale=scale)
  symmetric = losses.MultipleNegativesRankingLoss(None, scale=scale, directions=("query_to_doc", "doc_to_query"),
                                                  partition_mode="per_direction")
  cosent = losses.CoSENTLoss(None, scale=scale)
  cosine = losses.CosineSimilarityLoss(None)
  dims, weights = [int(d) for d in data["dims"]], [float(w) for w in data["weights"]]
  label_tensor = torch.tensor(labels, dtype=torch.float64)
  out = {}
  cases = {
      "mnrl": (lambda x, y: mnrl.compute_loss_from_embeddings([x, y], None), (a, p)),
      "mnrl_negatives": (lambda x, y, z: mnrl.compute_loss_from_embeddings([x, y, z], None), (a, p, n)),
      "symmetric": (lambda x, y: symmetric.compute_loss_from_embeddings([x, y], None), (a, p)),
      "symmetric_negatives": (lambda x, y, z: symmetric.compute_loss_from_embeddings([x, y, z], None), (a, p, n)),
      "cosent": (lambda x, y: cosent.compute_loss_from_embeddings([x, y], label_tensor), (a, p)),
      "cosine": (lambda x, y: cosine.compute_loss_from_embeddings([x, y], label_tensor), (a, p)),
      # MatryoshkaLoss runs the inner loss on the model's output shrunk to each width (`shrink`), weighted.
      "matryoshka_mnrl": (lambda x, y: sum(w * mnrl.compute_loss_from_embeddings([shrink(x, d), shrink(y, d)], None)
                                           for d, w in zip(dims, weights)), (a, p)),
  }
  for name, (fn, arrays) in cases.items():
    for i, value in enumerate(_value_and_grads(fn, *arrays)):
      out[f"{name}_{i}"] = value
  # The main retrieval case ("ir"), then the edge cases the test names in "ir_cases" ("ir_NAME", with its vectors).
  for suffix in ["", *(f"_{name}" for name in json.loads(str(data.get("ir_cases", "[]"))))]:
    out[f"ir{suffix}"] = _ir_metrics(json.loads(str(data[f"ir{suffix}"])), data[f"query_vectors{suffix}"],
                                     data[f"corpus_vectors{suffix}"])
  # util.semantic_search over the main case's vectors: each query's best documents, at a cut and past the corpus.
  for top_k in (10, 200):
    hits = util.semantic_search(torch.tensor(data["query_vectors"]), torch.tensor(data["corpus_vectors"]),
                                top_k=top_k)
    out[f"search_{top_k}"] = np.array(json.dumps(hits))
  np.savez(outputs_path, **out)


def _ir_metrics(ir, query_vectors, corpus_vectors):
  """The InformationRetrievalEvaluator's metrics (its default cut-offs) as JSON {"recall@10": ...}."""
  vectors = {**{q: np.asarray(v, np.float32) for q, v in zip(ir["query_ids"], query_vectors)},
             **{c: np.asarray(v, np.float32) for c, v in zip(ir["corpus_ids"], corpus_vectors)}}
  evaluator = _Embedded(vectors, queries={q: q for q in ir["query_ids"]}, corpus={c: c for c in ir["corpus_ids"]},
                        relevant_docs={q: set(v) for q, v in ir["relevant"].items()},
                        score_functions={"cosine": util.cos_sim}, write_csv=False)
  metrics = evaluator.compute_all_metrics(None)["cosine"]
  return np.array(json.dumps({f"{name.split('@')[0]}@{k}": float(v) for name, values in metrics.items()
                              for k, v in values.items()}))


if __name__ == "__main__":
  main(sys.argv[1], sys.argv[2])
