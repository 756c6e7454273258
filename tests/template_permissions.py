#!/usr/bin/env python3
"""Who may call the function URLs, as CloudFormation would deploy template.yaml in each AuthMode.

A mistake here is a leak (a public or plain `lambda:InvokeFunction` lets its holder forge the IAM caller of the request
context) or an outage (a URL whose callers lack a permission refuses them), and neither shows in a local run. So the
template is transformed with SAM's own translator (the samtranslator package SAM CLI installs in .tools/venv), its
Conditions are evaluated for the mode's parameter values, and what would be created is checked:

- AuthMode jwt (URL AuthType NONE): each function has exactly two permissions, both for the public principal:
  `lambda:InvokeFunctionUrl` with auth type NONE, and `lambda:InvokeFunction` only when invoked through its URL;
  there is no managed policy for chat users.
- AuthMode iam (URL AuthType AWS_IAM): no permission for the public principal (nor any on the functions); the chat
  users' managed policy grants exactly `lambda:InvokeFunctionUrl` on the three functions and `lambda:InvokeFunction`
  on them with `lambda:InvokedViaFunctionUrl: true`, and its ARN is an output.

Run by `make lint` with the venv's python; prints `N passed, N failed`, exit status 1 on any failure.
"""

import copy
import functools
import logging
import os
import sys
import traceback

from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform

# The translator reads the region from a boto3 session: one fixed here, whatever the developer's AWS profile says.
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"
# The translator's own warnings (its unpublished usage metrics) say nothing of this template.
logging.getLogger("samtranslator").setLevel(logging.ERROR)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUNCTIONS = ["ChatFunction", "ChatStreamFunction", "HistoryFunction"]
PSEUDO = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::Partition": "aws",
          "AWS::StackName": "chat-backend", "AWS::URLSuffix": "amazonaws.com"}
MODES = {
    "iam": {"AuthMode": "iam"},
    "jwt": {"AuthMode": "jwt", "JwtIssuer": "https://issuer.example", "JwtAudience": "chat-backend",
            "JwksUrl": "https://issuer.example/.well-known/jwks.json"},
}


class NoManagedPolicies:
    """The translator asks for AWS managed policies only when a function names one; none does."""

    def load(self):
        return {}


class Stack:
    """The transformed template as CloudFormation would create it for `parameters`: the resources and outputs whose
    Condition holds, with every Fn::If resolved."""

    def __init__(self, template, parameters):
        self.values = {name: str(p.get("Default", "")) for name, p in template.get("Parameters", {}).items()}
        self.values.update(PSEUDO)
        self.values.update(parameters)
        self.condition_defs = template.get("Conditions", {})
        self.conditions = {}
        self.resources = {name: self.resolve_ifs(r) for name, r in template["Resources"].items() if self.holds(r)}
        self.outputs = {name: self.resolve_ifs(o) for name, o in template.get("Outputs", {}).items() if self.holds(o)}

    def holds(self, item):
        return "Condition" not in item or self.condition(item["Condition"])

    def condition(self, name):
        if name not in self.conditions:
            self.conditions[name] = bool(self.evaluate(self.condition_defs[name]))
        return self.conditions[name]

    def evaluate(self, node):
        """The value of a condition's expression (the functions a Conditions section may use)."""
        if not isinstance(node, dict):
            return node
        (function, argument), = node.items()
        if function == "Ref":
            return self.values[argument]
        if function == "Condition":
            return self.condition(argument)
        if function == "Fn::Equals":
            left, right = (self.evaluate(a) for a in argument)
            return str(left) == str(right)
        if function == "Fn::Not":
            return not self.evaluate(argument[0])
        if function == "Fn::And":
            return all(self.evaluate(a) for a in argument)
        if function == "Fn::Or":
            return any(self.evaluate(a) for a in argument)
        if function == "Fn::Split":
            separator, text = argument
            return str(self.evaluate(text)).split(separator)
        if function == "Fn::Select":
            index, items = argument
            return self.evaluate(items)[int(self.evaluate(index))]
        raise ValueError(f"no evaluation of {function} in a condition")

    def resolve_ifs(self, node):
        if isinstance(node, list):
            return [self.resolve_ifs(n) for n in node]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Fn::If"}:
            name, when_true, when_false = node["Fn::If"]
            return self.resolve_ifs(when_true if self.condition(name) else when_false)
        return {k: self.resolve_ifs(v) for k, v in node.items() if v != {"Ref": "AWS::NoValue"}}

    def of_type(self, kind):
        return {name: r for name, r in self.resources.items() if r["Type"] == kind}


@functools.cache
def stack(mode):
    with open(os.path.join(ROOT, "template.yaml")) as f:
        template = yaml_parse(f.read())
    # As `sam package` leaves it: the code uploaded, the functions' CodeUri an S3 location.
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://artifacts/code.zip"
    parameters = {**PSEUDO, **MODES[mode]}
    transformed = transform(copy.deepcopy(template), parameters, NoManagedPolicies())
    return Stack(transformed, MODES[mode])


def as_list(value):
    return value if isinstance(value, list) else [value]


def permissions_on(s, function):
    """The Lambda permissions on `function` (named by Ref, its name, or GetAtt, its ARN)."""
    names = [{"Ref": function}, {"Fn::GetAtt": [function, "Arn"]}]
    return [p["Properties"] for p in s.of_type("AWS::Lambda::Permission").values()
            if p["Properties"].get("FunctionName") in names]


def public(permission):
    return permission.get("Principal") == "*"


def test_jwt_urls_are_public_and_take_no_signature():
    s = stack("jwt")
    for function in FUNCTIONS:
        url = [u for u in s.of_type("AWS::Lambda::Url").values()
               if u["Properties"]["TargetFunctionArn"] == {"Ref": function}]
        assert len(url) == 1, f"{function}: {len(url)} URLs"
        assert url[0]["Properties"]["AuthType"] == "NONE", url[0]


def test_jwt_each_function_has_exactly_the_two_public_permissions():
    s = stack("jwt")
    for function in FUNCTIONS:
        expected = [
            {"FunctionName": {"Ref": function}, "Action": "lambda:InvokeFunctionUrl", "Principal": "*",
             "FunctionUrlAuthType": "NONE"},
            {"FunctionName": {"Ref": function}, "Action": "lambda:InvokeFunction", "Principal": "*",
             "InvokedViaFunctionUrl": True},
        ]
        got = permissions_on(s, function)
        key = lambda p: p["Action"]  # noqa: E731
        assert sorted(got, key=key) == sorted(expected, key=key), f"{function}: {got}"


def test_jwt_nothing_else_is_public_and_no_policy_for_chat_users():
    s = stack("jwt")
    public_ones = [p for p in s.of_type("AWS::Lambda::Permission").values() if public(p["Properties"])]
    assert len(public_ones) == 2 * len(FUNCTIONS), public_ones
    assert not s.of_type("AWS::IAM::ManagedPolicy"), s.of_type("AWS::IAM::ManagedPolicy")
    assert "ChatUserPolicyArn" not in s.outputs


def test_iam_urls_take_sigv4():
    s = stack("iam")
    urls = s.of_type("AWS::Lambda::Url")
    assert len(urls) == len(FUNCTIONS), urls
    for url in urls.values():
        assert url["Properties"]["AuthType"] == "AWS_IAM", url


def test_iam_no_permission_is_public_or_on_the_functions():
    s = stack("iam")
    permissions = s.of_type("AWS::Lambda::Permission")
    assert not [p for p in permissions.values() if public(p["Properties"])], permissions
    for function in FUNCTIONS:
        assert not permissions_on(s, function), f"{function}: {permissions_on(s, function)}"


def test_iam_chat_users_policy_grants_exactly_the_url_calls():
    s = stack("iam")
    policies = s.of_type("AWS::IAM::ManagedPolicy")
    assert len(policies) == 1, policies
    (name, policy), = policies.items()
    arns = sorted(({"Fn::GetAtt": [f, "Arn"]} for f in FUNCTIONS), key=str)
    statements = [
        {"Effect": s_["Effect"], "Action": as_list(s_["Action"]), "Resource": sorted(as_list(s_["Resource"]), key=str),
         "Condition": s_.get("Condition"), "rest": sorted(set(s_) - {"Sid", "Effect", "Action", "Resource", "Condition"})}
        for s_ in as_list(policy["Properties"]["PolicyDocument"]["Statement"])
    ]
    expected = [
        {"Effect": "Allow", "Action": ["lambda:InvokeFunctionUrl"], "Resource": arns, "Condition": None, "rest": []},
        {"Effect": "Allow", "Action": ["lambda:InvokeFunction"], "Resource": arns,
         "Condition": {"Bool": {"lambda:InvokedViaFunctionUrl": "true"}}, "rest": []},
    ]
    key = lambda st: st["Action"]  # noqa: E731
    assert sorted(statements, key=key) == sorted(expected, key=key), statements
    assert s.outputs.get("ChatUserPolicyArn", {}).get("Value") == {"Ref": name}, s.outputs.get("ChatUserPolicyArn")


def main():
    tests = [(name, f) for name, f in globals().items() if name.startswith("test_") and callable(f)]
    passed = failed = 0
    for name, test in tests:
        try:
            test()
        except Exception:  # noqa: BLE001 - every failure is reported, the run goes on
            failed += 1
            print(f"FAILED {name}")
            traceback.print_exc()
        else:
            passed += 1
            print(f"ok     {name}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
