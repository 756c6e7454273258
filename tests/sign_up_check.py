#!/usr/bin/env python3
"""The pre-sign-up check's own code (template.yaml, SignUpCheckFunction's inline Python), run on Cognito's
pre-sign-up events: with SelfSignUp it is all that stands between a stranger and the model, so its refusals are
tested, not only its wiring (which tests/template_permissions.py checks).

The code is taken from the template as CloudFormation would deploy it (its ZipFile text), loaded as a module with the
environment the template gives it (SIGN_UP_EMAIL_DOMAINS, the SignUpEmailDomains parameter), and handed events shaped
as Cognito sends them (https://docs.aws.amazon.com/cognito/latest/developerguide/user-pool-lambda-pre-sign-up.html):
an address at an allowed domain passes unchanged, in any case; any other (a subdomain, a look-alike, a second @, no
address) is refused with an exception, which Cognito turns into the sign-up's error; an empty list admits no one; an
administrator's AdminCreateUser passes whatever the domain.

Run by `make lint` with the venv's python (the template's YAML tags need SAM CLI's loader); prints
`N passed, N failed`, exit status 1 on any failure.
"""

import contextlib
import copy
import io
import os
import sys
import types

from samcli.yamlhelper import yaml_parse

import checks  # tests/checks.py: the runner of the test_* functions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOMAINS = "example.com,Example.ORG"  # as an operator might type them


def resource():
    with open(os.path.join(ROOT, "template.yaml")) as f:
        return yaml_parse(f.read())["Resources"]["SignUpCheckFunction"]["Properties"]


def load(domains):
    """The check as Lambda runs it: its module, imported with SIGN_UP_EMAIL_DOMAINS set to `domains`."""
    properties = resource()
    variables = properties["Environment"]["Variables"]
    assert variables == {"SIGN_UP_EMAIL_DOMAINS": {"Ref": "SignUpEmailDomains"}}, variables
    assert properties["Handler"] == "index.handler", properties["Handler"]
    saved = os.environ.get("SIGN_UP_EMAIL_DOMAINS")
    os.environ["SIGN_UP_EMAIL_DOMAINS"] = domains
    try:
        module = types.ModuleType("index")
        exec(compile(properties["Code"]["ZipFile"], "index.py", "exec"), module.__dict__)
    finally:
        if saved is None:
            del os.environ["SIGN_UP_EMAIL_DOMAINS"]
        else:
            os.environ["SIGN_UP_EMAIL_DOMAINS"] = saved
    return module


def event(email, source="PreSignUp_SignUp"):
    """A pre-sign-up event as Cognito sends it."""
    attributes = {} if email is None else {"email": email}
    return {
        "version": "1",
        "region": "us-east-1",
        "userPoolId": "us-east-1_EXAMPLE",
        "userName": "3f2a9c1e-0000-4000-8000-000000000001",
        "callerContext": {"awsSdkVersion": "aws-sdk-unknown-unknown", "clientId": "1example23456789"},
        "triggerSource": source,
        "request": {"userAttributes": attributes, "validationData": None, "clientMetadata": {}},
        "response": {"autoConfirmUser": False, "autoVerifyEmail": False, "autoVerifyPhone": False},
    }


def admitted(check, e):
    """True when the check lets the sign-up go on: it returns the event unchanged (it confirms no one itself)."""
    sent = copy.deepcopy(e)
    log = io.StringIO()
    try:
        with contextlib.redirect_stdout(log):
            answer = check.handler(e, None)
    except Exception as error:  # noqa: BLE001 - any exception is Cognito's refusal
        assert str(error), "a refusal without a message"
        assert "sign-up refused" in log.getvalue(), "a refusal that its log does not say"
        return False
    assert answer == sent, answer
    return True


def test_addresses_at_the_allowed_domains_pass_in_any_case():
    check = load(DOMAINS)
    for email in ["alice@example.com", "Bob.Smith+chat@EXAMPLE.com", "carol@example.org", "dave@Example.Org",
                  " erin@example.com "]:
        assert admitted(check, event(email)), email


def test_every_other_address_is_refused():
    check = load(DOMAINS)
    for email in [
        "mallory@sub.example.com",        # a subdomain is another domain
        "mallory@example.com.evil.net",   # a look-alike ending elsewhere
        "mallory@notexample.com",
        "mallory@example.co",
        "mallory@example.com@evil.net",   # the domain is after the last @
        "example.com",                    # no @
        "@example.com",                   # nothing before it
        "",
    ]:
        assert not admitted(check, event(email)), email
    assert not admitted(check, event(None)), "no email attribute"
    assert not admitted(check, {"triggerSource": "PreSignUp_SignUp"}), "no request"


def test_an_external_provider_is_checked_as_a_sign_up():
    check = load(DOMAINS)
    assert admitted(check, event("frank@example.com", "PreSignUp_ExternalProvider"))
    assert not admitted(check, event("frank@elsewhere.net", "PreSignUp_ExternalProvider"))


def test_an_administrator_may_create_anyone():
    check = load(DOMAINS)
    assert admitted(check, event("grace@elsewhere.net", "PreSignUp_AdminCreateUser"))


def test_an_empty_list_admits_no_one():
    for domains in ["", " , ", ","]:
        check = load(domains)
        assert not admitted(check, event("alice@example.com")), domains
        assert not admitted(check, event("alice@")), domains
        assert admitted(check, event("alice@example.com", "PreSignUp_AdminCreateUser")), domains


if __name__ == "__main__":
    sys.exit(checks.run(globals()))
