"""Opening the store file: SQLite's settings for one writer beside many readers, clear errors
for a path that is not a store, and the one wording of every SQLite failure.

Why these settings: WAL lets readers run beside one writer; a busy timeout plus
``BEGIN IMMEDIATE`` (``migrate.write_transaction``) makes concurrent writers, threads or
processes, wait instead of failing.

Why the order of the checks: a file that must be refused (another application's database,
a store written by a newer contextplane) is refused before anything is written to it, not
even its journal mode; a file that cannot be written (its permissions, its directory's, or
``read_only=True``) is opened read-only and left exactly as it is, so reading works and
every write is refused with a clear message. A store whose directory cannot be written at all
(a read-only filesystem) is opened immutable: WAL's side files cannot be made there.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final
from urllib.parse import quote

import apsw

from contextplane.errors import StoreError
from contextplane.store.migrate import check_openable

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


def writable(path: Path) -> bool:
    """Whether SQLite could write ``path``: the file and its directory (for the journal)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def _frozen(path: Path) -> bool:
    """Whether ``path`` must be read as an immutable file: its directory cannot be written (a
    read-only filesystem, a read-only mount), so SQLite cannot create the ``-wal``/``-shm``
    side files a WAL store is read through, and without them it refuses to open at all.
    Immutable, it reads the main file alone, which is the whole store when no ``-wal`` file
    holds writes not yet copied into it; when one does, reading the file alone would miss
    them, so that case is refused by name."""
    if os.access(path.parent, os.W_OK | os.X_OK):
        return False
    wal = path.with_name(path.name + "-wal")
    shm = path.with_name(path.name + "-shm")
    if shm.exists():
        return False  # both side files there: SQLite reads them as they are
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreError(
            f"{path}: the store is on a read-only filesystem and {wal.name} beside it holds writes not "
            "yet in the file (its writer did not close it), which cannot be read without writing; "
            "copy the directory somewhere writable and open the copy"
        )
    return True


def _immutable_uri(path: Path) -> str:
    """``file:`` URI of ``path`` with ``immutable=1``: no locks, no side files, no journal."""
    return f"file:{quote(str(path.resolve()))}?immutable=1"


def is_read_only(conn: apsw.Connection) -> bool:
    """Whether ``conn`` was opened read-only (see ``connect``)."""
    if conn.readonly("main"):
        return True
    row = conn.execute("PRAGMA query_only").fetchone()
    return bool(row and row[0])


def store_error(path: str, exc: apsw.Error, doing: str) -> StoreError:
    """A SQLite failure as one sentence naming the store, what failed and what to do; nothing
    is lost in any of these cases (SQLite rolled the transaction back)."""
    if isinstance(exc, apsw.FullError):
        return StoreError(
            f"{path}: the disk is full (or the database reached its size limit), so {doing} failed; "
            "nothing is lost (what was not committed was rolled back); free some space and try again"
        )
    if isinstance(exc, apsw.ReadOnlyError):
        return StoreError(
            f"{path}: the store is read-only, so {doing} failed and nothing was written; make the "
            "file and its directory writable, or work on a writable copy"
        )
    if isinstance(exc, apsw.CorruptError | apsw.NotADBError):
        return StoreError(
            f"{path}: the store file is corrupt ({exc}), so {doing} failed; restore it from a backup "
            f"(`sqlite3 {path} .recover` salvages what it can into a new file)"
        )
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return StoreError(
            f"{path}: the store is locked by another process, so {doing} failed and nothing was "
            "written; try again when that process is done"
        )
    if isinstance(exc, apsw.ConstraintError):
        return StoreError(f"{path}: a constraint of the store refused {doing} ({exc}); nothing was written")
    if isinstance(exc, apsw.SQLError):
        return StoreError(
            f"{path}: the store's tables are not what this contextplane expects ({exc}), so {doing} "
            f"failed; run `contextplane migrate --db {path}`, or point at a contextplane store"
        )
    return StoreError(
        f"{path}: {doing} failed: {type(exc).__name__}: {exc}; check the file, its disk and its permissions"
    )


@contextlib.contextmanager
def temp_objects(conn: apsw.Connection) -> Iterator[None]:
    """Lift ``query_only`` (an inspecting connection's, see ``connect``) while ``conn`` builds or
    drops TEMP objects, which it refuses too; the store file itself is never written here."""
    row = conn.execute("PRAGMA query_only").fetchone()
    if not (row and row[0]):
        yield
        return
    conn.execute("PRAGMA query_only = 0")
    try:
        yield
    finally:
        conn.execute("PRAGMA query_only = 1")


def no_store(file: str | os.PathLike[str]) -> StoreError:
    """The one wording of "there is no store at this path" (a typo must not make a fresh one)."""
    return StoreError(
        f"{file}: no store here (no such file), and nothing was created; pass --db, or set "
        "store.path or $CONTEXTPLANE_DB, to name an existing one (`contextplane memory add` "
        "creates a store)"
    )


def connect(
    path: str | os.PathLike[str],
    *,
    create: bool = True,
    busy_timeout_ms: int = 30_000,
    read_only: bool = False,
) -> apsw.Connection:
    """Open a connection with the store's settings, turning "not a database" into ``StoreError``.

    ``read_only`` (or a file that cannot be written) opens the file read-only and changes
    nothing in it; ``create=False`` refuses a path with no file instead of creating one."""
    target = str(path)
    query_only = False
    if target != ":memory:":
        file = Path(target)
        if file.exists():
            if file.is_dir():
                raise StoreError(f"{file}: is a directory; the store path must name a file")
            _check_header(file)
            # Reading a writable file: opened read-write but query-only, because SQLite's
            # read-only connection leaves the -wal/-shm side files of a WAL store behind,
            # while the last read-write connection to close removes them (nothing is written).
            query_only = read_only and writable(file)
            read_only = (read_only and not query_only) or not writable(file)
        elif not create or read_only:
            raise no_store(file)
        else:
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"{file}: cannot create the store's directory ({exc.strerror}); check the path"
                ) from None
    if read_only:
        flags = apsw.SQLITE_OPEN_READONLY
    else:
        flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
    name = target
    if read_only and target != ":memory:" and _frozen(Path(target)):
        name, flags = _immutable_uri(Path(target)), flags | apsw.SQLITE_OPEN_URI
    conn: apsw.Connection | None = None
    try:
        conn = apsw.Connection(name, flags=flags)
        if query_only:
            conn.execute("PRAGMA query_only = 1")
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        check_openable(conn, target)  # before anything is written, the journal mode included
        mode = conn.execute("PRAGMA journal_mode").fetchone()
        if not read_only and not query_only and (mode is None or str(mode[0]).lower() != "wal"):
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
        conn.execute("PRAGMA synchronous = NORMAL")
        # Map the whole file (address space only; pages still come from the OS cache): past
        # the map every page is a pread and a copy, and a million memories make a 3 GB file.
        conn.execute("PRAGMA mmap_size = 68719476736")
        conn.execute("PRAGMA cache_size = -65536")
        conn.execute("PRAGMA temp_store = MEMORY")
    except StoreError:
        if conn is not None:
            conn.close()
        raise
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        if conn is not None:
            conn.close()
        raise StoreError(
            f"{target}: the store file is corrupt or not SQLite ({exc}); restore it from a backup"
        ) from None
    except apsw.CantOpenError:
        if conn is not None:
            conn.close()
        raise StoreError(f"{target}: cannot open the store (check the path and permissions)") from None
    except apsw.Error as exc:
        if conn is not None:
            conn.close()
        raise store_error(target, exc, "opening it") from None
    return conn
