"""Model names as a dirty log writes them: an alias map and an opt-in normalisation, applied while
reading, before any check.

* ``aliases``: a file mapping names to the names to use -- CSV with two columns (alias, name; a
  header row ``alias,name`` is skipped) or a JSON object ``{"alias": "name"}``; every name is text
  as written (``NA`` is a name).  A name mapped to two names, or to a name that is itself mapped
  (a chain), is refused.
* ``normalise``: names equal up to case and spaces (leading, trailing, repeated inner ones) are one
  model, shown in the spelling most of its judgments use (ties: the first in sorted order).  Only
  case and spaces: ``gpt-4`` and ``gpt_4`` stay two names (the checks name them; an alias maps them).

What was merged is said in a note under the table.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from .files import LeaderboardInputError

MAX_ALIAS_BYTES = 64 * 2**20


def read_aliases(path) -> dict:
    """{alias: name} from a CSV or JSON file (module docstring); one-line errors naming the file."""
    path = Path(path)
    if not path.is_file():
        raise LeaderboardInputError(f"{path}: no such aliases file")
    if path.stat().st_size > MAX_ALIAS_BYTES:
        raise LeaderboardInputError(f"{path}: an aliases file of {path.stat().st_size:,} bytes; at most "
                                    f"{MAX_ALIAS_BYTES:,} are read")
    text = path.read_text(encoding="utf-8", errors="replace")
    pairs = []
    if path.suffix.lower() == ".json":
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise LeaderboardInputError(f"{path}: not JSON ({' '.join(str(exc).split())[:80]})") from None
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise LeaderboardInputError(f"{path}: expected a JSON object {{\"alias\": \"name\", ...}} of text")
        pairs = list(value.items())
    else:
        for line, row in enumerate(csv.reader(text.splitlines()), start=1):
            if not row or (line == 1 and [c.strip().lower() for c in row[:2]] == ["alias", "name"]):
                continue
            if len(row) != 2 or not row[0] or not row[1]:
                raise LeaderboardInputError(f"{path}: line {line}: expected two columns, alias and name, got {row!r}")
            pairs.append((row[0], row[1]))
    out = {}
    for alias, name in pairs:
        if alias in out and out[alias] != name:
            raise LeaderboardInputError(f"{path}: `{alias}` is mapped to both `{out[alias]}` and `{name}`")
        out[alias] = name
    chained = [alias for alias, name in out.items() if name in out and out[name] != name]
    if chained:
        alias = chained[0]
        raise LeaderboardInputError(f"{path}: `{alias}` maps to `{out[alias]}`, which maps to `{out[out[alias]]}`; "
                                    "map every alias to its final name")
    return out


def _folded(name: str) -> str:
    return " ".join(name.split()).casefold()


def rename(i, j, models, *, aliases=None, normalise=False):
    """(i, j, models, notes) with the aliases applied, then case and space variants merged."""
    counts = np.bincount(i, minlength=len(models)) + np.bincount(j, minlength=len(models))
    target = [aliases.get(name, name) if aliases else name for name in models]
    notes = []
    mapped = sum(1 for a, b in zip(models, target) if a != b)
    if mapped:
        notes.append(f"{mapped} name{'s' if mapped != 1 else ''} mapped by the aliases file")
    if normalise:
        weight: dict = {}
        for name, count in zip(target, counts):
            weight.setdefault(_folded(name), {}).setdefault(name, 0)
            weight[_folded(name)][name] += int(count)
        chosen = {key: " ".join(max(sorted(spellings), key=spellings.get).split())
                  for key, spellings in weight.items()}
        merged = [(sorted(spellings), chosen[key]) for key, spellings in weight.items()
                  if len(spellings) > 1 or next(iter(spellings)) != chosen[key]]
        target = [chosen[_folded(name)] for name in target]
        if merged:
            shown = "; ".join(f"{', '.join(f'`{s}`' for s in spellings)} as `{name}`" for spellings, name in merged[:3])
            more = f" and {len(merged) - 3} more" if len(merged) > 3 else ""
            notes.append(f"names equal up to case and spaces merged (--normalise-names): {shown}{more}")
    if target == list(models):
        return i, j, models, notes
    union = sorted(set(target))
    index = {name: k for k, name in enumerate(union)}
    code = np.array([index[name] for name in target], dtype=np.intp)
    return code[i], code[j], union, notes
