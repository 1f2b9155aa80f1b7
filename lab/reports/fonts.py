"""The PDF report's fonts: DejaVu Sans and DejaVu Sans Mono, embedded as TrueType subsets.

    from lab.reports.fonts import SANS, BOLD, MONO, register
    register()          # idempotent; raises ToolMissingError naming the font package

The 14 standard PDF fonts are never embedded, so a reader's viewer substitutes its own and
the text a reviewer sees depends on their machine; a font embedded in the file does not.
The files come from Debian's ``fonts-dejavu-core`` and, for the oblique faces,
``fonts-dejavu-extra`` (the one table in :mod:`lab.host.tools` names them; the lab image
pins both). Subset names are numbered, not random, so embedding keeps the PDF's bytes
reproducible.
"""

from __future__ import annotations

from pathlib import Path

from reportlab.lib.fonts import addMapping
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont

from lab.errors import ToolMissingError
from lab.host.tools import FONT_DIR, FONT_PACKAGES

SANS = "DejaVuSans"
BOLD = "DejaVuSans-Bold"
ITALIC = "DejaVuSans-Oblique"
BOLD_ITALIC = "DejaVuSans-BoldOblique"
MONO = "DejaVuSansMono"

#: reportlab font name -> file name under FONT_DIR
FILES: dict[str, str] = {
    SANS: "DejaVuSans.ttf",
    BOLD: "DejaVuSans-Bold.ttf",
    ITALIC: "DejaVuSans-Oblique.ttf",
    BOLD_ITALIC: "DejaVuSans-BoldOblique.ttf",
    MONO: "DejaVuSansMono.ttf",
}


def font_path(name: str, directory: Path | None = None) -> Path:
    """The TrueType file of font ``name``; ToolMissingError, naming the package, if absent."""
    path = (directory or Path(FONT_DIR)) / FILES[name]
    if not path.is_file():
        package = FONT_PACKAGES.get(f"{FONT_DIR}/{FILES[name]}", "fonts-dejavu-core")
        raise ToolMissingError(
            f"The PDF report embeds the font {FILES[name]}, which is not at {path}: "
            f"install the Debian package {package} (apt-get install {package})."
        )
    return path


def register(directory: Path | None = None) -> None:
    """Register every font with reportlab once (later calls do nothing)."""
    registered = set(pdfmetrics.getRegisteredFontNames())
    if all(name in registered for name in FILES):
        return
    for name in FILES:
        if name not in registered:
            pdfmetrics.registerFont(TTFont(name, str(font_path(name, directory))))
    # <b> and <i> in paragraphs pick the family's bold and oblique faces; the mono face has
    # no bold one (digests and raw output are never bold)
    addMapping(SANS, 0, 0, SANS)
    addMapping(SANS, 1, 0, BOLD)
    addMapping(SANS, 0, 1, ITALIC)
    addMapping(SANS, 1, 1, BOLD_ITALIC)
    for bold, italic in ((1, 0), (0, 1), (1, 1), (0, 0)):
        addMapping(MONO, bold, italic, MONO)
