"""Opening the store file: SQLite's settings for one writer beside many readers, and clear
errors for a path that is not a store.

Why these settings: WAL lets readers run beside one writer; a busy timeout plus
``BEGIN IMMEDIATE`` (``migrate.write_transaction``) makes concurrent writers, threads or
processes, wait instead of failing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import apsw

from contextplane.errors import StoreError

SQLITE_HEADER: Final[bytes] = b"SQLite format 3\x00"


def _check_header(path: Path) -> None:
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the store file ({exc.strerror}); check the path") from None
    if header and header != SQLITE_HEADER:
        raise StoreError(
            f"{path}: not a SQLite database (the file header is not 'SQLite format 3'); "
            "move it aside or point --db / $CONTEXTPLANE_DB at a memory store"
        )


def connect(
    path: str | os.PathLike[str], *, create: bool = True, busy_timeout_ms: int = 30_000
) -> apsw.Connection:
    """Open a connection with the store's settings, turning "not a database" into ``StoreError``."""
    target = str(path)
    if target != ":memory:":
        file = Path(target)
        if file.exists():
            if file.is_dir():
                raise StoreError(f"{file}: is a directory; the store path must name a file")
            _check_header(file)
        elif not create:
            raise StoreError(f"{file}: no memory store here (create it, or pass create=True)")
        else:
            file.parent.mkdir(parents=True, exist_ok=True)
    flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
    try:
        conn = apsw.Connection(target, flags=flags)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        conn.execute("PRAGMA journal_mode = WAL").fetchone()
        conn.execute("PRAGMA synchronous = NORMAL")
        # Map the whole file (address space only; pages still come from the OS cache): past
        # the map every page is a pread and a copy, and a million memories make a 3 GB file.
        conn.execute("PRAGMA mmap_size = 68719476736")
        conn.execute("PRAGMA cache_size = -65536")
        conn.execute("PRAGMA temp_store = MEMORY")
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        raise StoreError(
            f"{target}: the store file is corrupt or not SQLite ({exc}); restore it from a backup"
        ) from None
    except apsw.CantOpenError:
        raise StoreError(f"{target}: cannot open the store (check the path and permissions)") from None
    return conn
