"""Files and Uploads throughput through the API (issue 38): the official SDK against the in-process stack (the
files function's ASGI app behind the local REST gateway, moto's S3 and DynamoDB, IAM enforced).

- files.create of a 4 MiB file (the per-request limit) and its content download;
- a 32 MiB file through client.uploads.upload_file_chunked in 4 MiB parts (parts, then the completion's S3
  multipart composition), and its download.
MB/s are medians of a few rounds on this machine: moto in process, no network, so they bound our own code's cost
(multipart parsing, composition, streaming), not AWS's. Artifact publication per MB: the reference Runtime's upload of a
Turn's outputs through its presigned form to a moto S3 server on loopback.
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
    rounds = (1, 1) if SMOKE else (5, 3)  # make test's smoke: once each, at 1 MiB and 2 MiB in two parts
    small_mib, large_mib, part_mib = (1, 2, 1) if SMOKE else (4, 32, 4)
    with in_process_stack(heartbeat_seconds=30) as (_, client):
        small = os.urandom(small_mib * MiB)
        create, download = [], []
        for _ in range(rounds[0]):
            t0 = time.perf_counter()
            f = client.files.create(file=("bench.bin", io.BytesIO(small)), purpose="user_data")
            create.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            assert client.files.content(f.id).content == small
            download.append(time.perf_counter() - t0)
            client.files.delete(f.id)
        large = os.urandom(large_mib * MiB)
        upload, large_download = [], []
        with tempfile.NamedTemporaryFile() as tmp:
            tmp.write(large)
            tmp.flush()
            for _ in range(rounds[1]):
                t0 = time.perf_counter()
                done = client.uploads.upload_file_chunked(file=tmp.name, mime_type="application/octet-stream",
                                                          purpose="user_data", part_size=part_mib * MiB)
                upload.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                assert client.files.content(done.file.id).content == large
                large_download.append(time.perf_counter() - t0)
                client.files.delete(done.file.id)
    publication = _publication()
    return emit("files", {
        "benchmark": "files",
        "note": "official SDK -> local REST gateway -> files function (ASGI) -> moto S3/DynamoDB, in process; "
                "medians; bounds our code's cost, not AWS's",
        f"files_create_{small_mib}mib_mb_per_s": _rate(len(small), create),
        f"files_content_{small_mib}mib_mb_per_s": _rate(len(small), download),
        f"uploads_{large_mib}mib_in_{part_mib}mib_parts_mb_per_s": _rate(len(large), upload),
        f"files_content_{large_mib}mib_mb_per_s": _rate(len(large), large_download),
        f"files_create_{small_mib}mib_ms_p50": round(statistics.median(create) * 1000, 1),
        **publication,
    })


def _publication() -> dict:
    """Artifact publication per MB: the reference Runtime's upload of a Turn's outputs through its presigned form
    (runtime/environments/artifacts.publish, httpx2) to a moto S3 server on loopback, files of 1, 8 and 32 MiB."""
    import boto3
    from moto.server import ThreadedMotoServer

    from runtime.environments import artifacts

    server = ThreadedMotoServer(port=0, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{server.get_host_and_port()[1]}"
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")  # noqa: S106 - moto
        s3.create_bucket(Bucket="bench")
        out = {}
        with tempfile.TemporaryDirectory() as workspace:
            outputs = os.path.join(workspace, "outputs")
            os.mkdir(outputs)
            for mib in (1,) if SMOKE else (1, 8, 32):
                rounds = []
                for i in range(1 if SMOKE else 3):
                    prefix = f"artifacts/t/s/turn_{mib}_{i}/"
                    post = s3.generate_presigned_post("bench", prefix + "${filename}", ExpiresIn=600,
                                                      Conditions=[["starts-with", "$key", prefix]])
                    form = {"url": post["url"], "fields": {k: v for k, v in post["fields"].items() if k != "key"},
                            "key_prefix": prefix, "outputs": "/workspace/outputs", "max_file_bytes": 100 * MiB,
                            "max_files": 50, "max_turn_bytes": 1024 * MiB}
                    baseline = artifacts.scan(workspace, form)[0]
                    with open(os.path.join(outputs, "report.bin"), "wb") as fh:
                        fh.write(os.urandom(mib * MiB))
                    t0 = time.perf_counter()
                    published = artifacts.publish(workspace, form, baseline)
                    rounds.append(time.perf_counter() - t0)
                    assert len(published["artifacts"]) == 1, published
                out[f"artifact_publication_{mib}mib_ms_per_mb"] = round(statistics.median(rounds) * 1000 / mib, 1)
        return out
    finally:
        server.stop()


if __name__ == "__main__":
    main()
