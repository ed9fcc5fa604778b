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

import json
import re
from pathlib import Path

from .._util import import_object
from .settings import BUILTIN_SETTINGS, SETTINGS, Setting, _NAMED

__all__ = ["register_setting", "unregister_setting", "registered_settings", "load_settings_file", "setting_from_path",
           "NAME_PATTERN"]

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")  # a label that is also a safe file-name part


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


def _read_table(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"settings file {path}: not valid JSON ({exc})") from None
    elif path.suffix.lower() == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise ValueError(f"settings file {path}: TOML needs Python >= 3.11; write it as JSON instead") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"settings file {path}: not valid TOML ({exc})") from None
    else:
        raise ValueError(f"settings file {path}: expected a .toml or .json file")
    if not isinstance(data, dict) or not data or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"settings file {path}: expected one table per setting name, e.g. [B20] base = \"B\" "
                         "n_items = 20")
    return data


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
        base = fields.pop("base", None)
        try:
            if base is not None:
                if base not in SETTINGS:
                    raise ValueError(f"unknown base {base!r}; known: {sorted(SETTINGS)}")
                setting = SETTINGS[base].replace(name=name, **fields)
            else:
                setting = Setting(name=name, **fields)
            register_setting(setting)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"settings file {path}, [{name}]: {exc}") from None
        names.append(name)
    return names
