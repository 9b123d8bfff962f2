"""Engines and sessions: plain database URLs in, a configured SQLAlchemy engine out.

Users type ``sqlite:///./horismos.db`` or ``postgresql://user@host:5432/db``; the driver is
chosen here (psycopg 3 for PostgreSQL, the stdlib ``sqlite3`` for SQLite).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

#: How long a SQLite writer waits for another writer before failing, in milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 15_000
#: PostgreSQL connections kept open per process (and as many more opened under bursts).
POOL_SIZE = 10
#: How long opening a connection may take unless the caller says otherwise, in seconds
#: (the driver's own default is 130 s: a database that accepts and never answers would hang
#: every caller that long).
DEFAULT_CONNECT_TIMEOUT = 10.0
#: libpq treats a connect timeout under 2 s as 2 s.
_MIN_CONNECT_TIMEOUT = 2


def normalize_url(url: str | URL) -> URL:
    """Pick the driver for a user-typed URL (``postgres://`` and ``postgresql://`` → psycopg 3)."""
    parsed = make_url(url) if isinstance(url, str) else url
    backend = parsed.get_backend_name()
    if backend in ("postgres", "postgresql"):
        return parsed.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+pysqlite")
    raise ValueError(
        f"unsupported database URL scheme {parsed.drivername!r}: use sqlite:///FILE "
        "or postgresql://USER@HOST:PORT/DB"
    )


def _configure_sqlite(engine: Engine) -> None:
    """Foreign keys on, a busy timeout, WAL, and transactions that never fail on lock upgrade.

    SQLite allows one writer at a time; every transaction here queues for that lock when it
    begins, so concurrent requests wait their turn instead of failing. Within one process the
    queue is the engine's single pooled connection (``make_engine``), so waiters are woken in
    order the moment it is free; the busy timeout only arbitrates between processes. PostgreSQL
    is the backend for real concurrency.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the sqlite3 module, decide when transactions begin.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA journal_mode = WAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # IMMEDIATE takes the write lock up front, waiting up to the busy timeout. A deferred
        # transaction that read first fails at once ("database is locked") when it later
        # writes after another connection committed: SQLite cannot upgrade a stale snapshot.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _is_file(url: URL) -> bool:
    """Whether a SQLite URL names a database file (not an in-memory database)."""
    database = url.database or ""
    return database not in ("", ":memory:") and "mode=memory" not in str(url.query)


def _postgres_connect_args(
    connect_timeout: float, statement_timeout: float | None
) -> dict[str, Any]:
    """libpq parameters that bound every wait on the server.

    ``connect_timeout`` ends a connection attempt that gets no answer (a server that accepts
    TCP and never speaks). ``statement_timeout`` and ``lock_timeout`` make the server cancel
    a statement that runs or waits for a lock too long. Keepalives and ``tcp_user_timeout``
    drop a connection whose peer vanished mid-statement (a network partition): without them a
    read on it waits for ever."""
    args: dict[str, Any] = {
        "connect_timeout": max(_MIN_CONNECT_TIMEOUT, math.ceil(connect_timeout)),
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 3,
    }
    if statement_timeout is not None:
        ms = max(1, int(statement_timeout * 1000))
        args["options"] = f"-c statement_timeout={ms} -c lock_timeout={ms}"
        args["tcp_user_timeout"] = ms + 5_000
    return args


def make_engine(
    url: str | URL,
    *,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    statement_timeout: float | None = None,
    pool_timeout: float | None = None,
    **kwargs: Any,
) -> Engine:
    """An engine for ``url`` with the right driver, per-backend settings and bounded waits.

    ``connect_timeout`` bounds opening a connection, ``statement_timeout`` (PostgreSQL, None:
    unbounded, e.g. for migrations) one statement or lock wait, ``pool_timeout`` the wait for a
    free pooled connection (SQLAlchemy's default is 30 s). ``hide_parameters``: a failing
    statement is logged and raised without its bound values, which carry patient facts."""
    normalized = normalize_url(url)
    kwargs.setdefault("hide_parameters", True)
    if pool_timeout is not None:
        kwargs.setdefault("pool_timeout", pool_timeout)
    if normalized.get_backend_name() == "sqlite":
        if _is_file(normalized):
            # One writer at a time is all SQLite allows. One pooled connection per process makes
            # this process's transactions queue in order on the pool (woken when it is free)
            # instead of polling the file lock with SQLite's busy handler, whose back-off sleeps
            # (up to 100 ms a try) made concurrent hook calls wait for seconds.
            kwargs.setdefault("pool_size", 1)
            kwargs.setdefault("max_overflow", 0)
            kwargs.setdefault("pool_timeout", SQLITE_BUSY_TIMEOUT_MS / 1000)
        engine = create_engine(
            normalized,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            **kwargs,
        )
        _configure_sqlite(engine)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    # Enough pooled connections for the requests one process serves at once: beyond
    # pool_size, each checkout opens a new server connection and closes it on return.
    kwargs.setdefault("pool_size", POOL_SIZE)
    kwargs.setdefault("max_overflow", POOL_SIZE)
    kwargs.setdefault("connect_args", _postgres_connect_args(connect_timeout, statement_timeout))
    engine = create_engine(normalized, **kwargs)
    _CONNECT_ARGS[engine] = (dict(kwargs["connect_args"]), kwargs.get("pool_timeout", 30.0))
    return engine


#: how the run store's connections name themselves to PostgreSQL (``pg_stat_activity``) unless
#: the database URL names them (``?application_name=…``)
RUN_STORE_APPLICATION = "horismos run store"

#: what each PostgreSQL engine ``make_engine`` built connects with, for :func:`pg_pool`
_CONNECT_ARGS: weakref.WeakKeyDictionary[Engine, tuple[dict[str, Any], float]] = (
    weakref.WeakKeyDictionary()
)


class RunConnections:
    """The run store's own PostgreSQL connections (:func:`pg_pool`): autocommit (a statement is
    its own transaction), handed out without a check (the caller retries once on a dead one),
    at most :data:`POOL_SIZE` kept idle and twice that open at once.

    Not psycopg's pool: with the server down, its callers wait out the pool timeout while it
    retries in the background; here a connection that cannot be opened fails the call at
    once, as the engine's does, and the hook answers a prompt 503."""

    def __init__(self, conninfo: str, kwargs: dict[str, Any], *, timeout: float) -> None:
        self.conninfo = conninfo
        self.kwargs = kwargs
        self.timeout = timeout
        self._idle: list[Any] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(2 * POOL_SIZE)
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[Any]:
        import psycopg

        if not self._slots.acquire(timeout=self.timeout):
            raise psycopg.OperationalError(
                f"no run store connection came free within {self.timeout:g} s"
            )
        conn: Any = None
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                conn = psycopg.connect(self.conninfo, **self.kwargs)
            yield conn
        finally:
            self._put(conn)
            self._slots.release()

    def _put(self, conn: Any) -> None:
        if conn is None:
            return
        from psycopg.pq import TransactionStatus

        fine = not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
        with self._lock:
            if fine and not self._closed and len(self._idle) < POOL_SIZE:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def fetchone(self, query: str, params: dict[str, Any]) -> tuple[Any, bool]:
        """``(the first row of query, whether it was sent twice)``: prepared on the
        connection; a connection the server closed (a restart, an idle timeout) is dropped
        and the statement sent once more on a fresh one, as a pre-ping would have spared.
        psycopg's errors come back as SQLAlchemy's, as from the engine."""
        import psycopg

        for attempt in (1, 2):
            try:
                with self.connection() as conn:
                    return conn.execute(query, params, prepare=True).fetchone(), attempt == 2
            except psycopg.Error as exc:
                if attempt == 1 and _dead_connection(exc):
                    continue
                raise sa_exc.DBAPIError.instance(None, None, exc, psycopg.Error, True) from exc
        raise AssertionError("unreachable")


def _dead_connection(exc: Exception) -> bool:
    """Whether ``exc`` says the connection itself is gone (nothing about the statement): no
    SQLSTATE (the socket closed), a connection exception (08…) or the server shutting down
    the session (57P…)."""
    import psycopg

    state = getattr(exc, "sqlstate", None)
    return isinstance(exc, psycopg.OperationalError) and (
        state is None or str(state).startswith(("08", "57P"))
    )


#: each PostgreSQL engine's run store connections (they hold no reference to the engine)
_RUN_CONNECTIONS: weakref.WeakKeyDictionary[Engine, RunConnections] = weakref.WeakKeyDictionary()
_RUN_CONNECTIONS_LOCK = threading.Lock()


def run_connections(engine: Engine) -> RunConnections:
    """The run store's connections to ``engine``'s PostgreSQL database, opened as needed and
    closed with the engine (:func:`close_run_connections`, or when it is collected)."""
    with _RUN_CONNECTIONS_LOCK:
        found = _RUN_CONNECTIONS.get(engine)
        if found is None:
            found = _RUN_CONNECTIONS[engine] = pg_pool(engine)
            weakref.finalize(engine, found.close)
        return found


def close_run_connections(engine: Engine) -> None:
    """Close ``engine``'s run store connections, if any were opened."""
    with _RUN_CONNECTIONS_LOCK:
        found = _RUN_CONNECTIONS.pop(engine, None)
    if found is not None:
        found.close()


def pg_pool(engine: Engine) -> RunConnections:
    """The run store's connections to ``engine``'s PostgreSQL database, with the engine's
    bounded waits (:class:`RunConnections`). The caller closes them."""
    args, timeout = _CONNECT_ARGS.get(engine) or (_postgres_connect_args(10.0, None), 30.0)
    url = engine.url.set(drivername="postgresql")
    named = {} if "application_name" in url.query else {"application_name": RUN_STORE_APPLICATION}
    return RunConnections(
        url.render_as_string(hide_password=False),
        {**args, "autocommit": True, **named},
        timeout=timeout,
    )


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions whose loaded rows stay readable after commit (routes map them afterwards)."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One transaction: commit when the block succeeds, roll back when it raises."""
    with Session(engine, expire_on_commit=False) as session, session.begin():
        yield session


#: Failures that mean "the database cannot serve now" (down, unreachable, too slow, pool
#: exhausted, locked), not "this statement is wrong": a caller answers 503 for them.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (
    sa_exc.OperationalError,
    sa_exc.InterfaceError,
    sa_exc.TimeoutError,
    sa_exc.DisconnectionError,
)


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database is unavailable (down, hung, busy), not a bug."""
    return isinstance(exc, UNAVAILABLE_ERRORS)


def describe_error(exc: BaseException) -> str:
    """A log line for a database failure without the data it concerns.

    A driver's message can go on for lines of context quoting the statement's data (PostgreSQL's
    ``CONTEXT: JSON data, line 1: …`` quotes the patient text it choked on); only the class, the
    SQLSTATE and the first line of the driver's own message are kept."""
    orig = getattr(exc, "orig", None) or exc
    first = (str(orig).strip().splitlines() or [""])[0][:200]
    state = getattr(orig, "sqlstate", None)
    return (
        f"{type(exc).__name__}" + (f" [{state}]" if state else "") + (f": {first}" if first else "")
    )


def insert_for(dialect: str, table: Any) -> postgresql.Insert | sqlite.Insert:
    """An INSERT into ``table`` that supports ``on_conflict_do_*`` on the backend ``dialect``
    names (``postgresql`` or ``sqlite``)."""
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database backend {dialect!r}")


def dialect_insert(session: Session | Connection, table: Any) -> Any:
    """An INSERT that supports ``on_conflict_do_*`` on the session's backend."""
    bind = session.get_bind() if isinstance(session, Session) else session
    return insert_for(bind.dialect.name, table)
