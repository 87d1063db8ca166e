"""Pages checked in a real browser: headless Chromium (Debian's package, which the suite's
set-up installs) renders a page to a screenshot, and what it drew is counted."""

from __future__ import annotations

import subprocess
from pathlib import Path

from PIL import Image

from harness.merge.report import PALETTE


def chromium(page: Path, screenshot: Path, height: int = 3000) -> list[str]:
    """Load page in headless Chromium; returns what its pages wrote to the console."""
    done = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", f"--screenshot={screenshot}", f"--window-size=1000,{height}",
         f"file://{page}"], capture_output=True, text=True, timeout=120)
    assert screenshot.exists(), done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def chart_pixels(screenshot: Path, colours: int = 4) -> int:
    """Pixels drawn in the charts' first line colours."""
    wanted = {tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in PALETTE[:colours]}
    image = Image.open(screenshot).convert("RGB")
    return sum(count for count, colour in image.getcolors(1 << 24) or []
               if any(sum(abs(a - b) for a, b in zip(colour, c, strict=True)) < 30
                      for c in wanted))


# -- a page driven as a user drives it, through the Chrome DevTools Protocol -----------------

# Kept by the suite (CI keeps the folder): screenshots of pages the tests drove.
ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts"

# Every WebSocket frame the page receives, kept as text (the last 2 MB): what a terminal page
# was sent to draw, which a canvas does not show to a DOM query.
RECORD_FRAMES = """
(() => {
  const Native = window.WebSocket;
  window.__frames = "";
  const keep = (text) => { window.__frames = (window.__frames + text).slice(-2000000); };
  const decoder = new TextDecoder();
  window.WebSocket = function (...args) {
    const socket = new Native(...args);
    socket.addEventListener("message", (event) => {
      if (typeof event.data === "string") keep(event.data);
      else if (event.data instanceof ArrayBuffer) keep(decoder.decode(event.data));
      else if (event.data instanceof Blob) event.data.text().then(keep);
    });
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, Native);
})();
"""

KEYS = {"enter": ("Enter", "Enter", 13, "\r"), "escape": ("Escape", "Escape", 27, ""),
        "down": ("ArrowDown", "ArrowDown", 40, ""), "up": ("ArrowUp", "ArrowUp", 38, "")}


class Page:
    """One headless Chromium tab: open a URL, press keys, read what it was sent, screenshot."""

    def __init__(self, size: tuple[int, int] = (1400, 900)) -> None:
        import json
        import tempfile
        import time
        import urllib.request

        import websocket  # websocket-client: stomp.py's own dependency

        self.profile = Path(tempfile.mkdtemp(prefix="harness-chromium-"))
        self.process = subprocess.Popen(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
             f"--window-size={size[0]},{size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.is_file() or not port_file.read_text().strip():
            assert time.monotonic() < deadline, "chromium did not open its DevTools port"
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page = next(t for t in targets if t["type"] == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60,
                                                  suppress_origin=True)
        self.ids = 0
        self.call("Page.enable")
        self.call("Page.addScriptToEvaluateOnNewDocument", source=RECORD_FRAMES)

    def call(self, method: str, **params: object) -> dict:
        import json

        self.ids += 1
        self.socket.send(json.dumps({"id": self.ids, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.ids:
                assert "error" not in message, (method, message["error"])
                return message.get("result", {})

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def evaluate(self, expression: str) -> object:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        return result.get("result", {}).get("value")

    def text(self) -> str:
        """What the page's WebSocket brought, escape sequences and all."""
        return str(self.evaluate("window.__frames || ''"))

    def wait_for(self, *words: str, seconds: float = 60) -> str:
        import re
        import time

        deadline = time.monotonic() + seconds
        while True:
            # Text drawn with styles between its letters: the letters in order are enough.
            seen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", self.text())
            if all(w in seen for w in words):
                return seen
            assert time.monotonic() < deadline, (words, seen[-3000:])
            time.sleep(0.3)

    def press(self, key: str) -> None:
        """A key as a user types it: a printable character, or one of KEYS."""
        # Keys go to the terminal's input, as after a click on the page.
        self.evaluate("document.querySelector('.xterm-helper-textarea')?.focus()")
        if key not in KEYS:  # a character typed: what the page's keypress receives
            self.call("Input.dispatchKeyEvent", type="char", text=key)
            return
        name, code, number, text = KEYS[key]
        down = {"type": "keyDown", "key": name, "code": code, "windowsVirtualKeyCode": number,
                "nativeVirtualKeyCode": number, **({"text": text} if text else {})}
        self.call("Input.dispatchKeyEvent", **down)
        self.call("Input.dispatchKeyEvent", **{**down, "type": "keyUp", "text": ""})

    def screenshot(self, path: Path) -> Path:
        import base64

        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot")["data"]))
        return path

    def status(self, url: str) -> int:
        """The HTTP status the page's own fetch of url gets (cookies and all)."""
        return int(str(self.evaluate(f"fetch({url!r}).then(r => r.status)")))

    def close(self) -> None:
        import shutil

        try:
            self.socket.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
            shutil.rmtree(self.profile, ignore_errors=True)
