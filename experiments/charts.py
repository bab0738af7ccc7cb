"""Writing the experiments' charts: one PNG per figure, laid out, written atomically, the figure closed after."""

from official_albert import file_io


def save_png(fig, path: str, dpi: int) -> str:
  """Lays `fig` out (`tight_layout`), writes it to `path` as a PNG through a temporary file (a reader never sees
  half a chart) and closes it (pyplot keeps every open figure alive); returns `path`. The caller has chosen the
  matplotlib backend."""
  from matplotlib import pyplot as plt  # noqa: PLC0415 (after matplotlib.use)

  fig.tight_layout()
  with file_io.atomic_path(path) as tmp:
    fig.savefig(tmp, dpi=dpi, format="png")
  plt.close(fig)
  return path
