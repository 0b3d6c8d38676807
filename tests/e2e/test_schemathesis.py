"""schemathesis against openapi.yaml on the local stack: no 5xx, and every response (status, content
type, body) valid against the document. (Driven through schemathesis' Python API with hypothesis:
its pytest plugin does not load under pytest 9.)"""

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.e2e.conftest import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
SCHEMA = schemathesis.openapi.from_path(ROOT / "openapi.yaml")
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.mark.parametrize("operation", OPERATIONS, ids=[op.label for op in OPERATIONS])
def test_api_conforms_and_never_answers_5xx(operation, local_stack):
    base = local_stack["base_url"].removesuffix("/v1")
    headers = {"Authorization": f"Bearer {local_stack['api_key']}"}

    @given(case=operation.as_strategy())
    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case):
        case.call_and_validate(base_url=base, headers=headers, checks=CHECKS)

    run()
