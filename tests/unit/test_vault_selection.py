"""Vault credential selection and credential request checks (pure: agents_contract.vaults)."""

import pytest

from agents_contract import vaults
from agents_contract.errors import Conflict, InvalidRequest

URL = "https://mcp.example.com/mcp"
A = vaults.AttachedCredential("cred_a", "vault_1", URL)
B = vaults.AttachedCredential("cred_b", "vault_2", URL)
C = vaults.AttachedCredential("cred_c", "vault_2", "https://other.example/mcp")


def http(url=URL, credential_id=None):
    return {"type": "mcp", "server_label": "t", "transport": {"type": "http", "server_url": url},
            "credential_id": credential_id}


def test_one_match_is_selected_and_bound_to_its_vault():
    tools = [http(), http("https://nobody.example/mcp"), {"type": "function", "name": "f"}]
    assert vaults.select_credentials(tools, [A, C]) == {"cred_a": "vault_1"}
    assert [t.get("credential_id") for t in tools] == ["cred_a", None, None]


def test_no_vault_attached_is_anonymous():
    tools = [http()]
    assert vaults.select_credentials(tools, None) == {} and tools[0]["credential_id"] is None


@pytest.mark.parametrize("tools, attached, error, message", [
    ([http(credential_id="cred_a")], None, InvalidRequest, "MCP credential_id requires an attached vault"),
    ([http(credential_id="cred_x")], [A], InvalidRequest, "MCP credential_id cred_x was not found in an attached vault"),
    ([http(credential_id="cred_c")], [A, C], InvalidRequest,
     f"MCP credential_id cred_c does not match server_url {URL}"),
    ([http()], [A, B], Conflict, f"multiple attached vault credentials match MCP server_url {URL}; specify credential_id"),
])
def test_selection_answers(tools, attached, error, message):
    with pytest.raises(error) as err:
        vaults.select_credentials(tools, attached)
    assert err.value.message == message and err.value.param is None


def test_explicit_choice_settles_several_matches():
    tools = [http(credential_id="cred_b")]
    assert vaults.select_credentials(tools, [A, B]) == {"cred_b": "vault_2"}


def test_stdio_servers_are_not_selected_for():
    tool = {"type": "mcp", "server_label": "s", "transport": {"type": "stdio", "command": "x"}, "credential_id": None}
    assert vaults.select_credentials([tool], [A]) == {}


def test_vault_ids_at_most_ten_and_attached_once():
    assert vaults.check_vault_ids(["v1", "v2", "v1"]) == ["v1", "v2"]
    with pytest.raises(InvalidRequest, match="maximum length 10"):
        vaults.check_vault_ids([f"v{i}" for i in range(11)])


@pytest.mark.parametrize("url, allowed", [
    ("https://mcp.example.com/mcp", True),
    ("https://MCP.example.com:8443/a?b=1", True),
    ("http://mcp.example.com/mcp", False),
    ("http://127.0.0.1:8080/mcp", False),
    ("https://u:p@mcp.example.com/", False),
    ("https://mcp.example.com/#x", False),
    ("https:///nohost", False),
    ("https://mcp.exa mple.com/", False),
])
def test_server_url_rules(url, allowed):
    policy = vaults.UrlPolicy()
    if allowed:
        vaults.check_server_url(url, policy)
    else:
        with pytest.raises(InvalidRequest):
            vaults.check_server_url(url, policy)


def test_loopback_http_only_where_the_deployment_allows_it():
    policy = vaults.UrlPolicy(allow_loopback_http=True)
    for url in ("http://127.0.0.1:8080/mcp", "http://localhost/mcp", "http://[::1]:9/mcp"):
        vaults.check_server_url(url, policy)
    with pytest.raises(InvalidRequest):
        vaults.check_server_url("http://192.168.1.5/mcp", policy)


def test_trusted_origins():
    assert vaults.UrlPolicy(trusted_origins=("loopback",)).trusts("http://127.0.0.1:4444/token")
    assert vaults.UrlPolicy(trusted_origins=("https://idp.internal:443",)).trusts("https://IDP.internal/token")
    assert not vaults.UrlPolicy().trusts("http://127.0.0.1:4444/token")


def test_parsed_secrets_stay_apart_from_the_public_record():
    parsed = vaults.parse_credential_create({"name": "n", "auth": {
        "type": "mcp_oauth", "mcp_server_url": URL, "access_token": "s3cr3t-at", "expires_at": "2030-01-01T00:00:00Z",
        "refresh": {"client_id": "c", "refresh_token": "s3cr3t-rt", "token_endpoint": "https://idp.example/token",
                    "token_endpoint_auth": {"type": "client_secret_basic", "client_secret": "s3cr3t-cs"}}}},
        vaults.UrlPolicy())
    assert parsed.secrets == {"access_token": "s3cr3t-at", "refresh_token": "s3cr3t-rt", "client_secret": "s3cr3t-cs"}
    assert parsed.expires_at == 1893456000
    public = repr(parsed.auth) + repr(vaults.credential_resource(
        {"id": "cred_1", "vault_id": "vault_1", "name": "n", "created_at": 1, "updated_at": 1, "auth": parsed.auth}))
    assert "s3cr3t" not in public


def test_only_dispatch_may_decrypt_vault_secrets():
    """Least privilege in template.yaml: the API functions that store secrets may only generate data keys;
    Dispatch (which hands the bearer to the claiming Runtime) is the only function that decrypts them. Every
    grant on the key requires an encryption context: a grant bound to another context key (an executor
    secret's) cannot open a credential's sealed data key, whose context has no such key."""
    from local import template

    kms = {}
    for name, res in template.resources("AWS::Serverless::Function").items():
        for policy in res["Properties"].get("Policies") or []:
            for statement in (policy.get("Statement") or []) if isinstance(policy, dict) else []:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                granted = {a for a in actions if a.startswith("kms:")}
                if not granted:
                    continue
                assert statement["Resource"] == {"Fn::GetAtt": ["VaultKey", "Arn"]}, name
                condition = statement["Condition"]["StringLike"]
                if "kms:EncryptionContext:credential_id" in condition:
                    kms[name] = kms.get(name, set()) | granted
    assert kms == {"AdmissionFunction": {"kms:GenerateDataKey"}, "DispatchFunction": {"kms:Decrypt", "kms:GenerateDataKey"}}
