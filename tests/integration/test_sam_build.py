"""`sam build` works here without Docker (runs only where SAM CLI is installed: `make sam-cli`)."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAM = ROOT / ".venv-sam" / "bin" / "sam"
sam = str(SAM) if SAM.exists() else shutil.which("sam")


@pytest.mark.slow
@pytest.mark.skipif(sam is None, reason="SAM CLI not installed (make sam-cli installs it into .venv-sam)")
def test_sam_build_without_containers(tmp_path):
    out = subprocess.run([sam, "build", "--build-dir", str(tmp_path / "build"), "--cache-dir", str(tmp_path / "cache")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    layer = tmp_path / "build" / "ContractLayer" / "python"
    assert (layer / "agents_contract" / "parser.py").exists()
    assert list((layer / "pydantic_core").glob("*cpython-313-aarch64-linux-gnu.so"))
    for function in ("AdmissionFunction", "ReadsFunction", "AuthorizerFunction"):
        assert (tmp_path / "build" / function / "app.py").exists()
    # the Lambda Web Adapter's function: its start script (executable), the ASGI app and its server
    streaming = tmp_path / "build" / "SessionStreamFunction"
    assert (streaming / "run.sh").stat().st_mode & 0o111 and (streaming / "app.py").exists()
    assert (streaming / "uvicorn").is_dir() and (streaming / "starlette").is_dir()
