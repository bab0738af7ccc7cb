"""Keras layers of ALBERT: embeddings, attention and FFN sub-blocks, and output heads."""

from official_albert.modeling.layers.activations import gelu_new, get_activation
from official_albert.modeling.layers.attention import AlbertAttention, attention_bias_from_mask
from official_albert.modeling.layers.embeddings import AlbertEmbeddings, layer_norm
from official_albert.modeling.layers.feedforward import AlbertFeedForward
from official_albert.modeling.layers.heads import MaskedLMHead, SquadV2Head, TransposedLogits, gather_positions
