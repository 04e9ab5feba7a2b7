"""Small file helpers shared by the readers."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError


def read_text(path: Path) -> str:
    """A whole file as text (UTF-8, BOM allowed); unreadable or binary files raise :class:`InputError`."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(path, "not UTF-8 text (binary or corrupted file?)") from None
