"""The documents the code cites are in the repository, and every citation resolves.

Code, tests and docs cite the behaviour reference as "reference §N.M" / "§N.M" (a heading of docs/reference.md),
"§8 #9" / "§8 item 9" / "reference bug #9" (item 9 of section 8), and the design notes as docs/design.md.
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
