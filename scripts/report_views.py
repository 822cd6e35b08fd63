#!/usr/bin/python3
"""Drives Tessera's report page in headless Chromium, over WebDriver.

Used by the page's tests (test/python/test_report_page.py) and to make the
screenshots in docs/report.md, so both show the same views:

    scripts/report_views.py REPORT_DIR OUT_DIR [--tile N]

writes OUT_DIR/<view>.png for each view of REPORT_DIR/report.html. Needs
Debian's chromium and chromium-driver (scripts/install-deps.sh installs
them); speaks WebDriver's HTTP protocol with urllib, so nothing else.
"""

import argparse
import base64
import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# As root and on a closed network: no sandbox, no background connections.
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--window-size=1500,1100"]


def available():
    return os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)


class Browser:
    """One Chromium session: open(url), click, run script, screenshot,
    console errors."""

    def __init__(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.profile = tempfile.mkdtemp(prefix="tessera-chromium-")
        self.driver = subprocess.Popen([CHROMEDRIVER, f"--port={self.port}"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                self._call("GET", "/status")
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("chromedriver did not start")
                time.sleep(0.05)
        capabilities = {"browserName": "chrome",
                        "goog:chromeOptions": {"binary": CHROMIUM,
                                               "args": CHROMIUM_ARGS +
                                               [f"--user-data-dir={self.profile}"]},
                        "goog:loggingPrefs": {"browser": "ALL"}}
        self.session = self._call("POST", "/session",
                                  {"capabilities": {"alwaysMatch": capabilities}})["sessionId"]

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                         method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return json.load(response)["value"]
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"WebDriver {method} {path}: {e.read().decode()[:500]}") from e

    def _session(self, method, path, body=None):
        return self._call(method, f"/session/{self.session}{path}", body)

    def open(self, path):
        """Loads a page and waits for its script to finish; returns the
        seconds it took."""
        start = time.monotonic()
        self._session("POST", "/url", {"url": pathlib.Path(path).resolve().as_uri()})
        while not self.script("return window.reportReady === true"):
            if time.monotonic() - start > 60:
                raise RuntimeError(f"{path} did not finish loading")
            time.sleep(0.02)
        return time.monotonic() - start

    def script(self, source, *args):
        return self._session("POST", "/execute/sync", {"script": source, "args": list(args)})

    def find(self, css):
        found = self._session("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(found.values()))

    def find_all(self, css):
        return [next(iter(e.values())) for e in
                self._session("POST", "/elements", {"using": "css selector", "value": css})]

    def click(self, css):
        """A real click (scrolled into view, hit-tested), as a user's."""
        self._session("POST", f"/element/{self.find(css)}/click", {})

    def text(self, css):
        return self._session("GET", f"/element/{self.find(css)}/text")

    def console_errors(self):
        return [entry for entry in self._session("POST", "/se/log", {"type": "browser"})
                if entry["level"] == "SEVERE"]

    def screenshot(self, path):
        pathlib.Path(path).write_bytes(base64.b64decode(self._session("GET", "/screenshot")))

    def close(self):
        try:
            if getattr(self, "session", None):
                self._session("DELETE", "")
        finally:
            self.driver.terminate()
            self.driver.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


VIEWS = ["summary", "memory", "liveness", "operations", "pipeline", "execution"]


def screenshot_views(browser, page, out_dir, tile=None):
    """Opens `page` and writes a screenshot of each view it has
    (OUT_DIR/<view>.png); in the memory view, `tile` is clicked first.
    Returns the views."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    browser.open(page)
    shown = []
    for view in VIEWS:
        if not browser.find_all(f"#tab-{view}"):
            continue
        browser.click(f"#tab-{view}")
        if view == "memory" and tile is not None:
            browser.click(f'.tile[data-tile="{tile}"]')
            browser.script("window.scrollTo(0, 0)")
        browser.screenshot(out_dir / f"{view}.png")
        shown.append(view)
    return shown


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--tile", type=int, help="the tile to click in the memory view")
    parser.add_argument("--prefix", default="", help="prefix of the screenshots' names")
    args = parser.parse_args()
    with Browser() as browser:
        views = screenshot_views(browser, pathlib.Path(args.report_dir) / "report.html",
                                 args.out_dir, args.tile)
        errors = browser.console_errors()
    if args.prefix:
        for view in views:
            src = pathlib.Path(args.out_dir) / f"{view}.png"
            src.rename(src.with_name(f"{args.prefix}{view}.png"))
    print("views:", ", ".join(views))
    if errors:
        raise SystemExit(f"console errors: {errors}")


if __name__ == "__main__":
    main()
