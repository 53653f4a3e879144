"""The files the page is made of, all served from this machine: nothing is fetched from outside.

The terminal in the page (xterm.js with Textual's client, its stylesheet and the Roboto Mono font)
comes from the textual-serve package; the page around it, its bar and the font's declaration are
slotop's own (`page/`). textual-serve's own page asks a font service for the font; this one does
not, so it works on a machine without the internet.
"""

from __future__ import annotations

import importlib.metadata
import importlib.resources
from pathlib import Path

from slotop.web.errors import WebError

TEXTUAL_SERVE = "textual-serve"
TEXTUAL_SERVE_MADE_FOR = "1.1.3"
INSTALL_HINT = (
    f"pip install '{TEXTUAL_SERVE}=={TEXTUAL_SERVE_MADE_FOR}' into slotop's environment "
    "(a dependency of slotop: installing slotop again brings it)"
)

TEXTUAL_SERVE_FILES = {
    "js/textual.js": "text/javascript",
    "css/xterm.css": "text/css",
    "fonts/RobotoMono-VariableFont_wght.ttf": "font/ttf",
    "fonts/RobotoMono-Italic-VariableFont_wght.ttf": "font/ttf",
}
"""The files of textual-serve's `static/` folder the page loads, by their path there."""
PAGE_FILES = {"web.js": "text/javascript", "web.css": "text/css"}
PAGE_FOLDER = Path(__file__).with_name("page")
INDEX_FILE = PAGE_FOLDER / "index.html"


def textual_serve_static() -> Path:
    """textual-serve's `static/` folder, checked to hold every file the page loads."""
    try:
        folder = Path(str(importlib.resources.files("textual_serve"))) / "static"
    except ModuleNotFoundError:
        raise WebError(
            f"slotop web needs {TEXTUAL_SERVE} (the terminal the page shows), which is not "
            f"installed: {INSTALL_HINT}"
        ) from None
    missing = [name for name in TEXTUAL_SERVE_FILES if not (folder / name).is_file()]
    if missing:
        version = importlib.metadata.version(TEXTUAL_SERVE)
        raise WebError(
            f"{TEXTUAL_SERVE} {version} lacks {', '.join(missing)} in {folder}; slotop web is "
            f"made for {TEXTUAL_SERVE} {TEXTUAL_SERVE_MADE_FOR}: {INSTALL_HINT}"
        )
    return folder
