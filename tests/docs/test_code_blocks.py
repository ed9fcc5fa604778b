"""Every code block of the README and of docs/ runs as written (tests/docs/mdblocks.py says which
blocks are run and how a page marks the others).

A page's blocks run in order in one sandbox directory, as a newcomer would run them from the
repository root: the sandbox links `jobs/`, `examples/`, `benchmarks/` and `outputs/reference/` to
the repository's, so relative paths work, and everything a block writes (outputs, files) lands in
the sandbox.  The sandbox is a git repository with the project's `.gitignore`: after the blocks of
the README's tour (and of docs/jobs.md), `git status` there must be clean, i.e. everything they
wrote is a path git ignores (`outputs/`, a temporary directory, or an entry of `.gitignore`), so
that running them in a checkout leaves the checkout clean.

* ```python blocks run with this Python in a subprocess, read from its standard input as in an
  interactive session (the sandbox is the working directory and is on ``sys.path``).
* ```bash blocks run statement by statement.  A job command `python jobs/<job>.py ...` runs in this
  process on the session's Ray (the job scripts are thin wrappers of study.cli, checked below)
  with *short settings*: one replication (`--reps 1` replaces `--quick` or `--reps N`), a horizon
  of at most 200 with T0 = 0.4 T, and `--out` under the sandbox.  Every other statement (a file
  written with a heredoc, `PYTHONPATH=. python jobs/...`, `python -m ...`) runs in bash, with the
  same short settings for job commands.  A failing statement fails the test, naming the page,
  the line and the output.  A statement already run on the page (the same command, the same
  directory: a resume, tested elsewhere) is not run again.
"""
from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mdblocks import OUTPUT_LANGUAGES, PAGES, ROOT, RUN_LANGUAGES, blocks, indented_blocks

JOBS = {"regret": ("main", "regret"), "coverage": ("main", "coverage"), "msweep": ("main", "msweep"),
        "paper": ("main_paper", None), "baselines": ("main_baselines", None), "figures": ("main_figures", None),
        "llm_ranking": ("main_llm", None),
        "votes": ("main", None)}  # jobs/votes.py: study.runner.votes.main (the votes study has its own driver)
MAX_T = 200
# the pages whose blocks a newcomer runs in a checkout as a tour: they must leave `git status` clean
# (the other pages' examples may write beside their placeholders, e.g. --out DIR)
LEAVE_CLEAN = ("README.md", "docs/jobs.md")
SHORT_REPS = "1"
DATA_LANGUAGES = OUTPUT_LANGUAGES + ("toml", "json", "yaml", "bibtex", "csv")


def _pages_with_blocks():
    return [p for p in PAGES if p.exists() and any(b.language in RUN_LANGUAGES and not b.directive for b in blocks(p))]


def test_every_block_has_a_known_language_and_no_block_is_indented():
    for page in PAGES:
        if not page.exists():
            continue
        assert not indented_blocks(page), f"{page.name}: indented code blocks at lines {indented_blocks(page)} " \
                                          "(use a fenced block with a language)"
        for block in blocks(page):
            assert block.language in RUN_LANGUAGES + DATA_LANGUAGES, \
                f"{block.id}: code block language {block.language!r} (use one of {RUN_LANGUAGES + DATA_LANGUAGES})"
            assert block.directive in ("", "skip", "cluster-recipe", "cluster-two-nodes"), \
                f"{block.id}: unknown directive {block.directive!r}"
            if block.directive == "skip":
                assert block.reason, f"{block.id}: a skipped block says why"


def test_skipped_blocks_are_at_least_well_formed():
    for page in PAGES:
        for block in (blocks(page) if page.exists() else []):
            if block.directive not in ("skip", "cluster-recipe", "cluster-two-nodes"):
                continue
            if block.language == "python":
                compile(block.code, block.id, "exec")
            elif block.language == "bash":
                res = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True)
                assert res.returncode == 0, f"{block.id}: {res.stderr}"


def test_job_scripts_are_the_cli_functions_the_runner_calls():
    for job, (function, study) in JOBS.items():
        tree = ast.parse((ROOT / "jobs" / f"{job}.py").read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == function]
        assert calls, f"jobs/{job}.py does not call study.cli.{function}"
        if study is not None:
            assert any(a.value == study for c in calls for a in c.args if isinstance(a, ast.Constant))
    assert sorted(JOBS) == sorted(p.stem for p in (ROOT / "jobs").glob("*.py") if not p.stem.startswith("_"))


# --------------------------------------------------------------------------------------------------
# Shell statements
# --------------------------------------------------------------------------------------------------

def statements(code: str) -> list:
    """Logical statements of a bash block: continuation lines joined, a heredoc kept with its body."""
    lines, out, k = code.splitlines(), [], 0
    while k < len(lines):
        line = lines[k]
        k += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.endswith("\\") and k < len(lines):
            line = line[:-1] + " " + lines[k].strip()
            k += 1
        heredoc = re.search(r"<<-?\s*'?\"?(\w+)'?\"?", line)
        if heredoc:
            body = []
            while k < len(lines) and lines[k].strip() != heredoc.group(1):
                body.append(lines[k])
                k += 1
            line = "\n".join([line] + body + [lines[k] if k < len(lines) else heredoc.group(1)])
            k += 1
        out.append(line)
    return out


def shorten(args: list, sandbox: Path, job: str = "") -> list:
    """A job's arguments with the short settings (see the module docstring); ``jobs/figures.py``
    runs nothing and keeps its arguments (its --out mapped into the sandbox)."""
    args = list(args)
    out = []
    k = 0
    sets = {}
    while k < len(args):
        a = args[k]
        if a == "--quick":
            k += 1
            continue
        if a == "--reps":
            k += 2
            continue
        if a == "--set" and k + 1 < len(args):
            key, _, value = args[k + 1].partition("=")
            sets[key] = value
            k += 2
            continue
        if a == "--out" and k + 1 < len(args):
            path = Path(args[k + 1])
            out += ["--out", str(path if not path.is_absolute() else sandbox.parent / "abs" / path.relative_to(path.anchor))]
            k += 2
            continue
        out.append(a)
        k += 1
    if job == "figures":
        return out
    T = int(sets["T"]) if sets.get("T", "").isdigit() else None
    if T is None or T > MAX_T:
        sets["T"], sets["T0"] = str(MAX_T), str(int(0.4 * MAX_T))
    for key, value in sets.items():
        out += ["--set", f"{key}={value}"]
    if "--figures-only" not in out:
        out += ["--reps", SHORT_REPS]
    return out + ["--no-progress"]


_JOB = re.compile(r"^python3? (?:\./)?jobs/(\w+)\.py(?:\s|$)")


def _shell_job_commands(statement: str, sandbox: Path) -> str:
    """``statement`` with every ``python jobs/X.py ...`` in it shortened (for bash)."""
    def repl(line):
        prefix = re.match(r"^((?:\w+=\S+\s+)*)(.*)$", line, flags=re.S)
        env, rest = prefix.group(1), prefix.group(2)
        if not _JOB.match(rest):
            return line
        words = shlex.split(rest, comments=True)
        job = _JOB.match(rest).group(1)
        return env + " ".join(shlex.quote(w) for w in words[:2] + shorten(words[2:], sandbox, job))
    return "\n".join(repl(line) for line in statement.split("\n"))


def _run_in_process(words, sandbox, capsys) -> tuple:
    from study import cli
    job = re.match(r"(?:\./)?jobs/(\w+)\.py$", words[1]).group(1)
    function, study = JOBS[job]
    args = shorten(words[2:], sandbox, job)
    fn = getattr(cli, function)
    try:
        status = fn(study, args) if study else fn(args)
    except SystemExit as exc:
        status = exc.code
    captured = capsys.readouterr()
    return status, captured.out + captured.err, args


def _git(sandbox: Path, *args) -> str:
    return subprocess.run(["git", "-c", "user.name=docs-test", "-c", "user.email=docs-test@localhost", *args],
                          cwd=sandbox, check=True, capture_output=True, text=True).stdout


def checkout(sandbox: Path) -> None:
    """A stand-in for a checkout in ``sandbox``: the links a block's relative paths need, the
    project's .gitignore, all committed to a git repository of its own."""
    for name in ("jobs", "examples", "benchmarks"):
        (sandbox / name).symlink_to(ROOT / name)
    (sandbox / "outputs").mkdir()
    (sandbox / "outputs" / "reference").symlink_to(ROOT / "outputs" / "reference")
    (sandbox / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    _git(sandbox, "init", "-q")
    _git(sandbox, "add", "-A")
    _git(sandbox, "commit", "-q", "-m", "checkout")


def not_ignored(sandbox: Path) -> list:
    """What ``git status`` lists in the sandbox: files written and not ignored, or changed."""
    return _git(sandbox, "status", "--porcelain", "--untracked-files=all").splitlines()


def _run_page(page: Path, sandbox: Path, ray_session, capsys):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    ran, done = 0, set()
    for block in blocks(page):
        if block.directive or block.language not in RUN_LANGUAGES:
            continue
        if block.language == "python":
            res = subprocess.run([sys.executable, "-"], input=block.code, cwd=sandbox, env=env, capture_output=True,
                                 text=True, timeout=600)
            assert res.returncode == 0, f"{block.id} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
            ran += 1
            continue
        for statement in statements(block.code):
            words = shlex.split(statement, comments=True) if "\n" not in statement else []
            if words[:1] == ["export"]:
                for assignment in words[1:]:
                    key, _, value = assignment.partition("=")
                    env[key] = os.path.expandvars(value)
                continue
            key = _shell_job_commands(statement, sandbox)  # as run, short settings applied
            if key in done:  # the same command again in the same directory: a resume, tested elsewhere
                continue
            done.add(key)
            if len(words) >= 2 and words[0] in ("python", "python3") and _JOB.match(" ".join(words[:2]) + " "):
                status, output, args = _run_in_process(words, sandbox, capsys)
                assert status == 0, f"{block.id}: `{statement}` (run as {args}) exited {status}:\n{output[-4000:]}"
            else:
                command = _shell_job_commands(statement, sandbox)
                res = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=sandbox, env=env,
                                     capture_output=True, text=True, timeout=900)
                assert res.returncode == 0, \
                    f"{block.id}: `{command}` exited {res.returncode}:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
            ran += 1
    return ran


@pytest.mark.parametrize("page", _pages_with_blocks(), ids=lambda p: str(p.relative_to(ROOT)))
def test_code_blocks_run_as_written(page, tmp_path, ray_session, capsys, monkeypatch):
    from study.simulation.named import registered_settings, unregister_setting
    before = set(registered_settings())
    sandbox = tmp_path / "checkout"
    sandbox.mkdir()
    checkout(sandbox)
    monkeypatch.chdir(sandbox)  # in-process jobs resolve relative paths (--out, files) in the sandbox
    try:
        assert _run_page(page, sandbox, ray_session, capsys) > 0
    finally:
        for name in set(registered_settings()) - before:
            unregister_setting(name)
    left = not_ignored(sandbox) if page.relative_to(ROOT).as_posix() in LEAVE_CLEAN else []
    assert not left, (f"{page.relative_to(ROOT)}: running its blocks in a checkout leaves files git does not ignore "
                      f"(write them under outputs/ or a temporary directory, or add them to .gitignore):\n"
                      + "\n".join(left))


def test_the_clean_checkout_check_catches_a_file_git_does_not_ignore(tmp_path):
    checkout(tmp_path)
    (tmp_path / "outputs" / "mine").mkdir()
    (tmp_path / "outputs" / "mine" / "summary.md").write_text("ignored: under outputs/")
    (tmp_path / "leaderboard.sqlite").write_text("ignored: a store in the root")
    assert not_ignored(tmp_path) == []
    (tmp_path / "notes.csv").write_text("not ignored")
    (tmp_path / "outputs-mine").mkdir()
    (tmp_path / "outputs-mine" / "x").write_text("ignored")
    assert not_ignored(tmp_path) == ["?? notes.csv"]
