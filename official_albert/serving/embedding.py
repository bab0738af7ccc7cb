"""Sentence embeddings: `embed(model_dir, texts)` returns one vector per text.

  from official_albert import pipelines
  vectors = pipelines.embed("paraphrase-albert-small-v2", ["A man is eating food.", "A man eats."])  # [2, 768]

The directory may be a sentence-transformers ALBERT folder (its `modules.json` says how to pool and normalise, its
tokenizer files how to tokenize and cut), or any native, HF, KerasHub or original-release directory (then mean
pooling over the encoder's tokens unless `pooling` says otherwise), or an encoder export folder
(`export_saved_model --head=encoder`: a SavedModel, whose `embed` signature tokenizes in its graph, or an OpenVINO or
LiteRT folder, whose IR takes the ids of its spiece.model), which computes the embedding with the pooling it was
exported with. The vectors are those `SentenceTransformer.encode`
gives for the same folder (cosine >= 0.9999, tests/official_albert/serving/test_embedding.py), its prompts included:
a folder whose config_sentence_transformers.json names a `default_prompt_name` gets that prompt prepended to every
text (`prompt_name=` / `prompt=` choose another, as in `encode`), and so do its exports.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from official_albert import model_directory as md
from official_albert.checkpoints.loading import load_model
from official_albert.checkpoints.sentence_transformers_folder import model_tokenizer_options
from official_albert.checkpoints.sentence_transformers_folder import resolve_embedding_settings
from official_albert.checkpoints.sentence_transformers_folder import resolve_prompt
from official_albert.modeling.embedder import AlbertEmbedder
from official_albert.retrieval.matryoshka import check_dim
from official_albert.retrieval.matryoshka import truncate
from official_albert.retrieval.search import semantic_search
from official_albert.serving.export_folder import SERVING_CONFIG
from official_albert.serving.graph_call import graph_call
from official_albert.serving.pipeline_inputs import check_seq_length
from official_albert.serving.pipeline_inputs import pads_to_cap
from official_albert.serving.pipelines import as_list
from official_albert.serving.pipelines import check_vocab
from official_albert.serving.pipelines import is_export_folder
from official_albert.serving.pipelines import is_saved_model
from official_albert.serving.pipelines import LoadedSavedModel
from official_albert.serving.pipelines import packed_batches
from official_albert.serving.pipelines import resolve_model
from official_albert.serving.rerank import loaded_reranker
from official_albert.serving.saved_model_runtime import saved_model_embed_text
from official_albert.tokenization import FullTokenizer


def load_embedder(model_dir: str, pooling=None, normalize: Optional[bool] = None, seq_length: Optional[int] = None,
                  do_lower_case: Optional[bool] = None, mode: str = "hf"):
  """(AlbertEmbedder, FullTokenizer, EmbeddingSettings) of a directory (see `embed`)."""
  settings = resolve_embedding_settings(model_dir, pooling, normalize, seq_length)
  weights_dir = md.path(model_dir, settings.transformer_path) if settings.transformer_path else model_dir
  # (a GLUE / SQuAD / RACE run records its casing only in params.yaml: model_tokenizer_options reads it there too)
  options = model_tokenizer_options(weights_dir, do_lower_case)
  spm_model = md.find_spm_model(weights_dir) or md.require_spm_model(model_dir, "embed")
  tokenizer = FullTokenizer(spm_model, mode=mode, **options)
  encoder, _ = load_model(weights_dir, "encoder")
  return AlbertEmbedder(pooling=settings.pooling, normalize=settings.normalize, encoder=encoder), tokenizer, settings


def embed(model_or_dir, texts: Union[str, Sequence[str]], pooling=None, normalize: Optional[bool] = None,
          seq_length: Optional[int] = None, tokenizer: Optional[FullTokenizer] = None,
          do_lower_case: Optional[bool] = None, mode: str = "hf", batch_size: int = 32, dim: Optional[int] = None,
          force: bool = False, prompt_name: Optional[str] = None, prompt: Optional[str] = None) -> np.ndarray:
  """One embedding per text.

  Args:
    model_or_dir: a model directory or export folder (see the module docstring), a `pipelines.LoadedSavedModel` of
      an encoder SavedModel (answers without reloading; its graph tokenizes, so `tokenizer` is not used), or an
      `AlbertEmbedder` / `AlbertEncoder` / model with `.encoder` (then pass `tokenizer`).
    texts: one text or a list.
    pooling: a `POOLING_MODES` name or list (concatenated in order); default: the directory's, else "mean".
    normalize: L2-normalise each vector; default: the directory's (a Normalize module), else False.
    seq_length: tokens per text, [CLS]/[SEP] included; default: the directory's max_seq_length, else the model's
      max_position_embeddings. Longer texts are cut, as sentence-transformers cuts them; a seq_length above
      max_position_embeddings is cut there, with a warning.
    tokenizer: a `FullTokenizer` (default: the directory's SentencePiece model with its tokenizer_config.json
      settings); do_lower_case overrides that setting.
    batch_size: texts per forward pass (each batch is padded to its longest text; padding does not change a vector).
    dim: keep the first `dim` dimensions and re-normalise them (a Matryoshka prefix). A model directory must have
      been trained at that width (`task.matryoshka_dims` of `text_embedding`, recorded in embedding_training.json):
      another prefix of a vector trained whole is not a good vector of its own, so it is refused unless `force`.
    force: allow a `dim` the directory records no training for.
    prompt_name, prompt: the text prepended to each text, as `SentenceTransformer.encode` takes them: `prompt`
      itself, else the prompt of that name in the folder's config_sentence_transformers.json (an unknown name is an
      error listing the folder's prompts), else the folder's default prompt (`default_prompt_name`), else none. An
      OpenVINO / LiteRT export prepends the prompts it recorded; an encoder SavedModel prepends the default prompt in
      its graph and takes neither argument. A model object has no prompts: only `prompt` applies.
    An encoder export folder (SavedModel, OpenVINO, LiteRT) takes `dim` too (its vectors cut the same way, checked
    against the widths the export copied from its model directory; an export made with `--dim=K` gives K-wide
    vectors).

  Returns:
    float32 [len(texts), D] for a list (D = hidden_size × the number of pooling modes), [D] for one string.
  """
  check_seq_length(seq_length)
  if is_saved_model(model_or_dir):
    if prompt_name is not None or prompt is not None:
      raise ValueError(f"embed: {getattr(model_or_dir, 'folder', model_or_dir)} is an encoder SavedModel: its embed "
                       "signature prepends the prompt fixed at export (the model directory's default prompt) in its "
                       "graph; choose a prompt on the model directory or on an OpenVINO / LiteRT export.")
    result = _embed_with_saved_model(model_or_dir, texts, pooling, normalize, seq_length, batch_size)
    if dim is not None:  # (the folder's embedding_training.json, written at export, names the trained widths)
      result = truncate(result, check_dim(os.fspath(getattr(model_or_dir, "folder", model_or_dir)), dim,
                                          int(result.shape[-1]), force))
    return result
  if is_export_folder(model_or_dir):
    result = _embed_with_export(model_or_dir, texts, pooling, normalize, seq_length, tokenizer, batch_size,
                                prompt_name, prompt)
    if dim is not None:  # (the folder's embedding_training.json, copied at export, names the trained widths)
      result = truncate(result, check_dim(os.fspath(model_or_dir), dim, int(result.shape[-1]), force))
    return result
  if isinstance(model_or_dir, (str, os.PathLike)):
    model, tokenizer_of_dir, settings = load_embedder(os.fspath(model_or_dir), pooling, normalize, seq_length,
                                                      do_lower_case, mode)
    tokenizer = tokenizer or tokenizer_of_dir
    seq_length = settings.max_seq_length
    texts = with_prompt(texts, settings.prompt(prompt_name, prompt))
  else:
    if tokenizer is None:
      raise ValueError("embed: pass `tokenizer` (a FullTokenizer) together with a model object.")
    texts = with_prompt(texts, resolve_prompt((), None, prompt_name, prompt, "embed (a model object has no prompts)"))
    model = model_or_dir
    if not isinstance(model, AlbertEmbedder) or pooling is not None or normalize is not None:
      model = embedder_of(model, pooling, normalize)
  check_vocab(model, tokenizer)
  vectors = []
  call = graph_call(model)
  for _, inputs in packed_batches(tokenizer, as_list(texts), None, batch_size, seq_length,
                                   model.config.max_position_embeddings, pads_to_cap(model)):
    vectors.append(np.asarray(call(inputs)["sentence_embedding"], np.float32))
  width = model.config.hidden_size * len(model.pooling_modes)
  result = np.concatenate(vectors, axis=0) if vectors else np.zeros((0, width), np.float32)
  if dim is not None:
    directory = os.fspath(model_or_dir) if isinstance(model_or_dir, (str, os.PathLike)) else None
    result = truncate(result, check_dim(directory, dim, width, force))
  return result[0] if isinstance(texts, (str, bytes)) else result


# The attribute of an encoder that holds the embedders `embedder_of` built around it.
_EMBEDDERS_ATTR = "_official_albert_embedders"
_embedders_lock = threading.Lock()


class _Embedders:
  """The `AlbertEmbedder`s built around one encoder, by (pooling modes, normalize). A plain object on purpose: Keras'
  tracking and saving walk an encoder's layers, lists and dicts, not this, so the encoder saves as before."""

  def __init__(self):
    self.by_options = {}


def search(model_dir, queries: Sequence[str], corpus: Sequence[str], top_k: int = 10, dim: Optional[int] = None,
           force: bool = False, batch_size: int = 32, seq_length: Optional[int] = None,
           query_prompt_name: Optional[str] = None, corpus_prompt_name: Optional[str] = None,
           rerank_model_dir=None, rerank_depth: int = 100):
  """Each query's `top_k` best documents of `corpus` by the cosine of `embed`'s vectors: per query,
  `[{"corpus_id": j, "score": cosine}]` best first (equal scores in corpus order), what sentence-transformers'
  `util.semantic_search` gives over `encode`'s vectors (`official_albert.retrieval.search.semantic_search`).

  `dim`, `force`, `batch_size`, `seq_length` as `embed`'s; the prompts are the folder's, by name, for each side (a
  model with query and document prompts), both sides embedded by `embed_queries_and_corpus`. A corpus searched
  again and again is better embedded once and searched with `semantic_search`.

  With `rerank_model_dir` (a reranker: `pipelines.rerank`'s model), retrieve and rerank: each query's best
  `rerank_depth` documents by cosine are ordered by the reranker, loaded once, and the first `top_k` returned as
  `[{"corpus_id": j, "score": the reranker's score, "cosine": the first stage's}]` (the reranker's order; equal
  logits in the cosine order), what `pipelines.rerank(rerank_model_dir, query, those documents, top_k)` gives with
  its indices taken back to the corpus.

  Raises:
    ValueError: `rerank_depth` is below `top_k` (the reranker would see fewer documents than asked for).
  """
  if rerank_model_dir is not None and (isinstance(rerank_depth, bool)
                                       or not isinstance(rerank_depth, (int, np.integer))
                                       or (isinstance(top_k, (int, np.integer)) and rerank_depth < top_k)
                                       or rerank_depth < 1):
    raise ValueError(f"search: rerank_depth={rerank_depth!r} must be a whole number >= top_k={top_k}: the reranker "
                     f"orders the first stage's best rerank_depth documents, of which top_k are returned.")
  queries, corpus = _text_lists(queries, corpus)
  query_vectors, corpus_vectors = embed_queries_and_corpus(
      model_dir, queries, corpus, query_prompt_name, corpus_prompt_name, dim=dim, force=force, batch_size=batch_size,
      seq_length=seq_length)
  if rerank_model_dir is None:
    return semantic_search(query_vectors, corpus_vectors, top_k)
  order_of = loaded_reranker(rerank_model_dir, batch_size)
  results = []
  for query, hits in zip(queries, semantic_search(query_vectors, corpus_vectors, rerank_depth)):
    order = order_of(query, [corpus[hit["corpus_id"]] for hit in hits], top_k)
    results.append([{"corpus_id": hits[o["index"]]["corpus_id"], "score": o["score"],
                     "cosine": hits[o["index"]]["score"]} for o in order])
  return results


def embed_queries_and_corpus(model_dir, queries: Union[str, Sequence[str]], corpus: Union[str, Sequence[str]],
                             query_prompt_name: Optional[str] = None, corpus_prompt_name: Optional[str] = None,
                             **options):
  """`(embed(model_dir, queries, ...), embed(model_dir, corpus, ...))` for a retrieval: each side with its prompt,
  `options` as `embed`'s. Both sides go through one `embed` call where their prompts agree (the model loaded once),
  and the texts are batched longest first, so that a batch pads little (a corpus mixes titles with passages); the
  rows come back in the order given. (A string is one text.)

  Raises:
    ValueError: a query or document is not a string (named by its side and index).
  """
  queries, corpus = _text_lists(queries, corpus)
  if query_prompt_name == corpus_prompt_name:
    both = _embed_longest_first(model_dir, queries + corpus, prompt_name=query_prompt_name, **options)
    return both[:len(queries)], both[len(queries):]
  return (_embed_longest_first(model_dir, queries, prompt_name=query_prompt_name, **options),
          _embed_longest_first(model_dir, corpus, prompt_name=corpus_prompt_name, **options))


def _text_lists(queries, corpus):
  """`(queries, corpus)` as lists of strings (a string is one text), or a ValueError naming the side and index of a
  text that is not a string."""
  queries, corpus = ([texts] if isinstance(texts, str) else list(texts) for texts in (queries, corpus))
  for side, texts in (("queries", queries), ("corpus", corpus)):
    bad = next((i for i, text in enumerate(texts) if not isinstance(text, str)), None)
    if bad is not None:
      raise ValueError(f"{side}[{bad}] is a {type(texts[bad]).__name__}, not a string.")
  return queries, corpus


def _embed_longest_first(model_dir, texts: Sequence[str], **options) -> np.ndarray:
  order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # (stable: equal lengths keep their order)
  vectors = embed(model_dir, [texts[i] for i in order], **options)
  result = np.empty_like(vectors)
  result[order] = vectors
  return result


def embedder_of(model, pooling=None, normalize: Optional[bool] = None) -> AlbertEmbedder:
  """The `AlbertEmbedder` that `embed` runs for a model object: `model`'s encoder (an `AlbertEncoder`, a model with
  `.encoder`, an `AlbertEmbedder`'s) pooled by `pooling` / `normalize` (default: the model's own, else mean and no
  normalisation), the same object for every call with the same options.

  Why the same object: `graph_call` keeps one graph per model object, so a new wrapper per call traced a new graph
  per call (a loop over a corpus in chunks paid a trace, seconds on a real model, per chunk). The wrappers are kept
  on the encoder itself rather than in a module-level map keyed weakly on it: a wrapper holds its encoder, so as a
  map's value it would keep its own key alive forever; on the encoder they form a cycle that is freed with it.
  """
  encoder = getattr(model, "encoder", model)
  modes = pooling or getattr(model, "pooling_modes", "mean")
  norm = bool(normalize if normalize is not None else getattr(model, "normalize", False))
  key = ((modes,) if isinstance(modes, str) else tuple(modes), norm)
  with _embedders_lock:
    holder = getattr(encoder, "__dict__", {}).get(_EMBEDDERS_ATTR)
    if holder is None:
      holder = _Embedders()
      try:  # (object.__setattr__: not through Keras' attribute tracking)
        object.__setattr__(encoder, _EMBEDDERS_ATTR, holder)
      except (AttributeError, TypeError):  # an object that takes no attributes: a wrapper per call, as before
        pass
    if key not in holder.by_options:
      holder.by_options[key] = AlbertEmbedder(pooling=modes, normalize=norm, encoder=encoder)
    return holder.by_options[key]


def default_prompt(model_or_dir) -> str:
  """The prompt `embed(model_or_dir, texts)` prepends to each text when given no `prompt_name` / `prompt` ('' for
  none): a model directory's default prompt, an OpenVINO / LiteRT export's recorded one, an encoder SavedModel's
  (its text signatures prepend it in the graph; `tokenization_info` records it). A model object has none. The server
  counts a text's tokens with it (OpenAI's `usage`: the tokens the model saw)."""
  if is_saved_model(model_or_dir):
    loaded = (model_or_dir.loaded if isinstance(model_or_dir, LoadedSavedModel)
              else tf.saved_model.load(os.fspath(model_or_dir)))
    return saved_model_embed_text(loaded.signatures)[0]
  if is_export_folder(model_or_dir):
    folder = os.fspath(getattr(model_or_dir, "export_dir", model_or_dir))
    settings = getattr(model_or_dir, "settings", None)
    if settings is None:  # (a folder's path: its serving_config.json, without loading the runtime)
      with open(os.path.join(folder, SERVING_CONFIG), encoding="utf-8") as f:
        settings = json.load(f)
    return _recorded_prompt(settings.get("embedding") or {}, None, None, f"embed ({folder})")
  if isinstance(model_or_dir, (str, os.PathLike)):
    return resolve_embedding_settings(os.fspath(model_or_dir)).prompt()
  return ""


def _recorded_prompt(record, prompt_name: Optional[str], prompt: Optional[str], where: str) -> str:
  """The prompt an export folder's `embedding` record gives (`resolve_prompt` over its prompts)."""
  return resolve_prompt(record.get("prompts"), record.get("default_prompt_name"), prompt_name, prompt, where)


def with_prompt(texts: Union[str, Sequence[str]], prompt: str):
  """`texts` with `prompt` prepended to each (as `SentenceTransformer.encode` does: plain concatenation)."""
  if not prompt:
    return texts
  if isinstance(texts, (str, bytes)):
    return prompt + (texts.decode("utf-8") if isinstance(texts, bytes) else texts)
  return [prompt + (t.decode("utf-8") if isinstance(t, bytes) else t) for t in texts]


def _embed_with_saved_model(saved_model, texts, pooling, normalize, seq_length, batch_size) -> np.ndarray:
  """`embed` answered by an encoder SavedModel's `embed` signature (its folder, or a `LoadedSavedModel` of it, which
  answers without reloading): text in, tokenized and cut in its graph, pooled as exported."""
  if isinstance(saved_model, LoadedSavedModel):
    folder, loaded = saved_model.folder, saved_model.loaded
  else:
    folder = os.fspath(saved_model)
    loaded = tf.saved_model.load(folder)
  signature = loaded.signatures.get("embed")
  if signature is None:
    ids_only = "from_ids" in loaded.signatures and "sentence_embedding" in (
        loaded.signatures["from_ids"].structured_outputs)
    raise ValueError(f"embed: {folder} " + (
        "is an encoder SavedModel without text signatures (exported from a directory without spiece.model: it takes "
        "token ids, `from_ids`); re-export it with --spm_model_file." if ids_only else
        "is not an encoder SavedModel (no `embed` signature); export it with --head=encoder."))
  if pooling is not None or normalize is not None or seq_length is not None:
    raise ValueError(f"embed: {folder} computes its sentence embedding with the pooling, normalisation and length it "
                     "was exported with (fixed at export); re-export with --pooling / --normalize_embeddings / "
                     "--seq_length to change them.")
  items = as_list(texts)
  batches = [items[begin:begin + batch_size] for begin in range(0, len(items), max(1, batch_size))]
  vectors = [signature(text=tf.constant(batch, tf.string))["sentence_embedding"].numpy().astype(np.float32)
             for batch in batches]
  if not vectors:
    return np.zeros((0, int(signature.structured_outputs["sentence_embedding"].shape[-1] or 0)), np.float32)
  result = np.concatenate(vectors, axis=0)
  return result[0] if isinstance(texts, (str, bytes)) else result


def _embed_with_export(export, texts, pooling, normalize, seq_length, tokenizer, batch_size, prompt_name=None,
                       prompt=None) -> np.ndarray:
  """`embed` answered by an encoder export folder whose graph has `sentence_embedding` (its pooling is fixed; the
  prompts it recorded prepended as on the model directory)."""
  model, tokenizer, _ = resolve_model(export, "encoder", tokenizer, True, "hf", "embed")
  model.require_outputs(("sentence_embedding",), "embed")
  record = model.settings.get("embedding") or {}
  if pooling is not None or normalize is not None:
    raise ValueError(f"embed: {model.export_dir} computes its sentence embedding with pooling={record.get('pooling')} "
                     f"normalize={record.get('normalize')} (fixed at export); re-export with --pooling / "
                     "--normalize_embeddings to change them.")
  length = seq_length or record.get("max_seq_length") or model.settings["seq_length"]
  texts = with_prompt(texts, _recorded_prompt(record, prompt_name, prompt, f"embed ({model.export_dir})"))
  vectors = [np.asarray(model(inputs)["sentence_embedding"], np.float32)
             for _, inputs in packed_batches(tokenizer, as_list(texts), None, batch_size, length,
                                              model.config.max_position_embeddings, pads_to_cap(model))]
  if not vectors:  # no texts: the export's width, as the graph would give it (a Matryoshka export cuts to `dim`)
    width = record.get("dim") or model.config.hidden_size * len(record.get("pooling") or ["mean"])
    return np.zeros((0, int(width)), np.float32)
  result = np.concatenate(vectors, axis=0)
  return result[0] if isinstance(texts, (str, bytes)) else result
