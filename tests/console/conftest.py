"""Fixtures for the console tests: the demo's store (copied per test), a running console on a
free loopback port, an HTTP client that speaks to it as its own pages do, and Chromium.

The store is the one ``contextplane demo`` leaves behind (memories of every kind and state,
six recorded turns with prompt snapshots, an incognito turn and a turn that sheds), built
once per test session and copied for each test, so every test may change it.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextplane import PluginHost
from contextplane.backends.sqlite import SQLiteBackend
from contextplane_console import ConsoleServer, create_app
from contextplane_demo import run_demo
from contextplane_demo.fixtures import SESSION, demo_config

REPO = Path(__file__).resolve().parents[2]
#: Screenshots of the browser tests land here (gitignored), or under $CONTEXTPLANE_TEST_ARTIFACTS.
ARTIFACTS = Path(os.environ.get("CONTEXTPLANE_TEST_ARTIFACTS", REPO / "test-artifacts")) / "console"

#: How the tests launch Chromium: the Debian package, headless, and quiet on the network.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

__all__ = ["SESSION"]


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("console-demo")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the demo's deliberately broken skill warns
        result = run_demo(root, echo=lambda _line: None)
    assert result.ok, result.checks
    return root


class Deployment:
    """One copy of the demo store: its backend and plugin host, as the console opens them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.config = demo_config(root)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.host = PluginHost.from_entry_points(self.config)
        self.backend = SQLiteBackend(root / "memory.sqlite3", config=self.config)

    @property
    def store(self) -> Any:
        return self.backend.memories


@pytest.fixture
def deployment(demo_template: Path, tmp_path: Path) -> Iterator[Deployment]:
    root = tmp_path / "demo"
    shutil.copytree(demo_template, root)
    d = Deployment(root)
    try:
        yield d
    finally:
        d.backend.close()


class Console:
    """A running console and a client that sends what its pages send (the CSRF header)."""

    def __init__(self, server: ConsoleServer, csrf: str) -> None:
        self.server = server
        self.url = server.url
        self.csrf = csrf
        self.http = httpx.Client(base_url=server.url, timeout=30)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.http.get(path, **kw)

    def post(self, path: str, json: Any = None, **kw: Any) -> httpx.Response:
        headers = {"X-CSRF-Token": self.csrf, "Origin": self.url, **kw.pop("headers", {})}
        return self.http.post(path, json=json, headers=headers, **kw)


def start_console(d: Deployment, **options: Any) -> tuple[ConsoleServer, str]:
    csrf = options.pop("csrf_token", "test-csrf-token-0123456789")
    host = options.pop("bind", "127.0.0.1")
    app = create_app(d.backend, d.host, csrf_token=csrf, **options)
    return ConsoleServer(app, host, 0).start(), csrf


@pytest.fixture
def console(deployment: Deployment) -> Iterator[Console]:
    server, csrf = start_console(deployment)
    c = Console(server, csrf)
    try:
        yield c
    finally:
        c.http.close()
        server.stop()


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Debian ``chromium`` binary. Missing is a failure, never a skip: CI installs it with
    .ci/install-browser, and a browser test that skips proves nothing."""
    found = shutil.which("chromium")
    if found is None:
        pytest.fail(
            "chromium is not installed, so the console's browser tests cannot run: "
            "run `bash .ci/install-browser` (apt-get install -y chromium) first"
        )
    return found


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Any]:
    """One Chromium per test module. Not per session: Playwright's sync API keeps an event
    loop running on the main thread while it is open, and later tests call asyncio.run()."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser page that fails the test on any dialog or page error (a stored
    ``<script>`` that ran would open one)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(10_000)
    pg.dialogs = []  # type: ignore[attr-defined]
    pg.errors = []  # type: ignore[attr-defined]

    def on_dialog(dialog: Any) -> None:
        pg.dialogs.append(dialog.message)  # type: ignore[attr-defined]
        dialog.dismiss()

    pg.on("dialog", on_dialog)
    pg.on("pageerror", lambda exc: pg.errors.append(str(exc)))  # type: ignore[attr-defined]
    try:
        yield pg
    finally:
        context.close()


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
