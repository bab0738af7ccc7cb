"""The documents the code cites are in the repository, and every citation resolves.

Code, tests and docs cite the behaviour reference as "reference §N.M" / "§N.M" (a heading of docs/reference.md),
"§8 #9" / "§8 item 9" / "reference bug #9" (item 9 of section 8), and the design notes as docs/design.md. Every
relative link of README.md, docs/ and the research projects' READMEs leads to a file, and to a heading of it.
"""

import pathlib
import re

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
REFERENCE = REPO_ROOT / "docs" / "reference.md"
SOURCES = [p for folder in ("official_albert", "tasks", "data_prep", "experiments", "tests")
           for p in (REPO_ROOT / folder).rglob("*.py")] + [REPO_ROOT / "README.md"] + sorted(
               (REPO_ROOT / "docs").glob("*.md"))

_SECTION = re.compile(r"§\s?(\d+(?:\.\d+)?)")
_ITEM = re.compile(r"§\s?(\d+)\s+(?:#|item\s+)(\d+)|reference bug #(\d+)")


def _reference():
  text = REFERENCE.read_text(encoding="utf-8")
  headings = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, flags=re.M))
  items = {}
  section = None
  for line in text.splitlines():
    heading = re.match(r"^## (\d+)\. ", line)
    if heading:
      section = heading.group(1)
    item = re.match(r"^(\d+)\. ", line)
    if item and section:
      items.setdefault(section, set()).add(item.group(1))
  return headings, items


def test_every_section_citation_resolves():
  headings, items = _reference()
  assert {"1.1", "4.4", "5.2", "8", "9"} <= headings  # the reference is the numbered one
  missing = []
  for path in SOURCES:
    if path == REFERENCE:
      continue
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
      for section in _SECTION.findall(line):
        if section not in headings:
          missing.append(f"{path.relative_to(REPO_ROOT)}:{number}: §{section}")
      for match in _ITEM.finditer(line):
        section, item = (match.group(1), match.group(2)) if match.group(1) else ("8", match.group(3))
        if item not in items.get(section, ()):
          missing.append(f"{path.relative_to(REPO_ROOT)}:{number}: §{section} item {item}")
  assert not missing, "citations that docs/reference.md does not hold:\n  " + "\n  ".join(missing)


def test_no_citation_points_outside_the_repository():
  stale = []
  for path in SOURCES:
    if path.name == "test_docs.py":
      continue
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
      if re.search(r"(?<![\w/])DESIGN\.md|shared/reference|ALBERT_REFERENCE", line):
        stale.append(f"{path.relative_to(REPO_ROOT)}:{number}")
  assert not stale, "references to documents a clone does not have:\n  " + "\n  ".join(stale)
  assert (REPO_ROOT / "docs" / "design.md").is_file() and REFERENCE.is_file()


DOCUMENTS = [REPO_ROOT / "README.md"] + sorted((REPO_ROOT / "docs").glob("*.md")) + sorted(
    (REPO_ROOT / "experiments" / "projects").glob("*/README.md"))


def _prose(path):
  """The text of a Markdown file with its fenced code blocks blanked (a `# comment` there is no heading, `[x](y)` no
  link), its lines where they were."""
  return re.sub(r"```.*?```", lambda block: "\n" * block.group(0).count("\n"), path.read_text(encoding="utf-8"),
                flags=re.S)


def _anchors(path):
  """The anchors GitHub gives the headings of `path`: lower case, punctuation but `-` and `_` dropped, spaces as
  `-`, and `-1`, `-2` ... after a repeated one."""
  seen, anchors = {}, set()
  for heading in re.findall(r"^#{1,6} (.+?)\s*$", _prose(path), flags=re.M):
    slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
    anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
    seen[slug] = seen.get(slug, 0) + 1
  return anchors


def test_every_relative_link_in_the_docs_resolves():
  """A renamed heading or a moved file leaves a link that GitHub renders and a reader follows to nothing."""
  broken = []
  for document in DOCUMENTS:
    for number, line in enumerate(_prose(document).splitlines(), 1):
      for target in re.findall(r"\]\(([^)\s]+)\)", line):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
          continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        where = f"{document.relative_to(REPO_ROOT)}:{number}: {target}"
        if not linked.exists():
          broken.append(f"{where}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
          broken.append(f"{where}: {linked.name} has no heading with that anchor")
  assert not broken, "links that lead nowhere:\n  " + "\n  ".join(broken)
