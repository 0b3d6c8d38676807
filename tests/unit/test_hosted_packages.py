"""Admission of an openai_hosted Environment's `packages` (agents_contract.hosted), table-driven: `packages.python`
takes requirement specifiers only (PEP 508 without a URL: a name, extras, version constraints, markers) and
`packages.npm` registry names with an optional version, range or dist-tag only. Every other install source
(a path, a URL, a direct or VCS reference, an archive, an installer option, an npm alias or GitHub shorthand)
is a 400 naming the entry, before anything is written. Pure: no store, no network."""

from __future__ import annotations

import pytest

from agents_contract import hosted, validation, wire
from agents_contract.errors import AgentsError, InvalidRequest
from tests.unit.helpers import resolve, session_body

PYTHON = ("Invalid 'environment.packages.python[{i}]': expected a requirement specifier (a package name with optional "
          "extras, version constraints and markers, such as 'requests>=2.31'); paths, URLs and VCS references are not "
          "accepted.")
NPM = ("Invalid 'environment.packages.npm[{i}]': expected a registry package name (lowercase, optionally "
       "'@scope/'-prefixed) with an optional '@' and a version, range or dist-tag, such as 'left-pad', "
       "'@scope/pkg@^1.2.3' or 'react@next'; paths, URLs, git and GitHub references, 'npm:' aliases and tarballs are "
       "not accepted.")
# The limits every entry had before (their messages unchanged for npm; Python admits PEP 508's spaces).
PYTHON_LIMITS = ("Invalid 'environment.packages.python[{i}]': a requirement of 1 to 200 characters without NUL or "
                 "whitespace other than spaces between its parts, not starting with '-'.")
NPM_LIMITS = ("Invalid 'environment.packages.npm[{i}]': a package name (or requirement) of 1 to 200 characters "
              "without whitespace or NUL, not starting with '-'.")


def packages(manager: str, entries: list[str]) -> dict:
    return session_body(env={"type": "openai_hosted", "packages": {manager: entries}}, harness="scripted")


def refusal(manager: str, entries: list[str]) -> AgentsError:
    with pytest.raises(AgentsError) as err:
        resolve(packages(manager, entries))
    return err.value


# (the rule, the entry)
PYTHON_ACCEPTED = [
    ("a bare name", "requests"),
    ("extras and a version range", "requests[socks]>=2.31,<3"),
    ("a wildcard version", "numpy==2.*"),
    ("an environment marker", "pkg; python_version>='3.8'"),
    ("a compatible release", "Django~=5.0"),
    ("spaces between a requirement's parts", "pkg[a, b] >= 1 ; sys_platform == 'linux'"),
    ("a dotted name and a local version", "zope.interface==6.0+local.1"),
    ("a parenthesised specifier", "pkg (>=1.0)"),
    ("arbitrary equality with a version", "pkg===1.0"),
]
NPM_ACCEPTED = [
    ("a bare name", "left-pad"),
    ("a scoped name with a caret range", "@scope/pkg@^1.2.3"),
    ("a tilde range", "typescript@~5.4"),
    ("an exact version", "lodash@4.17.21"),
    ("a dist-tag", "react@next"),
    ("a primitive range", "pkg@>=1.0.0"),
    ("an x-range", "pkg@1.x"),
    ("a prerelease version", "pkg@1.2.3-beta.1"),
    ("a version with build metadata", "pkg@1.2.3+build.5"),
    ("ranges joined by ||", "pkg@1.x||>=3.0.0"),
    ("any version", "pkg@*"),
    ("a scoped name alone", "@types/node"),
    ("a dist-tag with digits and dots", "typescript@ts5.4"),
]

PYTHON_REFUSED = [
    ("a relative path", "./pkg"),
    ("an absolute path", "/abs/path"),
    ("a home path", "~/x"),
    ("the current directory", "."),
    ("a file URL", "file:///tmp/x"),
    ("a direct reference to a file URL", "pkg @ file:///tmp/x"),
    ("a direct reference without spaces", "pkg@file:///tmp/x"),
    ("a direct reference to an https URL", "pkg @ https://example.com/pkg-1.0.tar.gz"),
    ("a direct VCS reference with extras", "pkg[extra] @ git+https://github.com/a/b"),
    ("an http URL to an archive", "http://127.0.0.1/x.tar.gz"),
    ("a git+file VCS URL", "git+file:///tmp/repo"),
    ("a git+https VCS URL", "git+https://github.com/a/b"),
    ("a wheel file name", "pkg.whl"),
    ("a wheel file name in capitals", "PKG.WHL"),
    ("a source archive name", "x.tar.gz"),
    ("a zip archive name", "x.zip"),
    ("an archive name with extras", "pkg[x].whl"),
    ("arbitrary equality with a path", "pkg===/tmp/x"),
    ("arbitrary equality with an archive", "pkg===x.whl"),
    ("arbitrary equality with a URL-like string", "pkg===a@b:c"),
    ("a Windows path", "C:\\x"),
    ("not a requirement at all", "requests numpy"),
]
PYTHON_LIMITED = [
    ("pip's editable option", "-e ."),
    ("pip's index option", "--index-url=http://127.0.0.1/simple"),
    ("a tab", "pkg\t>=1"),
    ("a line break", "pkg\n-e ."),
    ("a leading space", " requests"),
    ("a trailing space", "requests "),
    ("empty", ""),
    ("more than 200 characters", "p" * 201),
]
NPM_REFUSED = [
    ("a file: tarball", "file:../x.tgz"),
    ("a relative tarball path", "./x.tgz"),
    ("a tarball file name", "x.tgz"),
    ("a tar file name", "x.tar"),
    ("a git+https URL", "git+https://github.com/a/b"),
    ("a git: URL", "git://github.com/a/b"),
    ("a scp-like git reference", "git@github.com:a/b"),
    ("a github: reference", "github:user/repo"),
    ("a GitHub shorthand", "user/repo"),
    ("an npm: alias", "npm:other@1"),
    ("a named npm: alias", "pkg@npm:other@1"),
    ("a named file: spec", "pkg@file:../x"),
    ("a named git+ssh spec", "pkg@git+ssh://git@github.com/a/b"),
    ("a named https tarball", "pkg@https://x/y.tgz"),
    ("a named GitHub shorthand", "pkg@user/repo"),
    ("a named tarball file", "pkg@x.tgz"),
    ("a named relative path", "pkg@./x"),
    ("a named dot spec", "pkg@.tag"),
    ("a named home path", "pkg@~/x"),
    ("a link: spec", "link:../x"),
    ("a workspace: spec", "workspace:*"),
    ("a named workspace: spec", "pkg@workspace:*"),
    ("an http: URL", "http://127.0.0.1/x.tgz"),
    ("an absolute path", "/abs/path"),
    ("a home path", "~/x"),
    ("capital letters", "Upper"),
    ("a leading dot", ".hidden"),
    ("a leading underscore", "_under"),
    ("a scope without a name", "@scope/"),
    ("a scope's name with a leading dot", "@scope/.x"),
    ("an excluded name", "node_modules"),
    ("an empty spec", "pkg@"),
    ("a committish", "pkg@1.0.0#x"),
    ("comparators without the grammar's space", "pkg@>=1<2"),
]
NPM_LIMITED = [
    ("npm's registry option", "--registry=http://127.0.0.1"),
    ("a space inside a range", "pkg@>=1 <2"),
    ("a hyphen range (spaces)", "pkg@1.0.0 - 2.0.0"),
    ("empty", ""),
    ("more than 200 characters", "x" * 201),
]


@pytest.mark.parametrize("rule,entry", PYTHON_ACCEPTED, ids=[r[0] for r in PYTHON_ACCEPTED])
def test_packages_python_accepts_requirement_specifiers(rule, entry):
    snapshot = resolve(packages("python", ["six", entry]))
    assert snapshot.environment["packages"]["python"] == ["six", entry]


@pytest.mark.parametrize("rule,entry", NPM_ACCEPTED, ids=[r[0] for r in NPM_ACCEPTED])
def test_packages_npm_accepts_registry_names_with_a_version_range_or_dist_tag(rule, entry):
    snapshot = resolve(packages("npm", ["left-pad", entry]))
    assert snapshot.environment["packages"]["npm"] == ["left-pad", entry]


@pytest.mark.parametrize("manager,message,rule,entry",
                         [("python", PYTHON, *c) for c in PYTHON_REFUSED] +
                         [("python", PYTHON_LIMITS, *c) for c in PYTHON_LIMITED] +
                         [("npm", NPM, *c) for c in NPM_REFUSED] +
                         [("npm", NPM_LIMITS, *c) for c in NPM_LIMITED],
                         ids=[f"python-{c[0]}" for c in PYTHON_REFUSED + PYTHON_LIMITED] +
                             [f"npm-{c[0]}" for c in NPM_REFUSED + NPM_LIMITED])
def test_every_other_install_source_is_a_400_naming_the_entry(manager, message, rule, entry):
    error = refusal(manager, ["ok-name", entry])  # the second entry: the index is the refused one's
    assert type(error) is InvalidRequest and error.status == 400
    assert (error.message, error.param) == (message.format(i=1), f"environment.packages.{manager}[1]")


def test_environments_create_checks_the_same_entries():
    """`environments.create` passes its `environment` through the same check (param `environment....`)."""
    request = validation.parse(wire.EnvironmentCreate, {"environment": {
        "type": "openai_hosted", "packages": {"python": ["requests"], "npm": ["left-pad", "github:user/repo"]}}})
    with pytest.raises(InvalidRequest) as err:
        hosted.check(request.environment)
    assert (err.value.message, err.value.param) == (NPM.format(i=1), "environment.packages.npm[1]")
