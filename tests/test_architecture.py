"""The project's layering, read from the source: one-way imports, thin binaries, no import-time side effects.

Dependencies point down: `experiments → tasks, data_prep → official_albert`. Nothing in `official_albert/` imports
`tasks`, `data_prep` or `experiments`, except the train binary's registry lookup (`official_albert/train.py` →
`experiments`); no library module imports a binary. These are checked on the parsed imports of every file, function-
level imports included, so a lazy import cannot slip an upward dependency past the test.
"""

import ast
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
TOP_PACKAGES = ("official_albert", "tasks", "data_prep", "experiments")
LIBRARY_BINARIES = ("official_albert.train", "official_albert.convert_checkpoint", "official_albert.export_saved_model",
                    "official_albert.fill_mask", "official_albert.serve")
# Every module a user runs with `python -m` (or through its console script).
BINARIES = LIBRARY_BINARIES + ("tasks.squad_evaluate", "tasks.retrieval_evaluate", "data_prep.corpus",
                               "data_prep.train_sentencepiece",
                               "data_prep.create_pretraining_data", "data_prep.create_finetuning_data",
                               "data_prep.beam_pipeline", "data_prep.tokenize_corpus",
                               "data_prep.inspect_pretraining_data", "data_prep.extend_vocabulary",
                               "data_prep.mine_hard_negatives", "experiments.demo", "experiments.benchmark.long_inputs")
# The research binaries (issue 45: listed nowhere before): the studies and the JAX / PyTorch hosts' halves.
RESEARCH_BINARIES = ("experiments.backend_check", "experiments.projects.long_inputs.study",
                     "experiments.projects.long_inputs.finetune_jax", "experiments.projects.long_inputs.pretrain_jax",
                     "experiments.projects.ablations.study", "experiments.projects.early_exit.study",
                     "experiments.projects.early_exit.pretrain_torch",
                     "experiments.projects.retrieval.study", "experiments.projects.retrieval.gpu_pretraining")
BINARIES += RESEARCH_BINARIES
# Packages run as `python -m <package>`: their `__main__` launches a driver module's define_flags + main.
PACKAGE_BINARIES = ("experiments.benchmark.__main__",)
# Sizes a reader takes in at once. Past READABLE_* a file or function says why at its top (`LONG_BECAUSE`); past
# MAX_MODULE_LINES no reason will do. A file counts all its lines; a function its code (its docstring is not counted).
MAX_MODULE_LINES = 500
READABLE_MODULE_LINES = 400
READABLE_FUNCTION_LINES = 60
# The marker: a line of the module docstring, or a comment right above a `def` (above its decorators), that starts
# with it and gives the reason in at least MIN_REASON_WORDS words, e.g.
#   # Long because: the reference's function, step for step, so that the two can be read side by side.
LONG_BECAUSE = "Long because:"
MIN_REASON_WORDS = 6


def _modules():
  """{dotted module name: path} of every source module of the four top-level packages."""
  out = {}
  for package in TOP_PACKAGES:
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
      parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
      if parts[-1] == "__init__":
        parts = parts[:-1]
      out[".".join(parts)] = path
  return out


def _imports(path: pathlib.Path, module: str):
  """Every module name `path` imports (absolute and relative, at any depth of the file)."""
  tree = ast.parse(path.read_text(encoding="utf-8"))
  package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
  names = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      names += [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        parent = package.split(".")
        parent = parent[:len(parent) - node.level + 1]
        base = ".".join(parent + ([base] if base else []))
      names.append(base)
      names += [f"{base}.{a.name}" for a in node.names]  # `from pkg import module`
  return names


def _top(name: str) -> str:
  return name.split(".", 1)[0]


def test_imports_point_one_way():
  modules = _modules()
  allowed = {"official_albert": {"official_albert"},
             "tasks": {"official_albert", "tasks"},
             "data_prep": {"official_albert", "tasks", "data_prep"},
             "experiments": set(TOP_PACKAGES)}
  violations = []
  for module, path in modules.items():
    for name in _imports(path, module):
      top = _top(name)
      if top not in TOP_PACKAGES or top in allowed[_top(module)]:
        continue
      if module == "official_albert.train" and top == "experiments":
        continue  # the documented exception: the train binary resolves --experiment names
      violations.append(f"{path.relative_to(REPO_ROOT)} imports {name}")
  assert not violations, "imports that point up the layers:\n  " + "\n  ".join(violations)


def test_the_documented_exception_is_real_and_unique():
  # If the train binary stopped using the registry, the exception above would be dead weight: keep them in step.
  names = _imports(REPO_ROOT / "official_albert" / "train.py", "official_albert.train")
  assert "experiments.registry" in names


def test_library_modules_do_not_import_binaries():
  modules = _modules()
  violations = []
  for module, path in modules.items():
    if not module.startswith("official_albert") or module in LIBRARY_BINARIES:
      continue
    for name in _imports(path, module):
      if any(name == b or name.startswith(b + ".") for b in LIBRARY_BINARIES):
        violations.append(f"{path.relative_to(REPO_ROOT)} imports the binary {name}")
  assert not violations, "\n".join(violations)


def test_binaries_follow_the_one_convention():
  """define_flags(fv) + main(argv, fv) + console_main(); the module body defines no flags; pyproject lists it."""
  pyproject = (REPO_ROOT / "pyproject.toml").read_text()
  for module in BINARIES + PACKAGE_BINARIES:
    path = _modules()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "console_main" in functions, f"{module}: no console_main()"
    if module not in PACKAGE_BINARIES:
      for name, params in (("define_flags", ["fv"]), ("main", ["argv", "fv"])):
        assert name in functions, f"{module}: no {name}()"
        assert [a.arg for a in functions[name].args.args] == params, f"{module}.{name} parameters"
    for node in tree.body:  # module-level statements: no flag definitions, no app.run outside __main__
      if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = ast.unparse(node.value.func)
        assert not call.startswith("flags."), f"{module} defines flags at import time: {call}"
    assert f'"{module}:console_main"' in pyproject, f"{module} has no console script in pyproject.toml"


_SIDE_EFFECTS = r"""
import csv, importlib, json, logging, os, sys
sys.path.insert(0, sys.argv[1])
from absl import flags
# Third-party packages set variables of their own on import (TensorFlow: TF2_BEHAVIOR, ...): they are imported first.
for name in ("numpy", "yaml", "sentencepiece", "absl.logging", "tensorflow", "keras"):
  importlib.import_module(name)
env, limit, level = dict(os.environ), csv.field_size_limit(), logging.getLogger().level
for name in json.loads(sys.argv[2]):
  importlib.import_module(name)
changed = {k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k)}
ours = ("official_albert", "tasks", "data_prep", "experiments")
flags_defined = sorted(f"{module}: {flag.name}" for module, defined in flags.FLAGS.flags_by_module_dict().items()
                       if module.split(".")[0] in ours for flag in defined)
print(json.dumps({"env": sorted(changed), "csv_limit_changed": csv.field_size_limit() != limit,
                  "root_level_changed": logging.getLogger().level != level, "new_flags": flags_defined}))
"""


@pytest.mark.slow
def test_importing_any_module_has_no_side_effects():
  names = [m for m in _modules() if m != "data_prep.beam_pipeline" and not m.endswith("__main__")]
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  result = subprocess.run([sys.executable, "-c", _SIDE_EFFECTS, str(REPO_ROOT), json.dumps(names)],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads(result.stdout.strip().splitlines()[-1])
  assert report == {"env": [], "csv_limit_changed": False, "root_level_changed": False, "new_flags": []}, report


def test_modules_stay_readable():
  too_long = {str(p.relative_to(REPO_ROOT)): n for p in _modules().values()
              if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
  assert not too_long, f"split these along their concepts (> {MAX_MODULE_LINES} lines): {too_long}"


def _reason(lines) -> str:
  """The reason of the first line of `lines` that carries the `LONG_BECAUSE` marker ('' if none)."""
  for line in lines:
    text = line.strip().lstrip("#").strip()
    if text.startswith(LONG_BECAUSE):
      return text[len(LONG_BECAUSE):].strip()
  return ""


def long_files():
  """{path: (lines, the reason in its module docstring)} of every source file over READABLE_MODULE_LINES."""
  out = {}
  for path in _modules().values():
    text = path.read_text(encoding="utf-8")
    if (n := len(text.splitlines())) > READABLE_MODULE_LINES:
      docstring = ast.get_docstring(ast.parse(text)) or ""
      out[str(path.relative_to(REPO_ROOT))] = (n, _reason(docstring.splitlines()))
  return out


def _code_lines(node) -> int:
  """A function's length: from its `def` to its last line, less its docstring (docstrings say why, and are
  welcome; a long one does not make the code harder to follow)."""
  lines = node.end_lineno - node.lineno + 1
  first = node.body[0]
  if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
    lines -= first.end_lineno - first.lineno + 1
  return lines


def _long_functions_in(text: str, limit: int = READABLE_FUNCTION_LINES):
  """{(line, name): (lines, the reason in the comment block right above its def or decorators)} of `text`'s
  functions over `limit` lines."""
  lines, out = text.splitlines(), {}
  for node in ast.walk(ast.parse(text)):
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      continue
    if (n := _code_lines(node)) <= limit:
      continue
    top = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1  # lines[top] is the first line
    above = []
    while top > 0 and lines[top - 1].strip().startswith("#"):
      top -= 1
      above.insert(0, lines[top])
    out[(node.lineno, node.name)] = (n, _reason(above))
  return out


def long_functions():
  """{path:line name: (lines, reason)} of every function over READABLE_FUNCTION_LINES in the source files."""
  out = {}
  for path in _modules().values():
    for (line, name), found in _long_functions_in(path.read_text(encoding="utf-8")).items():
      out[f"{path.relative_to(REPO_ROOT)}:{line} {name}"] = found
  return out


def _unexplained(found):
  return {k: n for k, (n, reason) in found.items() if len(reason.split()) < MIN_REASON_WORDS}


def test_long_files_say_why():
  """A file over READABLE_MODULE_LINES is split by concept, or its docstring says why it is one ("Long because:")."""
  missing = _unexplained(long_files())
  assert not missing, (f"files over {READABLE_MODULE_LINES} lines without a '{LONG_BECAUSE} <reason>' line in their "
                       f"docstring (split them by concept, or write the honest reason): {missing}")


def test_long_functions_say_why():
  """A function over READABLE_FUNCTION_LINES is split, or a comment right above it says why it is one piece."""
  missing = _unexplained(long_functions())
  assert not missing, (f"functions over {READABLE_FUNCTION_LINES} lines without a '# {LONG_BECAUSE} <reason>' comment "
                       f"right above them (split them, or write the honest reason): {missing}")


def test_the_marker_is_read_where_it_is_written():
  src = ('"""Doc.\n\nLong because: one two three four five six.\n"""\n\n\n'
         "# A comment block.\n# Long because: a b c d e f g.\n@decorator\ndef f():\n  pass\n\n\n"
         "# Long because: this comment is not right above g.\n\ndef g():\n  pass\n")
  assert _reason((ast.get_docstring(ast.parse(src)) or "").splitlines()) == "one two three four five six."
  assert _long_functions_in(src, limit=0) == {(10, "f"): (2, "a b c d e f g."), (16, "g"): (2, "")}
  documented = 'def h():\n  """One.\n\n  Two.\n  """\n  return 1\n'
  assert _long_functions_in(documented, limit=0) == {(1, "h"): (2, "")}  # the docstring is not counted
  assert _unexplained({"x": (70, "too short")}) == {"x": 70}


def _import_graph():
  """{module: set of the project's modules it imports} (function-level and TYPE_CHECKING imports included)."""
  modules = _modules()
  graph = {}
  for module, path in modules.items():
    targets = set()
    for name in _imports(path, module):
      # `from pkg import name` lists both `pkg` and `pkg.name`: keep the longest that is a module of ours.
      while name and name not in modules:
        name = name.rpartition(".")[0]
      if name and name != module and not module.startswith(name + "."):  # a package's own __init__ is no edge
        targets.add(name)
    graph[module] = targets
  return graph


def _cycles(graph):
  """The strongly connected components with more than one module (Tarjan), each sorted."""
  index, low, stack, on_stack, components = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for target in graph.get(node, ()):
      if target not in index:
        visit(target)
        low[node] = min(low[node], low[target])
      elif target in on_stack:
        low[node] = min(low[node], index[target])
    if low[node] == index[node]:
      component = []
      while True:
        member = stack.pop()
        on_stack.discard(member)
        component.append(member)
        if member == node:
          break
      if len(component) > 1:
        components.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return components


def test_no_import_circles():
  """No module reaches itself through imports — lazy and type-only imports count, since they tie the files too."""
  cycles = _cycles(_import_graph())
  assert not cycles, "import circles (split the shared part into a lower module):\n  " + "\n  ".join(
      " ⇄ ".join(c) for c in cycles)


# Scripts that deliberately import nothing of ours (run by path on a machine without TensorFlow) and so write a model
# directory's file names themselves.
_OWN_FILE_NAMES_ALLOWED = {"experiments/projects/early_exit/pretrain_torch.py": "runs by path with torch only"}


def test_model_directory_file_names_are_written_once():
  """Issue 29: every file name of a model directory is a constant of official_albert/model_directory.py; code that
  needs one imports it (a docstring may name it). String literals equal to one, anywhere else, fail here."""
  import io  # pylint: disable=g-import-not-at-top
  import tokenize  # pylint: disable=g-import-not-at-top

  from official_albert import model_directory as md  # pylint: disable=g-import-not-at-top
  names = {v for k, v in vars(md).items() if k.isupper() and isinstance(v, str) and "." in v}
  assert {"spiece.model", "config.json", "labels.json", "params.yaml", "model.ckpt-best"} <= names
  home = REPO_ROOT / "official_albert" / "model_directory.py"
  found = []
  for folder in ("official_albert", "tasks", "data_prep", "experiments"):
    for path in sorted((REPO_ROOT / folder).rglob("*.py")):
      relative = path.relative_to(REPO_ROOT).as_posix()
      if path == home or relative in _OWN_FILE_NAMES_ALLOWED:
        continue
      tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
      for token in tokens:
        if token.type == tokenize.STRING and token.string.strip("\"'") in names:
          found.append(f"{relative}:{token.start[0]}: {token.string}")
  assert not found, "use the official_albert.model_directory constant instead:\n" + "\n".join(found)


def _private_uses(path: pathlib.Path, module: str, modules) -> list:
  """`from X import _name` and `alias._name` where X / alias is another of the project's modules."""
  tree = ast.parse(path.read_text(encoding="utf-8"))
  aliases, found = {}, []
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module and _top(node.module) in TOP_PACKAGES:
      for a in node.names:
        if a.name.startswith("_") and not a.name.startswith("__") and node.module != module:
          found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} imports {node.module}.{a.name}")
        if f"{node.module}.{a.name}" in modules:
          aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    elif isinstance(node, ast.Import):
      aliases.update({a.asname: a.name for a in node.names if a.asname and _top(a.name) in TOP_PACKAGES})
  for node in ast.walk(tree):
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
        and node.attr.startswith("_") and not node.attr.startswith("__") and aliases[node.value.id] != module):
      found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
  return found


def test_no_module_reaches_into_another_modules_private_names():
  """A `_name` is its module's own: another module that needs it makes it public (issue 45), so a refactor of the
  owner cannot break a caller it does not know of. Tests may still reach in."""
  modules = _modules()
  violations = [v for module, path in modules.items() for v in _private_uses(path, module, modules)]
  assert not violations, "private names used across modules:\n  " + "\n  ".join(violations)


def _defines_main(path: pathlib.Path) -> bool:
  return any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in ast.parse(path.read_text("utf-8")).body)


def test_every_module_with_a_main_is_a_listed_binary():
  """Issue 45: a `main()` is a binary, and a binary is listed (BINARIES, hence pyproject.toml's console scripts and
  the convention test above), so none is found only by reading the tree. A package's driver counts as listed when
  the package's `__main__` (in PACKAGE_BINARIES) imports it."""
  modules = _modules()
  launched = {name for package_main in PACKAGE_BINARIES
              for name in _imports(modules[package_main], package_main) if name in modules}
  unlisted = sorted(m for m, path in modules.items()
                    if _defines_main(path) and m not in BINARIES + PACKAGE_BINARIES and m not in launched)
  assert not unlisted, ("modules with a main() that no list names (add them to BINARIES and pyproject.toml's "
                        f"[project.scripts]): {unlisted}")


PROJECTS = "experiments.projects"
DEMO = ("experiments.demo", "experiments.demo_downstream")


def _project_of(module: str) -> str:
  """`experiments.projects.<name>` for a module of a research project, '' for any other module."""
  parts = module.split(".")
  return ".".join(parts[:3]) if module.startswith(PROJECTS + ".") and len(parts) >= 3 else ""


def project_violations(modules) -> list:
  """Imports of a project module (`experiments/projects/<name>/`) that reach another project or the demo."""
  found = []
  for module, path in modules.items():
    own = _project_of(module)
    if not own:
      continue
    for name in _imports(path, module):
      other = _project_of(name)
      if (other and other != own) or any(name == d or name.startswith(d + ".") for d in DEMO):
        found.append(f"{path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path} imports {name}")
  return found


def test_no_project_imports_another_project_or_the_demo():
  """Issue 45: a research project (Model Garden's `official/projects/<name>/`) stands on the library, the tasks, the
  data tools and the shared experiment kit, never on a sibling project or the demo, so that each can be read, run and
  removed alone. What two projects share moves down to a shared room (data_prep/corpus_tasks.py, experiments/study.py,
  experiments/jax_loop.py)."""
  violations = project_violations(_modules())
  assert not violations, "projects leaning sideways:\n  " + "\n  ".join(violations)


def test_the_project_rule_bites(tmp_path):
  # Holds vacuously while experiments/projects/ is empty or young: this shows it fails on each kind of lean.
  files = {"experiments.projects.a.run": "from experiments.projects.b import study\nimport experiments.demo\n",
           "experiments.projects.a.study": "from . import run\nfrom experiments import jax_loop\n",
           "experiments.projects.b.study": "from experiments.demo_downstream import prose_lines\n",
           "experiments.jax_loop": "from experiments.projects.a import run\n"}
  modules = {}
  for name, text in files.items():
    path = tmp_path / (name.replace(".", "/") + ".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    modules[name] = path
  found = [line.split(" imports ")[1] for line in project_violations(modules)]
  assert found == ["experiments.projects.b", "experiments.projects.b.study", "experiments.demo",
                   "experiments.demo_downstream", "experiments.demo_downstream.prose_lines"], found


def _rooms():
  """The rooms of experiments/: each sub-package (`benchmark/`, `ablations/`, `projects/<name>/`) and each top-level
  module (named by its stem, or by a group glob such as `long_range*` that its stem starts with)."""
  root = REPO_ROOT / "experiments"
  rooms = {p.name + "/" for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
  projects = root / "projects"
  if projects.is_dir():
    rooms |= {f"projects/{p.name}/" for p in projects.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
  return rooms | {p.stem for p in root.glob("*.py") if p.stem != "__init__"}


def _named(room: str, text: str) -> bool:
  """Whether `text` names `room`: a folder as written (`benchmark/`), a module by its stem as a word, or by a group
  glob (`long_range*` names long_range.py and long_range_jax.py)."""
  if room.endswith("/"):
    return room in text
  words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*\*?", text))
  return room in words or any(w.endswith("*") and room.startswith(w[:-1]) for w in words)


def test_every_room_of_experiments_is_named_in_the_readme_layout():
  """Issue 45: the README's Layout section is the map of the house; a room of experiments/ it does not name is one a
  reader cannot find there."""
  readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
  layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
  block = layout.split("\nexperiments/", 1)[1].split("\ntests/", 1)[0]
  missing = sorted(room for room in _rooms() if not _named(room, block))
  assert not missing, f"rooms of experiments/ missing from the README's Layout (its experiments/ entry): {missing}"


def test_the_room_rule_reads_names_and_globs():
  text = "registry, the demo* (demo_downstream), benchmark/, long_range* and jax_loop"
  assert [_named(r, text) for r in ("registry", "demo_downstream", "long_range_jax", "benchmark/", "jax_loop",
                                    "ablations/", "long_pretrain_jax", "jax")] == [True] * 5 + [False] * 3
