"""Files as private as the gate: the index, the audit log, verifications and keys hold restricted text and
secrets, so each is created 0600 in a 0700 directory, whatever the umask. A file or directory that already
exists more open (copied, restored from a backup, made by an older version) is left as it is and named in a
warning on the `evidex.files` logger, with the command that closes it: an operator may share it on purpose.

SQLite's `-wal` and `-shm` files take the mode of their database file, so making the database file private
before SQLite opens it is enough.

>>> import tempfile
>>> index = Path(tempfile.mkdtemp()) / "idx"
>>> path = private_file(index / "index.sqlite")
>>> oct(path.stat().st_mode & 0o777), oct(index.stat().st_mode & 0o777)
('0o600', '0o700')
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("evidex.files")

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700


def private_directory(directory: Path) -> Path:
    """Create `directory` (and missing parents) 0700; warn if it exists readable by others."""
    if not directory.exists():
        directory.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        os.chmod(directory, DIRECTORY_MODE)  # mkdir's mode passes through the umask
    else:
        _warn_if_open(directory, DIRECTORY_MODE)
    return directory


def private_file(path: Path) -> Path:
    """Create `path` empty and 0600 in a private directory if it does not exist; warn if it exists more open.
    Call it before anything (SQLite, `open`) creates the file with the umask's mode."""
    private_directory(path.parent)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    except FileExistsError:
        _warn_if_open(path, FILE_MODE)
    else:
        os.fchmod(fd, FILE_MODE)  # os.open's mode passes through the umask too
        os.close(fd)
    return path


def is_more_open(path: Path, mode: int) -> bool:
    """Whether `path` grants any permission to its group or to others that `mode` does not."""
    return bool(stat.S_IMODE(path.stat().st_mode) & 0o077 & ~mode)


_warned: set[Path] = set()  # once per path and process: a server opens the same files again and again


def _warn_if_open(path: Path, mode: int) -> None:
    try:
        if path not in _warned and is_more_open(path, mode):
            _warned.add(path)
            log.warning("%s is readable or writable by other users (mode %s): it holds index data; "
                        "`chmod %s %s` makes it private", path, oct(stat.S_IMODE(path.stat().st_mode))[2:],
                        oct(mode)[2:], path)
    except OSError:  # gone or unreadable: whoever opens it next says so
        pass
