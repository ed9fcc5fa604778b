"""Command-line front end of the study engine (``jobs/*.py`` are thin wrappers around this).

    python jobs/regret.py   [common flags]        # or: python -m study.cli regret [flags]
    python jobs/coverage.py [common flags]
    python jobs/msweep.py   [common flags] [--m-values 1 10 20]
    python jobs/paper.py    [common flags]        # all three studies
    python jobs/baselines.py [common flags]       # beyond the paper: the literature's baselines
    python jobs/figures.py  [--out DIR]           # redraw figures and summary from the Parquet
    python jobs/llm_ranking.py [common flags] [--arena | --judgments FILE] [--figures-only]

Every job ends with its figures (DIR/figures/) and the summary table (DIR/summary.{md,csv}) unless
--no-figures.  Every flag is validated (settings resolved through ``Setting.replace``) before Ray is
imported, so bad input fails in well under a second with exit status 2 and a one-line message.
Exit status: 0 all replications stored, 1 some replication failed (or Ray could not be reached),
2 bad usage, stored results of a different configuration, a damaged or unreadable stored file, or
another run writing the same --out; 130 (SIGINT) or 143 (SIGTERM) interrupted, finished
replications stored.
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
import time
import uuid
from pathlib import Path

from .core import _validate as check
from .policies import ALL_METHODS
from .results.figures import draw_all, draw_study, replay_figures
from .results.storage import StorageError, parts, dataset_dirs, study_lock
from .results.summary import write_summary
from .results.verdicts import write_verdicts
from .runner import (BASELINE_STUDIES, DEFAULT_BASELINE_STUDIES, DEFAULT_SEED, LLM_WARMUP_STUDIES, STUDIES, STUDY_NAMES,
                     WARMUP_STUDIES, ConfigMismatch, RunOptions, check_stored, connect, make_plan, max_local_cpus,
                     run_study)
from .runner import numerics
from .runner.panels import store_diagram_panels
from .simulation.named import load_settings_file
from .simulation.settings import BUILTIN_SETTINGS, WARMUPS

DEFAULT_OUT = "outputs"
INIT_TIMEOUT = 30.0  # seconds to join a cluster given with --address before giving up (exit 1)
QUICK_REPS = 4

_EPILOG = """\
Where it runs:
  (no --address)            embedded local Ray on this machine (all CPUs unless --num-cpus)
  --address auto            join a cluster started with `ray start --head` on this machine/network
  --address ray://HOST:PORT Ray Client connection to a remote cluster
  inside `ray job submit`   the job's cluster (RAY_ADDRESS is set by Ray); --out must be absolute
Rerunning the same command resumes: only replications missing from --out are computed; one run
writes a given --out at a time; Ctrl-C stores every finished replication (docs/storage.md).
The embedded Ray listens on 127.0.0.1 only and keeps Ray's token authentication.  Keep it on a
cluster too: export RAY_AUTH_MODE=token (and have the cluster's token in ~/.ray/auth_token) in the
shells of `ray start`, of this command and of `ray job submit`; RAY_AUTH_MODE=disabled lets anyone
who reaches the cluster's ports run code as you (docs/cluster.md).
"""


def _parse_value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return text


def _set_pair(text: str):
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    key = key.strip()
    if not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, _parse_value(value.strip())


def _integer(text: str, what: str, low: int, high: int | None = None) -> int:
    """An argparse value checked by :func:`study.core._validate.integer`; ``what`` names the
    allowed values in the message."""
    try:
        return check.integer(what, int(text), low=low, high=high)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def _positive_int(text: str) -> int:
    return _integer(text, "a positive integer", low=1)


def _seed(text: str) -> int:
    return _integer(text, "an integer seed in [0, 2**63)", low=0, high=2 ** 63 - 1)


_LLM_DESCRIPTION = """\
The paper's LLM-ranking application on the Ray engine: each step draws one of the 100 MMLU anatomy
questions uniformly, the policy picks a pair of the five LLMs, and the outcome is drawn from that
(question, pair)'s judgment pool.  T0 = 3000, T = 5000, theta(0) ~ N(0, 5), M = 1, 50 replications
of all five methods (study 'llm').  Prompts and their embeddings are real; the judgments are
GENERATED (a contextual BTL whose overall strengths are fitted to real Chatbot Arena votes), not
the paper's GPT-4 judgments.  --arena replays the real Chatbot Arena votes instead (129 models,
d = 1, T = 10000, T0 = 4000, M = 10; study 'arena'); --judgments FILE replays your own judgments
(study 'byo').  Afterwards: DIR/figures/<study>_regret (R(t) and relative error, Monte Carlo bands)
and, for llm and byo, <study>_diagrams and <study>_diagrams_ci (ranking diagrams at t = 200, 400,
..., 1600), plus DIR/summary.{md,csv}.
"""

_BYO_EPILOG = """\
Judgments file (--judgments, CSV or Parquet, one row per judgment): columns question_id, model_a,
model_b, winner ('a', 'b' or 'tie'; a tie is half a win each) and either context (a numeric vector
per question: a Parquet list column or a JSON list such as "[1.0, 0.2]" in CSV) or question (the
prompt text, embedded with all-MiniLM-L6-v2 and reduced to --dim dimensions; needs the optional
extra llm-prepare).  The file is checked before Ray starts; a bad entry fails with exit status 2
and names its row and column.  The parsed data travel to the Ray workers with the tasks, so the
file need not exist on other nodes.  Cost: by default 50 replications of the five methods at
T = 5000 (about 8 minutes on 2 cores for a 400-row file); --quick runs 4 (a smoke run), and
--set T=1000 --set T0=400 shortens the horizon.
"""


def build_parser(study: str) -> argparse.ArgumentParser:
    """The parser of one study (``regret``, ``coverage``, ``msweep``), ``paper`` or ``llm`` (the
    LLM-ranking job: studies ``llm``, ``arena`` and ``byo``)."""
    if study == "baselines":
        description = ("Beyond the paper: the paper's five methods against the contextual dueling-bandit "
                       "baselines on Settings A and B and on the LLM-ranking replay under both warm-up protocols "
                       "(studies 'baselines_random', 'baselines_greedy', 'llm_baselines_random', 'llm_baselines_greedy': "
                       "what a method whose rule needs Phi does before Phi exists), then figures (regret, "
                       "pair regret, error), the summary table and the verdicts (DIR/verdicts.md: a winner is "
                       "stated only where it holds under both warm-ups).  --set warmup=W runs A, B and the replay "
                       "under W alone (baselines_W, llm_baselines_W; 'own': 'baselines', 'llm_baselines').  Cells "
                       "identical to another study's in --out (same seeds) are copied instead of recomputed.")
        default_reps = "baselines_* 200, llm_baselines_* 50"
        default_methods = " ".join(STUDIES["baselines_random"].methods)
    elif study == "paper":
        description = ("Run the paper's whole Monte Carlo study -- regret, coverage and M-sweep -- then "
                       "draw every figure and write the summary table.")
        default_reps = "each study's paper default (regret 200, coverage 500, msweep 200)"
        default_methods = "all five for regret and msweep; coverage always uses RB"
    elif study == "llm":
        description = _LLM_DESCRIPTION
        default_reps = str(STUDIES["llm"].reps)
        default_methods = " ".join(STUDIES["llm"].methods)
    else:
        spec = STUDIES[study]
        description = spec.description
        default_reps = str(spec.reps)
        default_methods = " ".join(spec.methods)
    prog = "jobs/llm_ranking.py" if study == "llm" else f"jobs/{study}.py"
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     epilog=(_BYO_EPILOG + "\n" if study == "llm" else "") + _EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    if study == "llm":
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--arena", action="store_true",
                           help="replay the real Chatbot Arena votes (129 models; study 'arena')")
        which.add_argument("--judgments", metavar="FILE",
                           help="replay your own judgments from a CSV or Parquet file (study 'byo'; format below)")
        parser.add_argument("--dim", type=_positive_int, metavar="D",
                            help="with --judgments and a 'question' text column: context dimension (default: 10)")
        parser.add_argument("--ridge", type=_non_negative_float, metavar="R",
                            help="with --judgments: ridge penalty of the BT fit of theta* on the whole file, for "
                                 "separable data (default: 0)")
        parser.add_argument("--se", choices=("model", "sandwich"), default="model",
                            help="standard errors of the uncertainty-aware ranking diagrams (llm, byo): model (the "
                                 "paper's Phi_11, the default) or sandwich (robust: right when judgments have ties)")
        draw = parser.add_mutually_exclusive_group()
        draw.add_argument("--figures-only", action="store_true",
                          help="run nothing: redraw this study's figures from the stored results in --out")
        draw.add_argument("--no-figures", action="store_true", help="run the study, draw no figures")
    else:
        parser.add_argument("--settings", nargs="+", metavar="NAME",
                            help=f"settings to run (default: A B): built in ({' '.join(sorted(BUILTIN_SETTINGS))}), "
                                 "a name defined in --settings-file, or an import path 'package.module:NAME' of a "
                                 "study.Setting; the name labels every output (docs/settings.md)")
        parser.add_argument("--settings-file", metavar="FILE",
                            help="a TOML or JSON file of named settings, one table per name (e.g. [B20] base = "
                                 "\"B\" n_items = 20 dim = 20); its names can then be given to --settings")
        parser.add_argument("--no-figures", action="store_true",
                            help="run the studies, draw no figures and write no summary (jobs/figures.py draws "
                                 "them later)")
    parser.add_argument("--methods", nargs="+", metavar="METHOD",
                        help=f"methods to run (default: {default_methods}); built in: {' '.join(ALL_METHODS)}; "
                             "or a policy of your own as 'package.module:Name' (importable here and on the Ray "
                             "workers) or a name registered with study.register_policy; a name that does not "
                             "resolve fails before Ray starts")
    parser.add_argument("--reps", type=_positive_int, metavar="N",
                        help=f"replications per setting x method (x M) (default: {default_reps})")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {QUICK_REPS} replications (same seeds as the first "
                             f"{QUICK_REPS} of a full run, so a later full run reuses them)")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help="output directory (default: outputs/); must be an absolute path shared "
                             "with the driver when running as a submitted Ray job")
    parser.add_argument("--seed", type=_seed, default=DEFAULT_SEED, metavar="S",
                        help=f"root seed; replication r of setting X gets a seed derived from (S, study, "
                             f"X, r) (default: {DEFAULT_SEED})")
    fields = ("T, T0, M, alpha, gamma, c_lambda, tie_break, ci_every, ci_level, warmup" if study == "llm"
              else "T, T0, M, p, alpha, gamma, c_lambda, tie_break, ci_every, init_var, warmup, ...")
    parser.add_argument("--set", dest="overrides", action="append", type=_set_pair, default=[],
                        metavar="KEY=VALUE",
                        help="override a Setting field for every setting (repeatable), e.g. a short horizon "
                             "--set T=200 --set T0=80 (T0 stays 200, the paper's, unless set; every field: "
                             f"docs/settings.md; here: {fields})")
    if study in ("msweep", "paper"):
        parser.add_argument("--m-values", nargs="+", type=_positive_int, metavar="M",
                            help="M-sweep grid for every setting (default: A: 1 10 20 30, B: 20 50 80)")
    parser.add_argument("--address", metavar="ADDR", help="Ray cluster to join: 'auto', 'HOST:PORT' or "
                        "'ray://HOST:PORT' (default: RAY_ADDRESS if set, else an embedded local Ray)")
    parser.add_argument("--py-modules", nargs="+", metavar="DIR",
                        help="packages (directories, or .whl files) to ship to the Ray workers, so that a policy "
                             "of your own (--methods mypkg.module:Name) imports there; needed with --address when "
                             "the workers do not have it installed (docs/cluster.md)")
    parser.add_argument("--num-cpus", type=_positive_int, metavar="K",
                        help="CPUs of the embedded local Ray (default: all)")
    parser.add_argument("--trust-policy-code", action="store_true", help="run user policies where the kernel "
                        "cannot confine them: audit hooks only; recorded in the manifest (docs/baselines.md)")
    parser.add_argument("--fresh", action="store_true", help="discard this study's stored results in --out before "
                        "running (otherwise a rerun resumes, computing only missing replications)")
    parser.add_argument("--batch-size", type=_positive_int, metavar="B",
                        help="replications per Ray task (default: automatic; never changes results)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar or progress lines")
    parser.add_argument("--pin-numerics", action="store_true", help="the same numbers on every x86-64 machine: "
                        "pinned BLAS kernel and numpy SIMD (or STUDY_PIN_NUMERICS=1; docs/core.md#reproducibility)")
    parser.add_argument("--verbose", action="store_true",
                        help="print the full traceback of every replication that fails in this run (they are "
                             "stored either way: python -m study.results failures DIR)")
    if study == "paper":
        parser.add_argument("--studies", nargs="+", choices=list(STUDY_NAMES), default=list(STUDY_NAMES),
                            help="which studies to run (default: all three)")
    if study == "baselines":
        parser.add_argument("--studies", nargs="+", choices=list(BASELINE_STUDIES),
                            help=f"which studies to run (default: {' '.join(DEFAULT_BASELINE_STUDIES)}; with "
                                 "--set warmup=W: the A/B and replay studies of W)")
    return parser


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}")
    return value


def _check_out(parser, args):
    """--out usable (a writable directory, created if missing), --address well formed, --num-cpus
    within this machine for an embedded Ray: all before Ray starts."""
    out = Path(args.out).expanduser()
    in_job = bool(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR"))
    if in_job and not out.is_absolute():
        parser.error(f"--out {args.out!r} is relative; inside `ray job submit` the working directory is a "
                     "temporary copy, so give an absolute path on the driver's (head node's) filesystem")
    if args.address is not None:
        addr = str(args.address)
        if not addr or (addr not in ("auto", "local") and not addr.startswith("ray://") and ":" not in addr):
            parser.error(f"--address must be 'auto', 'HOST:PORT' or 'ray://HOST:PORT', got {addr!r}")
    num_cpus = getattr(args, "num_cpus", None)
    if num_cpus is not None and args.address is None and not os.environ.get("RAY_ADDRESS"):
        if num_cpus > max_local_cpus():
            parser.error(f"--num-cpus {num_cpus} exceeds this machine's {max_local_cpus()} CPUs; an embedded "
                         "Ray would start that many worker processes (join a cluster with --address instead)")
    _check_writable(parser, out, args.out)
    for module in getattr(args, "py_modules", None) or ():
        path = Path(module).expanduser()
        if not (path.is_dir() or (path.is_file() and path.suffix in (".whl", ".zip"))):
            parser.error(f"--py-modules {module!r}: not a package directory or a .whl/.zip file")


def _runtime_env(args):
    """The Ray runtime environment of the command line (None: Ray's default), with the pin's
    variables for every worker when the pin is in effect (:mod:`study.runner.numerics`)."""
    modules, pin = getattr(args, "py_modules", None), numerics.worker_environment()
    env = {"py_modules": [str(Path(m).expanduser().resolve()) for m in modules]} if modules else {}
    return {**env, "env_vars": pin} if pin else (env or None)


def _from_command_line(argv) -> bool:
    """Were these arguments this process's own command line (a job script, ``python -m study.cli``),
    rather than a call from Python (which must not be re-executed for the pin)?"""
    if argv is None:
        return True
    argv = list(argv)
    return sys.argv[len(sys.argv) - len(argv):] == argv if argv else len(sys.argv) <= 2


def _check_writable(parser, out: Path, given):
    if out.exists() or out.is_symlink():
        if not out.is_dir():
            parser.error(f"--out {given!r} exists and is not a directory")
    else:
        ancestor = out.absolute()
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            parser.error(f"--out {given!r}: {ancestor} is not a directory")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"--out {given!r} cannot be created ({exc.strerror})")
    probe = out / f"_tmp-probe-{uuid.uuid4().hex}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        parser.error(f"--out {given!r} is not writable ({exc.strerror})")


def make_plans(parser, args, studies, source=None, check=True, command_line=False):
    """Validate everything and build one Plan per study; errors exit with status 2 (also when
    ``check`` and ``--out`` holds results of another configuration).  ``source``: the replay
    source's options (``llm`` job); ``command_line``: the arguments are this process's command line
    (which ``--pin-numerics`` may re-execute)."""
    overrides = {}
    for key, value in args.overrides:
        if key in overrides:
            parser.error(f"--set {key} given twice")
        overrides[key] = value
    reps = QUICK_REPS if args.quick else args.reps
    if args.quick and args.reps is not None:
        parser.error("--quick and --reps are mutually exclusive")
    if getattr(args, "settings_file", None) is not None:
        try:
            load_settings_file(args.settings_file)
        except ValueError as exc:
            parser.error(str(exc))
    plans = []
    for study in studies:
        own_settings = STUDIES[study].source is not None  # a replay: its settings come from its data
        kwargs = {"settings": None if own_settings else getattr(args, "settings", None), "reps": reps,
                  "seed": args.seed, "overrides": overrides}
        if source is not None:
            kwargs["source"] = source
        if study == "coverage" and getattr(args, "studies", None) is not None:
            kwargs["methods"] = None  # paper: coverage is an RB study
        else:
            kwargs["methods"] = args.methods
        if study == "msweep":
            kwargs["m_values"] = getattr(args, "m_values", None)
            kwargs["overrides"] = {k: v for k, v in overrides.items() if k != "M"} \
                if getattr(args, "studies", None) is not None else overrides
        try:
            plans.append(make_plan(study, **kwargs))
        except ValueError as exc:
            parser.error(str(exc))
    _check_out(parser, args)
    try:  # re-executes this command with the pin's environment if numpy was loaded without it
        numerics.apply_pin(getattr(args, "pin_numerics", False), command_line)
    except ValueError as exc:
        parser.error(f"--pin-numerics: {exc}")
    if check and not args.fresh:
        for plan in plans:
            try:
                check_stored(plan, args.out)
            except (ConfigMismatch, StorageError) as exc:
                parser.exit(2, f"{parser.prog}: error: {exc}\n")
    return plans


def _run_plans(plans, args, replicate=None) -> int:
    status = 0
    for plan in plans:
        try:
            options = RunOptions(address=args.address, num_cpus=args.num_cpus, fresh=args.fresh,
                                 replicate=replicate, batch_size=args.batch_size, progress=not args.no_progress,
                                 init_timeout=INIT_TIMEOUT, runtime_env=_runtime_env(args),
                                 trust_policy_code=getattr(args, "trust_policy_code", False))
            report = run_study(plan, args.out, options)
        except (ConfigMismatch, StorageError, ValueError) as exc:  # StorageError: damaged, locked
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except ConnectionError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:  # outside the driver loop (which handles Ctrl-C itself)
            print(f"[{plan.study}] interrupted before its replications were submitted; results stored "
                  f"earlier in {args.out} are intact. Rerun the same command to resume.", file=sys.stderr)
            return 130
        if report.signal:  # stopping: a further Ctrl-C must not turn the exit into a traceback
            import signal
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(report.summary(), file=sys.stderr, flush=True)
        if getattr(args, "verbose", False):
            for failure in report.failures:
                print(f"\n--- traceback of {failure['setting']}/{failure['method']}/M={failure['M']} "
                      f"rep={failure['rep']}:\n{str(failure.get('traceback', '')).rstrip()}", file=sys.stderr)
        if report.signal:
            return report.exit_status
        status = max(status, report.exit_status)
    return status


def main(study: str, argv=None, *, replicate=None) -> int:
    """Run one study from command-line arguments; returns the exit status."""
    parser = build_parser(study)
    args = parser.parse_args(argv)
    plans = make_plans(parser, args, [study], command_line=_from_command_line(argv))
    status = _run_plans(plans, args, replicate)
    if status >= 2 or args.no_figures:  # 2: nothing ran; 130/143: interrupted (rerun resumes, then draws)
        return status
    if not parts(dataset_dirs(args.out, study)["trajectory"]):  # e.g. no cluster reached: nothing to draw
        return status
    return max(status, _draw(args.out, study))


def main_paper(argv=None, *, replicate=None) -> int:
    """Every study, then the figures and the summary table, on one Ray connection."""
    return _main_suite("paper", argv, replicate)


def main_baselines(argv=None, *, replicate=None) -> int:
    """``jobs/baselines.py``: the baselines studies, then the figures and the summary table."""
    return _main_suite("baselines", argv, replicate)


def _baseline_studies(parser, args) -> list:
    """The studies of ``jobs/baselines.py``: ``--studies``, else A/B and the replay under both
    warm-ups, or, with ``--set warmup=W``, the A/B and replay studies of W."""
    warmup = dict(args.overrides).get("warmup")
    if warmup is not None and (not isinstance(warmup, str) or warmup not in WARMUP_STUDIES):
        parser.error(f"--set warmup: warmup must be one of {WARMUPS}, got {warmup!r}")
    if args.studies is not None:
        return list(args.studies)
    return list(DEFAULT_BASELINE_STUDIES) if warmup is None else [WARMUP_STUDIES[warmup], LLM_WARMUP_STUDIES[warmup]]


def _main_suite(name, argv, replicate) -> int:
    parser = build_parser(name)
    args = parser.parse_args(argv)
    if name == "baselines":
        args.studies = _baseline_studies(parser, args)
    plans = make_plans(parser, args, args.studies, command_line=_from_command_line(argv))
    start = time.perf_counter()
    try:
        with study_lock(args.out, run_id=f"{name}-{uuid.uuid4().hex[:6]}"):  # one writer for the whole run
            try:
                conn = connect(args.address, args.num_cpus, log=lambda m: print(m, file=sys.stderr),
                               init_timeout=INIT_TIMEOUT, runtime_env=_runtime_env(args))
            except ConnectionError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            try:
                status = _run_plans(plans, args, replicate)
            finally:
                if conn.started_here:
                    import ray
                    ray.shutdown()
            if status >= 2 or args.no_figures:
                return status
            status = max(status, _draw(args.out))
            if name == "baselines":
                status = max(status, _write_verdicts(args.out))
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"[{name}] finished in {time.perf_counter() - start:.1f} s; outputs in {Path(args.out).resolve()}",
          file=sys.stderr)
    return status


def _draw(out, study=None) -> int:
    """The figures of ``study`` (of every stored study when None) and the summary of everything
    stored under ``out``."""
    try:
        written = draw_all(out) if study is None else draw_study(out, study)
        paths = write_summary(out)
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _report_written(written, paths)
    return 0


def _write_verdicts(out) -> int:
    """OUT/verdicts.md and .csv when both warm-up studies are stored (jobs/baselines.py)."""
    try:
        for path in write_verdicts(out):
            print(f"wrote {path}", file=sys.stderr)
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _report_written(figures, summary) -> None:
    """One line for the figures (by stem: ``regret_A.{pdf,png}``) and one for the summary."""
    stems = list(dict.fromkeys(Path(p).with_suffix("") for p in figures))
    if stems:
        folder = stems[0].parent
        names = ", ".join(s.name for s in stems)
        print(f"figures ({len(stems)}, .pdf and .png) in {folder}: {names}", file=sys.stderr)
    if summary:
        print(f"summary: {', '.join(str(p) for p in summary)}", file=sys.stderr)


def build_figures_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jobs/figures.py",
        description="Redraw every figure (DIR/figures/*.pdf, *.png) and the summary table "
                    "(DIR/summary.md, DIR/summary.csv) from the stored Parquet results alone.")
    parser.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help="directory holding the studies' results (default: outputs/)")
    return parser


def main_figures(argv=None) -> int:
    parser = build_figures_parser()
    args = parser.parse_args(argv)
    if not Path(args.out).is_dir():
        parser.error(f"--out {args.out!r} is not a directory")
    return _draw(args.out)


def main_llm(argv=None) -> int:
    """The LLM-ranking job (``jobs/llm_ranking.py``): run the ``llm`` replay (or ``--arena``, or
    ``--judgments FILE``) on the Ray engine, then draw its figures and the summary table."""
    parser = build_parser("llm")
    args = parser.parse_args(argv)
    study = "arena" if args.arena else ("byo" if args.judgments is not None else "llm")
    if study != "byo" and (args.dim is not None or args.ridge is not None):
        parser.error("--dim and --ridge apply to --judgments only")
    if study == "arena" and args.se != "model":
        parser.error("--se applies to the ranking diagrams of the llm and byo replays; the arena replay (129 models) "
                     "draws none (robust CIs of the Arena ranking: docs/online.md)")
    if args.figures_only and args.fresh:
        parser.error("--figures-only and --fresh are mutually exclusive")
    source = None
    if study == "byo" and Path(args.judgments).is_dir():
        parser.error(f"--judgments {args.judgments!r} is a directory; give a CSV or Parquet file")
    if study == "byo":  # read and validated here, before Ray starts (a bad file exits with status 2)
        source = {"judgments": args.judgments, "dim": args.dim or 10, "ridge": args.ridge or 0.0}
    plan, = make_plans(parser, args, [study], source=source, check=not args.figures_only, command_line=_from_command_line(argv))
    if args.figures_only:  # draw what is stored; compute missing diagram snapshots only for the same configuration
        try:
            check_stored(plan, args.out)
            same = True
        except ConfigMismatch:
            same = False
        except StorageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return _draw_replay(args.out, plan, compute=same, se=args.se)
    start = time.perf_counter()
    status = _run_plans([plan], args)
    if status >= 2 or args.no_figures:
        return status
    status = max(status, _draw_replay(args.out, plan, se=args.se))
    print(f"[{study}] finished in {time.perf_counter() - start:.1f} s; outputs in {Path(args.out).resolve()}",
          file=sys.stderr)
    return status


def _draw_replay(out, plan, compute=True, se="model") -> int:
    """The replay's figures (with ``compute``, computing the ranking-diagram snapshots first if they
    are not stored for this configuration) and the summary table of everything under ``out``."""
    if not parts(dataset_dirs(out, plan.study)["trajectory"]):
        print(f"[{plan.study}] no stored replications under {out}, so no figures (run the study first)",
              file=sys.stderr)
        return 1
    status = 0
    try:
        if compute:
            path = store_diagram_panels(out, plan, log=lambda m: print(m, file=sys.stderr, flush=True), se=se)
            if path is not None:
                print(f"wrote {path}", file=sys.stderr)
        else:
            print(f"[{plan.study}] note: the stored results come from another configuration than these flags; "
                  "drawing them as stored (ranking-diagram snapshots are not recomputed)", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 -- the other figures are still drawn
        print(f"error: the ranking-diagram replication failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        status = 1
    try:
        figures, summary = replay_figures(out, plan.study), write_summary(out)
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _report_written(figures, summary)
    return status


def entry(argv=None) -> int:
    """``python -m study.cli {regret,coverage,msweep,paper,figures,llm} [flags]``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"regret": lambda a: main("regret", a), "coverage": lambda a: main("coverage", a),
                "msweep": lambda a: main("msweep", a), "paper": main_paper, "baselines": main_baselines,
                "figures": main_figures,
                "llm": main_llm}
    if not argv or argv[0] not in commands:
        print(f"usage: python -m study.cli {{{','.join(commands)}}} [flags]  (--help after the command)",
              file=sys.stderr)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(entry())
