"""Named settings beyond the paper's A and B: registered in Python or defined in a settings file.

A named setting is a :class:`~study.simulation.settings.Setting` whose ``name`` is its label in
every output (the ``setting`` column, figure titles, the summary, the manifest) and keys its
replications' seeds.  Three ways to name one:

* ``study.register_setting(study.SETTINGS["B"].replace(name="B20", n_items=20, dim=20))`` in Python;
* a settings file (TOML or JSON, :func:`load_settings_file`), one table per name, e.g.::

      [B20]
      base = "B"          # start from a built-in or an earlier name (optional)
      n_items = 20
      dim = 20

  given to every job with ``--settings-file FILE --settings B20``;
* an import path ``"package.module:NAME"`` of a Setting object (``--settings mypkg.settings:BIG``).

The built-in names (``A``, ``B``) cannot be redefined; registering a name twice with the same
fields is allowed (a job may read its settings file more than once), with different fields it is
refused unless ``replace=True``.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from .._util import import_object
from .settings import BUILTIN_SETTINGS, SETTINGS, Setting, _NAMED

__all__ = ["register_setting", "unregister_setting", "registered_settings", "load_settings_file", "setting_from_path",
           "NAME_PATTERN"]

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")  # a label that is also a safe file-name part
MAX_FILE_BYTES = 16 * 2 ** 20  # a settings file larger than this holds data, not settings
MAX_NESTING = 4  # a field's value: a number, a string, a list of rows (edges, truth) at most


def _field_of(exc, fields) -> str:
    """", field 'M'" when the message is about one field of ``fields`` (it starts with its name),
    else the fields it names, else ""."""
    text = str(exc)
    named = [f for f in fields if re.match(rf"(unknown setting field\(s\) \[)?'?{re.escape(f)}\b", text)]
    return f", field {named[0]!r}" if len(named) == 1 else ""


def _same(a: Setting, b: Setting) -> bool:
    return json.dumps(a.to_dict(), sort_keys=True, default=str) == json.dumps(b.to_dict(), sort_keys=True, default=str)


def register_setting(setting: Setting, *, replace: bool = False) -> Setting:
    """Make ``setting`` available under ``setting.name`` to :func:`study.resolve_setting`, the
    runner (``make_plan(settings=[...])``) and every job's ``--settings``.

    Parameters
    ----------
    setting : Setting
        A validated setting; its ``name`` (letters, digits, ``_.+-``; at most 64 characters) is
        the label of every output and keys the replications' seeds.
    replace : bool
        Allow redefining a name registered earlier with other fields.

    Returns
    -------
    Setting
        ``setting`` itself.

    Raises
    ------
    ValueError
        A bad name, a built-in name, or a name already registered with other fields.

    Examples
    --------
    >>> import study
    >>> big = study.register_setting(study.SETTINGS["B"].replace(name="B-doc", M=80))
    >>> study.resolve_setting("B-doc").M
    80
    >>> study.unregister_setting("B-doc")
    """
    if not isinstance(setting, Setting):
        raise ValueError(f"register_setting expects a study.Setting, got {type(setting).__name__}")
    name = setting.name
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ValueError(f"setting name {name!r}: use 1-64 letters, digits or _.+- (starting with a letter or "
                         "digit); the name labels every output and is part of file names")
    if name in BUILTIN_SETTINGS:
        raise ValueError(f"setting name {name!r} is built in (the paper's); choose another name")
    old = _NAMED.get(name)
    if old is not None and not replace and not _same(old, setting):
        raise ValueError(f"setting {name!r} is already registered with other fields; pass replace=True or "
                         "choose another name")
    _NAMED[name] = setting
    return setting


def unregister_setting(name: str) -> None:
    """Remove a registered setting (the built-in ones stay)."""
    if name in BUILTIN_SETTINGS:
        raise ValueError(f"setting {name!r} is built in and cannot be removed")
    _NAMED.pop(name, None)


def registered_settings() -> dict:
    """{name: Setting} of the settings registered beyond the built-in ones."""
    return {k: v for k, v in SETTINGS.items() if k not in BUILTIN_SETTINGS}


def setting_from_path(path: str) -> Setting:
    """The Setting named by an import path ``"package.module:NAME"``, registered under its own name."""
    obj = import_object(path, what="setting")
    if not isinstance(obj, Setting):
        raise ValueError(f"setting {path!r} is a {type(obj).__name__}, not a study.Setting")
    return register_setting(obj)


def _no_duplicates(pairs) -> dict:
    """A JSON object, refusing a key given twice (json keeps the last silently)."""
    out = {}
    for key, value in pairs:
        if key in out:
            what = f"table [{key}]" if isinstance(value, dict) else f"field {key!r}"
            raise _Duplicate(f"{what} is given twice (JSON would keep the last silently)")
        out[key] = value
    return out


class _Duplicate(ValueError):
    pass


def _parse(path: Path, text: str):
    suffix = path.suffix.lower()
    if suffix == ".json":
        return json.loads(text, object_pairs_hook=_no_duplicates), "JSON"
    if suffix == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise ValueError(f"settings file {path}: TOML needs Python >= 3.11; write it as JSON instead") from None
        return tomllib.loads(text), "TOML"
    raise ValueError(f"settings file {path}: expected a .toml or .json file")


def _read_table(path: Path) -> dict:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"settings file {path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ValueError(f"settings file {path}: {len(raw)} bytes; a settings file is at most {MAX_FILE_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"settings file {path}: not UTF-8 text (byte {raw[exc.start]:#04x} at position "
                         f"{exc.start})") from None
    kind = "JSON" if path.suffix.lower() == ".json" else "TOML"
    try:
        data, kind = _parse(path, text)
    except _Duplicate as exc:
        raise ValueError(f"settings file {path}: {exc}") from None
    except RecursionError:
        raise ValueError(f"settings file {path}: nested too deeply to be a settings file (a table of fields)") from None
    except ValueError as exc:  # JSONDecodeError, TOMLDecodeError, an integer too long to read
        if str(exc).startswith(f"settings file {path}"):
            raise
        raise ValueError(f"settings file {path}: not valid {kind} ({exc})") from None
    if not isinstance(data, dict) or not data or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"settings file {path}: expected one table per setting name, e.g. [B20] base = \"B\" "
                         "n_items = 20")
    return data


def _check_depth(value, path, name, field, depth=0):
    """A field's value nested at most a few levels (a list of rows): deeper would only exhaust the
    stack of whatever reads it."""
    if depth > MAX_NESTING:
        raise ValueError(f"settings file {path}, [{name}], field {field!r}: nested deeper than {MAX_NESTING} levels")
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_depth(item, path, name, field, depth + 1)
    elif isinstance(value, dict):
        raise ValueError(f"settings file {path}, [{name}], field {field!r}: a table is not a value of a setting field")


def load_settings_file(path) -> list:
    """Read a settings file (``.toml`` or ``.json``: one table per name) and register every setting
    in it, in file order; returns their names.

    A table's keys are :class:`~study.simulation.settings.Setting` fields, plus an optional
    ``base``: a built-in name or one defined earlier (in the file or in Python) whose fields the
    table overrides.  Without ``base``, ``n_items`` and ``dim`` are required.  Every setting is
    validated as it is read; a bad entry raises ``ValueError`` naming the file and the table.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"settings file {path}: no such file")
    names = []
    for name, table in _read_table(path).items():
        fields = dict(table)
        allowed = {f.name for f in dataclasses.fields(Setting)} - {"name"}
        for field, value in fields.items():
            if field != "base" and field not in allowed:
                raise ValueError(f"settings file {path}, [{name}], field {field!r}: not a setting field (the table's "
                                 f"name is the setting's name); allowed: base, {', '.join(sorted(allowed))}")
            _check_depth(value, path, name, field)
        base = fields.pop("base", None)
        try:
            if base is not None:
                if base not in SETTINGS:
                    raise ValueError(f"unknown base {base!r}; known: {sorted(SETTINGS)}")
                setting = SETTINGS[base].replace(name=name, **fields)
            else:
                setting = Setting(name=name, **fields)
            register_setting(setting)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise ValueError(f"settings file {path}, [{name}]{_field_of(exc, fields)}: {exc}") from None
        names.append(name)
    return names
