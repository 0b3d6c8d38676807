"""Files and Uploads throughput through the API (issue 38): the official SDK against the in-process stack (the
files function's ASGI app behind the local REST gateway, moto's S3 and DynamoDB, IAM enforced).

- files.create of a 4 MiB file (the per-request limit) and its content download;
- a 32 MiB file through client.uploads.upload_file_chunked in 4 MiB parts (parts, then the completion's S3
  multipart composition), and its download.
MB/s are medians of a few rounds on this machine: moto in process, no network, so they bound our own code's cost
(multipart parsing, composition, streaming), not AWS's. Artifact publication is not built yet (issue 38, item 5).
"""

from __future__ import annotations

try:
    from bench.common import SMOKE, emit, in_process_stack
except ImportError:  # run as a script
    from common import SMOKE, emit, in_process_stack  # type: ignore[no-redef]

import io
import os
import statistics
import tempfile
import time

MiB = 1024 * 1024


def _rate(size: int, seconds: list[float]) -> float:
    return round(size / MiB / statistics.median(seconds), 1)


def main() -> dict:
    rounds = (1, 1) if SMOKE else (5, 3)  # make test's smoke: once each, the same sizes
    with in_process_stack(heartbeat_seconds=30) as (_, client):
        small = os.urandom(4 * MiB)
        create, download = [], []
        for _ in range(rounds[0]):
            t0 = time.perf_counter()
            f = client.files.create(file=("bench.bin", io.BytesIO(small)), purpose="user_data")
            create.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            assert client.files.content(f.id).content == small
            download.append(time.perf_counter() - t0)
            client.files.delete(f.id)
        large = os.urandom(32 * MiB)
        upload, large_download = [], []
        with tempfile.NamedTemporaryFile() as tmp:
            tmp.write(large)
            tmp.flush()
            for _ in range(rounds[1]):
                t0 = time.perf_counter()
                done = client.uploads.upload_file_chunked(file=tmp.name, mime_type="application/octet-stream",
                                                          purpose="user_data", part_size=4 * MiB)
                upload.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                assert client.files.content(done.file.id).content == large
                large_download.append(time.perf_counter() - t0)
                client.files.delete(done.file.id)
    return emit("files", {
        "benchmark": "files",
        "note": "official SDK -> local REST gateway -> files function (ASGI) -> moto S3/DynamoDB, in process; "
                "medians; bounds our code's cost, not AWS's",
        "files_create_4mib_mb_per_s": _rate(len(small), create),
        "files_content_4mib_mb_per_s": _rate(len(small), download),
        "uploads_32mib_in_4mib_parts_mb_per_s": _rate(len(large), upload),
        "files_content_32mib_mb_per_s": _rate(len(large), large_download),
        "files_create_4mib_ms_p50": round(statistics.median(create) * 1000, 1),
    })


if __name__ == "__main__":
    main()
