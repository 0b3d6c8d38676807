"""agents_contract is pure: no boto3 (or botocore) import anywhere in it."""

import ast
import pathlib
import subprocess
import sys

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "layers" / "contract" / "agents_contract"


def test_no_boto3_import_in_the_source():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("boto3", "botocore")]
    assert offenders == []
    assert len(list(PACKAGE.rglob("*.py"))) >= 8


def test_importing_every_module_loads_no_boto3():
    modules = [p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"]
    code = ("import sys\n" + "".join(f"import agents_contract.{m}\n" for m in modules)
            + "print(sorted(m for m in sys.modules if m.split('.')[0] in ('boto3','botocore')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(PACKAGE.parent)})
    assert out.stdout.strip() == "[]"
