"""A hosted Environment's `file_id` files: downloaded into the workspace from the presigned URL Core put in
`turn.start` (the bytes come from the deployment's files bucket, never through the WebSocket API).

The URL is a capability for one object for a few minutes; it is never logged. The download streams to a
temporary file beside the target and replaces the target only when its size is the File's.
"""

from __future__ import annotations

import os
import pathlib
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_SECONDS = 60
CHUNK = 1024 * 1024


class DownloadFailed(Exception):
    """What went wrong, naming the entry and the File (never the URL)."""


def fetch(index: int, entry: dict[str, Any], target: pathlib.Path) -> None:
    file_id = str(entry.get("file_id") or "")
    url = entry.get("url")
    if not url:
        raise DownloadFailed(f"files[{index}]: the File {file_id} no longer exists.")
    if not str(url).startswith(("https://", "http://")):
        raise DownloadFailed(f"files[{index}]: the File {file_id} has no download URL.")
    expected = int(entry.get("size_bytes") or 0)
    partial = target.with_name(f".{target.name}.download")
    written = 0
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response, open(partial, "wb") as out:  # noqa: S310
            while chunk := response.read(CHUNK):
                written += len(chunk)
                if written > expected:
                    break
                out.write(chunk)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        partial.unlink(missing_ok=True)
        reason = getattr(exc, "code", None) or type(exc).__name__
        raise DownloadFailed(f"files[{index}]: downloading the File {file_id} failed ({reason}).") from None
    if written != expected:
        partial.unlink(missing_ok=True)
        got = f"more than {expected}" if written > expected else f"{written} of {expected}"
        raise DownloadFailed(f"files[{index}]: the File {file_id} did not arrive whole ({got} bytes).")
    os.replace(partial, target)
