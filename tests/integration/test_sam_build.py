"""`sam build` works here without Docker, and SAM's own transform makes what the template means.

`make test` installs the SAM CLI into .venv-sam (`make sam-cli`) and names it in MAKE_TEST_SAM_CLI: then a
missing SAM CLI fails these tests instead of skipping them. Run by hand without it, they skip."""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
REQUIRED = os.environ.get("MAKE_TEST_SAM_CLI")  # set by make test: the SAM CLI must be there
SAM = pathlib.Path(REQUIRED) if REQUIRED else ROOT / ".venv-sam" / "bin" / "sam"
sam = str(SAM) if SAM.exists() else shutil.which("sam")
SAM_PYTHON = SAM.parent / "python"


def _require(present: bool, what: str) -> None:
    if not present:
        if REQUIRED:
            pytest.fail(f"{what} missing although make test installs it ({REQUIRED})")
        pytest.skip(f"{what} not installed (make sam-cli installs it into .venv-sam)")


def test_sam_validate_lint_passes():
    """`sam validate --lint`: SAM's transform and cfn-lint's rules on template.yaml (make test runs it here, beside
    the other tests; `make lint` runs it too)."""
    _require(sam is not None, "the SAM CLI")
    out = subprocess.run([sam, "validate", "--lint"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "is a valid SAM Template" in out.stdout + out.stderr


@pytest.mark.slow
def test_sam_build_without_containers(tmp_path):
    _require(sam is not None, "the SAM CLI")
    # The layer's Makefile installs wheels with $(PYTHON) -m pip: here the SAM CLI's own interpreter, a plain venv
    # Python, never a version manager's shim (pyenv's rehashes after every pip install behind a global lock file).
    python = SAM.parent / "python"
    env = {**os.environ, "PYTHON": str(python)} if python.exists() else dict(os.environ)
    uv = ROOT / ".venv" / "bin" / "uv"  # what make installs: the Makefiles install the Lambda wheels with it
    if uv.exists():
        env |= {"UV": str(uv), "UV_NATIVE_TLS": "1"}
    out = subprocess.run([sam, "build", "--build-dir", str(tmp_path / "build"), "--cache-dir", str(tmp_path / "cache")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
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


TRANSFORM = """
import json, sys
from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse

class Policies:  # the managed policies SAM names (Tracing: Active), without asking IAM
    def load(self):
        return {"AWSXrayWriteOnlyAccess": "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess"}

template = yaml_parse(open("template.yaml").read())
for resource in template["Resources"].values():
    props = resource.get("Properties", {})
    for key in ("CodeUri", "DefinitionUri", "ContentUri"):  # what sam package would upload
        if isinstance(props.get(key), str):
            props[key] = "s3://bucket/" + props[key]
json.dump(transform(template, {}, Policies())["Resources"], sys.stdout, default=str)
"""


def test_sams_transform_makes_one_stage_and_one_reads_permission():
    """What SAM itself generates (issue 35, item 7): no Deployment stage beside the API's own (`Stage`), and one
    resource-policy statement for the reads function, well under Lambda's 20 KB policy limit."""
    _require(SAM_PYTHON.exists(), "the SAM translator (the SAM CLI's Python)")
    out = subprocess.run([str(SAM_PYTHON), "-c", TRANSFORM], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={"AWS_DEFAULT_REGION": "us-east-1", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    resources = json.loads(out.stdout)
    deployments = [r for r in resources.values() if r["Type"] == "AWS::ApiGateway::Deployment"]
    assert len(deployments) == 1 and "StageName" not in deployments[0]["Properties"]
    assert [r["Properties"]["StageName"] for r in resources.values() if r["Type"] == "AWS::ApiGateway::Stage"] == [
        {"Ref": "Stage"}]
    reads = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Permission"
             and r["Properties"]["FunctionName"] == {"Ref": "ReadsFunction"}]
    assert len(reads) == 1
    body = resources["PublicApi"]["Properties"]["Body"]
    assert sum(len(methods) for methods in body["paths"].values()) >= 59  # every route, the reads' and the events'
    # per-tenant quotas (issue 36, item 4): every method is metered by the tenants' usage plan, whose API key the
    # authorizer names (usageIdentifierKey)
    assert resources["PublicApi"]["Properties"]["ApiKeySourceType"] == "AUTHORIZER"
    assert all("api_key" in [next(iter(s)) for s in spec.get("security") or []]
               for methods in body["paths"].values() for spec in methods.values())
    plan = resources["PublicApiUsagePlan"]["Properties"]
    assert plan["ApiStages"] == [{"ApiId": {"Ref": "PublicApi"}, "Stage": {"Ref": "PublicApiStage"}}]
    assert plan["Throttle"] == {"RateLimit": 100, "BurstLimit": 200}  # TenantRateLimit, TenantBurstLimit defaults
