"""The Markdown pages hold together: every relative link and image resolves, every anchor names a
heading of its page (GitHub's rules), no page cites an internal issue number a reader cannot see,
the generated settings table is current, .ci/run names a README section that exists, and
CITATION.cff cites the paper with its arXiv id and the software at this version."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import study
from mdblocks import PAGES, ROOT

LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code (links there are not links)."""
    text = re.sub(r"^(`{3,})[^\n]*\n.*?^\1\s*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lower case, punctuation removed, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set:
    found, seen = set(), {}
    text = re.sub(r"^(`{3,})[^\n]*\n.*?^\1\s*$", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    for line in text.splitlines():
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            k = seen.get(base, 0)
            seen[base] = k + 1
            found.add(base if k == 0 else f"{base}-{k}")
    return found


def test_slug_follows_github():
    assert slug("Output schema") == "output-schema"
    assert slug("`graph=\"raw\"`: the paper's graph protocol") == "graphraw-the-papers-graph-protocol"
    assert slug("The graph protocol, examined") == "the-graph-protocol-examined"
    assert slug("γ and c_λ") == "γ-and-c_λ"


def _links():
    for page in PAGES:
        if page.exists():
            for match in LINK.finditer(_prose(page.read_text(encoding="utf-8"))):
                yield page, match.group(3)


@pytest.mark.parametrize("page", [p for p in PAGES if p.exists()], ids=lambda p: str(p.relative_to(ROOT)))
def test_links_and_anchors_resolve(page):
    broken = []
    for source, target in _links():
        if source != page or re.match(r"^[a-z]+:", target):  # http(s), mailto: not checked (no network)
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
        elif dest.exists() and ROOT not in dest.parents and dest != ROOT:
            broken.append(f"{target}: outside the repository")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"docs/{p.name}" not in readme]
    assert not missing, f"docs pages the README's table does not list: {missing}"


def test_no_internal_issue_numbers():
    for page in PAGES:
        if page.exists():
            hits = re.findall(r"[Ii]ssue\s*#?\d+", page.read_text(encoding="utf-8"))
            assert not hits, f"{page.name} cites internal issue numbers a reader cannot see: {hits}"


def test_settings_table_is_generated():
    from settings_table import BEGIN, END, table
    text = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    current = text[text.index(BEGIN): text.index(END) + len(END)]
    assert current == table(), "docs/settings.md's table is stale: run `python tests/docs/settings_table.py` " \
                               "and paste its output between the markers"


def test_ci_names_a_readme_section_that_exists():
    names = re.findall(r'README, "([^"]+)"', (ROOT / ".ci" / "run").read_text())
    assert names, ".ci/run says which README section it follows"
    headings = [HEADING.match(l).group(2) for l in (ROOT / "README.md").read_text().splitlines() if HEADING.match(l)]
    for name in names:
        assert name in headings, f".ci/run names README section {name!r}, which does not exist"
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    for command in ('install -e ".[test]"', "python -m pytest"):
        assert command in readme and command in ci, f"{command!r}: the README's and CI's commands differ"


def test_citation_cites_the_paper_and_the_software():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    assert cff["version"] == study.__version__
    paper = cff["preferred-citation"]
    assert paper["title"] == "Contextual Online Uncertainty-Aware Preference Learning for Human Feedback"
    assert [a["family-names"] for a in paper["authors"]] == ["Lu", "Lee", "Fang", "Lu"]
    assert paper["doi"] == "10.48550/arXiv.2504.19342"
    assert {"type": "other", "value": "arXiv:2504.19342"} in paper["identifiers"]
    assert cff["license"] == "BSD-3-Clause" and (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")


def test_readme_final_values_are_the_reference_summary():
    from readme_numbers import BEGIN, END, table
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    current = text[text.index(BEGIN): text.index(END) + len(END)]
    assert current == table(), "README's Final values differ from outputs/reference/summary.csv: run " \
                               "`python tests/docs/readme_numbers.py`"


MACHINE_PATH = re.compile(r"(?<![\w.~$])/(?:work|root|home/\w+|Users/\w+|tmp/(?!ray-XXXXXX)[\w.-]+)/?")


def test_no_page_names_a_path_of_the_machine_it_was_written_on():
    """A reader copies commands: no absolute path of this project's machines (its work tree, its runs,
    a home directory, a fixed /tmp folder) in the README, the docs, the changelog or the examples."""
    files = PAGES + sorted((ROOT / "examples").glob("*.py"))
    hits = [f"{p.relative_to(ROOT)}:{k}: {line.strip()[:100]}" for p in files if p.exists()
            for k, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if MACHINE_PATH.search(line)]
    assert not hits, "machine-specific absolute paths:\n" + "\n".join(hits)
