"""The names shared by conversion, export and the pipelines: checkpoint formats, model types, SentencePiece files.

Kept free of TensorFlow so that the binaries can list them in their flags before TensorFlow starts.
"""

import numpy as np

from official_albert import model_directory

# Directory formats read and written by `official_albert.convert_checkpoint` (see model_directory.detect_format).
FORMATS = ("tf1", "hf", "native", "keras_hub")
# Formats only read: "hf_tf", an HF directory's `tf_model.h5` (transformers' TFAlbert* classes; an "hf" directory
# with no model.safetensors / pytorch_model.bin is read from its tf_model.h5 too).
INPUT_FORMATS = FORMATS + ("hf_tf",)
# One of our models per name (loading.build_model): the heads of conversion (--model_type) and export (--head).
MODEL_TYPES = ("pretrainer", "encoder", "classifier", "token_classifier", "span", "squad_v2", "multiple_choice")
# SentencePiece model file names looked for beside a checkpoint (ours, then the original release's).
SPM_NAMES = model_directory.SPM_FILES


def widen_bfloat16(bits: np.ndarray) -> np.ndarray:
  """float32 values of bfloat16 data held as 16-bit integers (files numpy has no dtype for: safetensors' BF16, Keras'
  opaque bfloat16 datasets), exactly: a bfloat16's 16 bits are the high half of a float32."""
  return (np.asarray(bits).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
