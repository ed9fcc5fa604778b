"""The code blocks of the project's Markdown pages, with the directive that precedes each.

A fenced block may be preceded by an HTML comment (invisible on GitHub) that tells the docs tests
what to do with it:

    <!-- docs-test: skip REASON -->      not run (a bash block is still checked with `bash -n`,
                                         a python block compiled)
    <!-- docs-test: cluster-recipe -->   run by tests/docs/test_cluster_recipe.py, in order

Every other ```python, ```bash or ```console block is run by tests/docs/test_code_blocks.py;
```text blocks are output and never run.  Indented code blocks are not allowed (their language
would be unknown): the test fails on any.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGUAGES = ("python", "bash", "console")
OUTPUT_LANGUAGES = ("text",)
_FENCE = re.compile(r"^(`{3,})(\S*)[^\n]*$")
_DIRECTIVE = re.compile(r"^<!--\s*docs-test:\s*(\S+)\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int          # 1-based line of the opening fence
    language: str
    code: str
    directive: str = ""   # "", "skip", "cluster-recipe"
    reason: str = ""

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list:
    """The fenced code blocks of ``page``, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, k, directive = [], 0, ("", "")
    while k < len(lines):
        match = _FENCE.match(lines[k])
        d = _DIRECTIVE.match(lines[k])
        if d:
            directive = (d.group(1), d.group(2))
        elif match:
            fence, language = match.group(1), match.group(2).lower()
            end = next((j for j in range(k + 1, len(lines)) if lines[j].startswith(fence)
                        and not lines[j].strip(fence[0]).strip()), None)
            if end is None:
                raise ValueError(f"{page}:{k + 1}: unclosed code fence")
            found.append(Block(page, k + 1, language, "\n".join(lines[k + 1:end]) + "\n", *directive))
            directive, k = ("", ""), end
        elif lines[k].strip():
            directive = ("", "")
        k += 1
    return found


def indented_blocks(page: Path) -> list:
    """Line numbers of indented code blocks (four spaces after a blank line, outside fences and lists)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, in_fence, previous = [], False, ""
    for k, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and line.startswith("    ") and line.strip() and not previous.strip():
            # a list item's continuation is indented too: only flag text after a blank line that
            # does not continue a list
            above = next((lines[j] for j in range(k - 1, -1, -1) if lines[j].strip()), "")
            if not re.match(r"^\s*([*+-]|\d+\.)\s", above) and not above.startswith("  "):
                found.append(k + 1)
        previous = line
    return found
