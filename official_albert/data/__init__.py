"""tf.data input pipelines: record readers, dynamic padding and length bucketing, the pretraining reader."""
