#!/usr/bin/env python3
"""Who may call the function URLs, and what else the template promises, as CloudFormation would deploy template.yaml
in each AuthMode.

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

With CreateUserPool and CreateDistribution (and without): the app client is public (no secret) with the code flow
and JWT mode is wired to the pool; the distribution sends every route each function declares (in shared/app/src)
and every path of the local run's router (Cargo.toml) to that function, uncached; the page's address is one; IAM mode
with either is refused by the template's Rules. Sign-up: by default the pool admits only the users an administrator
creates (no pre-sign-up trigger); with SelfSignUp, Cognito may call the pre-sign-up check (tests/sign_up_check.py runs
its code), and the Rules refuse SelfSignUp without a user pool, e-mail domains or a token quota. CreateKnowledgeBase:
false (the default) makes none of its resources and grants nothing on them, an existing KnowledgeBaseId is searched as
before; true makes the knowledge base on S3 Vectors (its index sized for the embedding model, Bedrock's own keys
non-filterable), the documents bucket (private, TLS only) and the S3 data source, wires the chat functions' Retrieve and
the history function's documents settings (and the streaming function's reading of their statuses) to them, and scopes every role to exactly them; with KnowledgeBaseId too,
the Rules refuse it, and they refuse DocumentAccess open with it (everyone's uploads would be searched by all).
Sharing documents: JWT_GROUPS_CLAIM is cognito:groups with the template's pool, else groups, unless JwtGroupsClaim
names one; DOCUMENT_ADMIN_GROUP is DocumentAdminGroup, and the pool has that group exactly when both are set. Each
alarm reads a metric of every route the chat functions' routers declare (and of the dialects' routes to come), with
any model, as shared/runtime/src/metrics.rs records them; the latency alarm leaves the multi-agent rounds out. Every
parameter is in one group with a label. And each numeric parameter allows only what the configuration code accepts, as its source
says (code_bounds reads config.rs).

samconfig.example.toml's `team` configuration: its parameters are the template's, with values they allow, and the
Rules take them. deploy/create.sh, run offline with the AWS CLI and cargo stood in for, grants its one role what the
template's roles grant for the same settings (the embedding models, the allowed models, the guardrail, the knowledge
base, and its uploads).

Run by `make lint` with the venv's python; prints `N passed, N failed`, exit status 1 on any failure.
"""

import copy
import functools
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import tomllib

from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform

import checks  # tests/checks.py: the runner of the test_* functions
from routes import block, router_routes  # tests/routes.py: the routes the routers declare

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
    # One deploy with sign-in and one address: the user pool and the distribution.
    "pool": {"AuthMode": "jwt", "CreateUserPool": "true", "CreateDistribution": "true"},
    # The same, where people at two domains sign up themselves, under a daily token quota.
    "signup": {"AuthMode": "jwt", "CreateUserPool": "true", "CreateDistribution": "true", "SelfSignUp": "true",
               "SignUpEmailDomains": "example.com,example.org", "QuotaTokensPerDay": "200000"},
    # The stack makes the knowledge base (S3 Vectors, a documents bucket and its data source).
    "kb": {"AuthMode": "jwt", "CreateUserPool": "true", "CreateKnowledgeBase": "true"},
    # An existing knowledge base, as before CreateKnowledgeBase.
    "existing-kb": {"AuthMode": "jwt", "CreateUserPool": "true", "KnowledgeBaseId": "ABCDEFGHIJ"},
}
NO_VALUE = {"Ref": "AWS::NoValue"}


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
        if function == "Fn::Join":
            separator, items = argument
            return separator.join(str(i) for i in self.evaluate(items))
        raise ValueError(f"no evaluation of {function} in a condition")

    def resolve_ifs(self, node):
        """The node with every Fn::If resolved and, as CloudFormation does, every property or list item that is (or
        resolved to) AWS::NoValue left out."""
        if isinstance(node, list):
            return [r for r in (self.resolve_ifs(n) for n in node) if r != NO_VALUE]
        if not isinstance(node, dict):
            return node
        if set(node) == {"Fn::If"}:
            name, when_true, when_false = node["Fn::If"]
            return self.resolve_ifs(when_true if self.condition(name) else when_false)
        return {k: r for k, r in ((k, self.resolve_ifs(v)) for k, v in node.items()) if r != NO_VALUE}

    def of_type(self, kind):
        return {name: r for name, r in self.resources.items() if r["Type"] == kind}

    def refusals(self, rules):
        """The AssertDescriptions of the template's Rules that these parameters break (CloudFormation refuses the
        stack with them)."""
        broken = []
        for rule in rules.values():
            if "RuleCondition" in rule and not self.evaluate(rule["RuleCondition"]):
                continue
            broken += [a["AssertDescription"] for a in rule["Assertions"] if not self.evaluate(a["Assert"])]
        return broken


@functools.cache
def raw_template():
    with open(os.path.join(ROOT, "template.yaml")) as f:
        return yaml_parse(f.read())


def transformed(parameters):
    """The template as SAM's translator turns it into CloudFormation for these parameters."""
    template = copy.deepcopy(raw_template())
    # As `sam package` leaves it: the code uploaded, the functions' CodeUri an S3 location.
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://artifacts/code.zip"
    return transform(template, {**PSEUDO, **parameters}, NoManagedPolicies())


@functools.cache
def stack(mode):
    return Stack(transformed(MODES[mode]), MODES[mode])


def stack_with(mode, **parameters):
    """The stack of `mode` with these parameters besides."""
    every = {**MODES[mode], **parameters}
    return Stack(transformed(every), every)


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


# ---- Sign-in and one address (CreateUserPool, CreateDistribution) ----

def environment(s, function):
    return s.resources[function]["Properties"]["Environment"]["Variables"]


def test_user_pool_client_is_public_with_code_flow_and_wired_to_jwt_mode():
    s = stack("pool")
    clients = s.of_type("AWS::Cognito::UserPoolClient")
    assert list(clients) == ["UserPoolClient"], clients
    client = clients["UserPoolClient"]["Properties"]
    assert client.get("GenerateSecret") is False, client  # a page cannot keep a secret
    assert client["AllowedOAuthFlows"] == ["code"], client  # no implicit flow
    assert client["AllowedOAuthFlowsUserPoolClient"] is True, client
    assert {"openid", "email"} <= set(client["AllowedOAuthScopes"]), client
    assert set(client["ExplicitAuthFlows"]) == {"ALLOW_REFRESH_TOKEN_AUTH"}, client  # no password sent to the API
    pool = s.of_type("AWS::Cognito::UserPool")["UserPool"]["Properties"]
    assert pool["UsernameAttributes"] == ["email"] and pool["AutoVerifiedAttributes"] == ["email"], pool
    assert pool["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True, pool  # by default, no sign-up
    assert "UserPoolDomain" in s.of_type("AWS::Cognito::UserPoolDomain")
    issuer = {"Fn::Sub": "https://cognito-idp.${AWS::Region}.amazonaws.com/${UserPool}"}
    for function in FUNCTIONS:
        env = environment(s, function)
        assert env["AUTH_MODE"] == {"Ref": "AuthMode"} and s.values["AuthMode"] == "jwt", env
        assert env["JWT_ISSUER"] == issuer, env["JWT_ISSUER"]
        assert env["JWKS_URL"] == {"Fn::Sub": issuer["Fn::Sub"] + "/.well-known/jwks.json"}, env["JWKS_URL"]
        assert env["JWT_AUDIENCE"] == {"Ref": "UserPoolClient"}, env["JWT_AUDIENCE"]  # the ID token's aud
    page = environment(s, "HistoryFunction")
    assert page["PAGE_OIDC_CLIENT_ID"] == {"Ref": "UserPoolClient"}, page
    # The token, revocation and sign-in endpoints are on the hosted domain, which the page's policy must name.
    assert page["PAGE_OIDC_ORIGINS"] == {"Fn::Sub": "https://${UserPoolDomain}.auth.${AWS::Region}.amazoncognito.com"}, page
    # The page's address reaches the client through PageWiring, which nothing depends on (the cycle it breaks).
    wiring = s.resources["PageWiring"]["Properties"]
    assert wiring["ClientId"] == {"Ref": "UserPoolClient"}, wiring
    assert wiring["PageUrl"] == {"Fn::Sub": "https://${Distribution.DomainName}/"}, wiring
    assert not [n for n, r in s.resources.items() if "PageWiring" in str(r.get("DependsOn", ""))
                or ("PageWiring" in str(r) and not n.startswith("PageWiring"))], "something depends on PageWiring"


def first_behaviour(behaviours, path):
    """The origin CloudFront sends `path` to: the first cache behaviour whose PathPattern matches (`*` any
    characters, `?` one; case-sensitive), else the default one."""
    for b in behaviours["ordered"]:
        pattern = "^" + re.escape(b["PathPattern"]).replace(r"\*", ".*").replace(r"\?", ".") + "$"
        if re.match(pattern, path):
            return b["TargetOriginId"]
    return behaviours["default"]["TargetOriginId"]


def distribution_routing(s):
    (config,) = [d["Properties"]["DistributionConfig"] for d in s.of_type("AWS::CloudFront::Distribution").values()]
    origins = {}
    for origin in config["Origins"]:
        host = origin["DomainName"]  # !Select [2, !Split ["/", !GetAtt XFunctionUrl.FunctionUrl]]
        url = host["Fn::Select"][1]["Fn::Split"][1]["Fn::GetAtt"][0]
        origins[origin["Id"]] = {"ChatFunctionUrl": "chat", "ChatStreamFunctionUrl": "chat-stream",
                                 "HistoryFunctionUrl": "history"}[url]
    behaviours = {"default": config["DefaultCacheBehavior"], "ordered": config.get("CacheBehaviors", [])}
    return config, behaviours, lambda path: origins[first_behaviour(behaviours, path)]


def concrete(path):
    return path.replace("{id}", "3f2a9c").replace("{*path}", "anything/else").replace("{*id}", "us.model-v1:0")


def declared_routes():
    """Each path the functions' routers declare (shared/app, read by tests/routes.py), catch-alls included, and which
    functions declare it. A path two functions declare (the bare /multi-agent-chat, OpenAI's routes) may go to
    either."""
    declared = {}
    for path, route in router_routes(catch_alls=True).items():
        declared.setdefault(concrete(path), set()).update(route["functions"])
    return declared


def test_distribution_sends_every_route_to_its_function():
    s = stack("pool")
    config, behaviours, function_for = distribution_routing(s)
    declared = declared_routes()
    assert len(declared) >= 10 and "/" in declared and "/chat/stream" in declared, declared
    assert "/v1/chat/completions" in declared and "/v1/models" in declared, declared
    assert declared["/chat"] == {"chat"} and declared["/chat/stream"] == {"chat-stream"}, declared
    assert declared["/multi-agent-chat/batch"] == {"chat"} and "/documents/events" in declared, declared
    assert "/v1/embeddings" in declared, declared
    wrong = {p: (function_for(p), fs) for p, fs in declared.items() if function_for(p) not in fs}
    assert not wrong, f"the distribution sends these paths elsewhere: {wrong}"
    # The local run's router (Cargo.toml) names each path's function exactly; its catch-alls (`/`, `/{*path}`)
    # stand for a function URL answering every path, and the page at / is the history function's.
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        router = tomllib.load(f)["workspace"]["metadata"]["lambda"]["watch"]["router"]
    assert len(router) >= 15, router
    wrong = {p: (function_for(concrete(p)), f) for p, f in router.items()
             if p not in ("/", "/{*path}") and function_for(concrete(p)) != f}
    assert not wrong, f"the distribution and the local run's router disagree: {wrong}"
    assert function_for("/") == "history"
    # Uncached, every viewer header but Host, every method, HTTP/2 and 3.
    for b in [behaviours["default"], *behaviours["ordered"]]:
        assert b["CachePolicyId"] == "4135ea2d-6df8-44a3-9df3-4b5a84be39ad", b  # CachingDisabled
        assert b["OriginRequestPolicyId"] == "b689b0a8-53d0-40ab-baf2-68738e2966ac", b  # AllViewerExceptHostHeader
        assert set(b["AllowedMethods"]) == {"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"}, b
    assert config["HttpVersion"] == "http2and3", config["HttpVersion"]


def test_the_local_runs_router_names_every_route_the_chat_function_does_not_answer():
    """Under `cargo lambda watch` (the invoke suite) the router's catch-all goes to the chat function: every route it
    does not declare (the history function's, chat-stream's own) must be named in Cargo.toml's router."""
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        router = tomllib.load(f)["workspace"]["metadata"]["lambda"]["watch"]["router"]
    missing = sorted(p for p, r in router_routes().items() if "chat" not in r["functions"] and p not in router)
    assert not missing, f"Cargo.toml's router sends these to the chat function, which does not answer them: {missing}"


def test_the_local_runs_router_sends_each_route_where_the_distribution_does():
    """A route both chat functions declare (the dialects') goes where the distribution sends it (chat-stream, which
    streams), not to the router's catch-all (the buffered chat function, which refuses `stream: true`)."""
    s = stack("pool")
    _, _, function_for = distribution_routing(s)
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        router = tomllib.load(f)["workspace"]["metadata"]["lambda"]["watch"]["router"]
    elsewhere = sorted(p for p in router_routes() if p != "/" and function_for(concrete(p)) != "chat" and p not in router)
    assert not elsewhere, f"Cargo.toml's router sends these to the chat function, the distribution elsewhere: {elsewhere}"


def test_streaming_url_streams_and_the_page_uses_one_address():
    s = stack("pool")
    urls = {u["Properties"]["TargetFunctionArn"]["Ref"]: u["Properties"] for u in s.of_type("AWS::Lambda::Url").values()}
    assert urls["ChatStreamFunction"]["InvokeMode"] == "RESPONSE_STREAM", urls
    page = environment(s, "HistoryFunction")
    assert page["PAGE_CHAT_URL"] == "" and page["PAGE_STREAM_URL"] == "", page
    assert s.outputs["PageUrl"]["Value"] == {"Fn::Sub": "https://${Distribution.DomainName}/"}, s.outputs["PageUrl"]
    # Without the distribution the page calls the chat URLs on their own origins, and PageWiring lets it.
    j = stack("jwt")
    page = environment(j, "HistoryFunction")
    assert "ChatFunctionUrl" in str(page["PAGE_CHAT_URL"]) and "ChatStreamFunctionUrl" in str(page["PAGE_STREAM_URL"])
    assert j.outputs["PageUrl"]["Value"] == {"Fn::GetAtt": ["HistoryFunctionUrl", "FunctionUrl"]}
    assert j.resources["PageWiring"]["Properties"]["CorsFunctions"] == [{"Ref": "ChatFunction"},
                                                                        {"Ref": "ChatStreamFunction"}]
    assert "PATCH" in urls["HistoryFunction"].get("Cors", {}).get("AllowMethods", ["PATCH"])


def test_iam_mode_with_a_distribution_or_a_user_pool_is_refused():
    assert any("CreateDistribution" in r for r in refusals(AuthMode="iam", CreateDistribution="true"))
    assert any("CreateUserPool" in r for r in refusals(AuthMode="iam", CreateUserPool="true"))
    assert refusals(AuthMode="iam") == []
    assert refusals(**MODES["pool"]) == []
    assert refusals(**MODES["jwt"], CreateDistribution="true") == []
    assert len(refusals(AuthMode="jwt")) == 3  # jwt without a pool needs its issuer, audience and keys


def team_configuration():
    """The parameters samconfig.example.toml's `team` configuration deploys with (its `parameter_overrides`)."""
    with open(os.path.join(ROOT, "samconfig.example.toml"), "rb") as f:
        overrides = tomllib.load(f)["team"]["deploy"]["parameters"]["parameter_overrides"]
    return dict(o.split("=", 1) for o in overrides)


def test_the_team_configuration_deploys_in_one_step():
    """`sam deploy --config-env team` (docs/deploy.md, "One step for a team"): each name a parameter, each value one
    it allows, no Rule refuses it, and the stack has sign-in, one address, a knowledge base, the alarms' mail and the
    caps wired to the functions."""
    team = team_configuration()
    params = raw_template()["Parameters"]
    assert not set(team) - set(params), f"not template parameters: {sorted(set(team) - set(params))}"
    for name, value in team.items():
        p = params[name]
        if "AllowedValues" in p:
            assert value in [str(v) for v in p["AllowedValues"]], (name, value, p["AllowedValues"])
        if "AllowedPattern" in p:
            assert re.fullmatch(p["AllowedPattern"], value), (name, value, p["AllowedPattern"])
        if "MinValue" in p:
            assert float(value) >= float(p["MinValue"]), (name, value)
    refused = refusals(**team)
    assert refused == [], refused
    s = Stack(transformed(team), team)
    kinds = {r["Type"] for r in s.resources.values()}
    for kind in ("AWS::Cognito::UserPool", "AWS::CloudFront::Distribution", "AWS::Bedrock::KnowledgeBase",
                 "AWS::SNS::Subscription"):
        assert kind in kinds, f"the team's stack has no {kind}"
    env = environment(s, "ChatStreamFunction")
    for variable, parameter in [("AUTH_MODE", "AuthMode"), ("QUOTA_TOKENS_PER_DAY", "QuotaTokensPerDay"),
                                ("QUOTA_COST_PER_MONTH", "QuotaCostPerMonth"), ("RATE_LIMIT_PER_MINUTE", "RateLimitPerMinute")]:
        assert env[variable] == {"Ref": parameter}, (variable, env[variable])
    assert "cognito-idp" in env["JWT_ISSUER"]["Fn::Sub"], env["JWT_ISSUER"]
    assert env["KNOWLEDGE_BASE_ID"] == {"Fn::GetAtt": ["KnowledgeBase", "KnowledgeBaseId"]}, env["KNOWLEDGE_BASE_ID"]


# ---- Sign-up (SelfSignUp) ----

COGNITO = "cognito-idp.amazonaws.com"


def test_user_pool_admits_only_the_users_an_administrator_creates_by_default():
    for parameters in ({"AuthMode": "jwt", "CreateUserPool": "true"}, MODES["pool"]):
        s = Stack(transformed(parameters), parameters)
        pool = s.resources["UserPool"]["Properties"]
        assert pool["AdminCreateUserConfig"] == {"AllowAdminCreateUserOnly": True}, pool
        assert "LambdaConfig" not in pool, pool  # no trigger
        assert not [n for n in s.resources if n.startswith("SignUpCheck")], list(s.resources)
        assert not [p for p in s.of_type("AWS::Lambda::Permission").values()
                    if p["Properties"]["Principal"] == COGNITO], "Cognito may invoke something"
    # SelfSignUp without a pool makes nothing (and the Rules refuse it: below).
    s = stack("jwt")
    assert not [n for n in s.resources if n.startswith("SignUpCheck") or n == "UserPool"], list(s.resources)


def test_self_sign_up_goes_through_the_domain_check():
    s = stack("signup")
    pool = s.resources["UserPool"]["Properties"]
    assert pool["AdminCreateUserConfig"] == {"AllowAdminCreateUserOnly": False}, pool
    assert pool["LambdaConfig"] == {"PreSignUp": {"Fn::GetAtt": ["SignUpCheckFunction", "Arn"]}}, pool
    check = s.resources["SignUpCheckFunction"]["Properties"]
    assert check["Environment"]["Variables"] == {"SIGN_UP_EMAIL_DOMAINS": {"Ref": "SignUpEmailDomains"}}, check
    assert check["Role"] == {"Fn::GetAtt": ["SignUpCheckRole", "Arn"]} and int(check["Timeout"]) <= 5, check
    assert "SIGN_UP_EMAIL_DOMAINS" in check["Code"]["ZipFile"], "the code reads another variable"
    # Cognito may invoke the check, for this pool of this account only; nothing else may.
    permissions = [p["Properties"] for p in s.of_type("AWS::Lambda::Permission").values()
                   if p["Properties"]["FunctionName"] == {"Fn::GetAtt": ["SignUpCheckFunction", "Arn"]}]
    assert permissions == [{"FunctionName": {"Fn::GetAtt": ["SignUpCheckFunction", "Arn"]},
                            "Action": "lambda:InvokeFunction", "Principal": COGNITO,
                            "SourceArn": {"Fn::GetAtt": ["UserPool", "Arn"]},
                            "SourceAccount": {"Ref": "AWS::AccountId"}}], permissions
    # Its role writes its own logs and nothing else.
    (policy,) = s.resources["SignUpCheckRole"]["Properties"]["Policies"]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents"], statement
    assert statement["Resource"]["Fn::Sub"].endswith("log-group:/aws/lambda/${AWS::StackName}-sign-up-check:*")


def test_self_sign_up_is_refused_without_a_pool_domains_or_a_token_quota():
    signup = MODES["signup"]
    assert refusals(**signup) == []
    # Every quota off but the token ones: refused. One token quota, daily or monthly, is enough.
    every_other_limit = {"QuotaCostPerDay": "5", "QuotaCostPerMonth": "50", "RateLimitPerMinute": "10"}
    off = refusals(**{**signup, **every_other_limit, "QuotaTokensPerDay": "0"})
    assert len(off) == 1 and "token quota" in off[0], off
    assert len(refusals(**{**signup, "QuotaTokensPerDay": "0"})) == 1
    assert refusals(**{**signup, "QuotaTokensPerDay": "0", "QuotaTokensPerMonth": "3000000"}) == []
    assert refusals(**{**signup, "QuotaTokensPerMonth": "3000000"}) == []
    # No domains; no pool (nor jwt mode: the pool needs it).
    assert [r for r in refusals(**{**signup, "SignUpEmailDomains": ""}) if "SignUpEmailDomains" in r], "no domains"
    no_pool = refusals(**{**MODES["jwt"], "SelfSignUp": "true", "SignUpEmailDomains": "example.com",
                          "QuotaTokensPerDay": "1000"})
    assert len(no_pool) == 1 and "CreateUserPool" in no_pool[0], no_pool
    # Domains and quota missing at once: each said.
    assert len(refusals(AuthMode="jwt", CreateUserPool="true", SelfSignUp="true")) == 2
    # Admin-only sign-in needs none of them.
    assert refusals(AuthMode="jwt", CreateUserPool="true") == []
    # "0" is the token quotas' only way to say off: no leading zeros, so "00" cannot pass the Rule as a quota.
    parameters = raw_template()["Parameters"]
    for name in ("QuotaTokensPerDay", "QuotaTokensPerMonth"):
        pattern = parameters[name]["AllowedPattern"]
        assert parameters[name]["Default"] == "0", name
        for value in ("0", "1", "250000", "999999999999999"):
            assert re.fullmatch(pattern, value), (name, value)
        for value in ("00", "000", "01", "", " 1", "1000000000000000"):
            assert not re.fullmatch(pattern, value), (name, value)
    # The domains' pattern: comma-separated domains, or empty.
    pattern = parameters["SignUpEmailDomains"]["AllowedPattern"]
    for value in ("", "example.com", "Example.COM,mail.example.org", "a-b.example.co.uk"):
        assert re.fullmatch(pattern, value), value
    for value in ("example", "@example.com", "example.com, example.org", "example.com,", "*.example.com"):
        assert not re.fullmatch(pattern, value), value


def embedding_models_invoked(**parameters):
    """{function: [model id, …]} of the statement each chat function's role grants /v1/embeddings (none: absent)."""
    s = Stack(transformed({**MODES["jwt"], **parameters}), {**MODES["jwt"], **parameters})
    found = {}
    for function in ("ChatFunction", "ChatStreamFunction"):
        for policy in s.resources[f"{function}Role"]["Properties"]["Policies"]:
            for statement in as_list(policy["PolicyDocument"]["Statement"]):
                if statement.get("Sid") == "EmbedWithTheConfiguredEmbeddingModels":
                    assert statement["Action"] == ["bedrock:InvokeModel"], statement
                    prefix = "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/"
                    arns = [r["Fn::Sub"] for r in statement["Resource"]]
                    assert all(a.startswith(prefix) for a in arns), arns
                    found[function] = sorted(a[len(prefix):] for a in arns)
    return found


def test_the_chat_functions_may_invoke_exactly_the_embedding_models():
    titan = ["amazon.titan-embed-text-v2:0"]
    assert embedding_models_invoked() == {"ChatFunction": titan, "ChatStreamFunction": titan}
    two = ["cohere.embed-english-v3", "cohere.embed-v4:0"]
    assert embedding_models_invoked(EmbeddingModels="cohere.embed-v4:0,cohere.embed-english-v3") == {
        "ChatFunction": two, "ChatStreamFunction": two}
    assert embedding_models_invoked(EmbeddingModels="") == {}
    # The parameter takes only the ids the statement knows, comma-separated without spaces.
    pattern = raw_template()["Parameters"]["EmbeddingModels"]["AllowedPattern"]
    for value in ("", "amazon.titan-embed-text-v2:0", "cohere.embed-multilingual-v3,cohere.embed-v4:0"):
        assert re.fullmatch(pattern, value), value
    for value in ("amazon.titan-embed-text-v1", "cohere.embed-v4:0, amazon.titan-embed-text-v2:0", "x,",
                  "us.cohere.embed-v4:0"):
        assert not re.fullmatch(pattern, value), value


def raw_template_conditions():
    """The template's parameters and conditions alone (for its Rules), without resources to resolve."""
    t = raw_template()
    return {"Parameters": t["Parameters"], "Conditions": t["Conditions"], "Resources": {}}


def refusals(**parameters):
    """What the template's Rules refuse of a deploy with these parameters."""
    return Stack(raw_template_conditions(), parameters).refusals(raw_template()["Rules"])


def test_the_functions_cpu_is_one_literal_that_build_and_deploy_both_read():
    # `sam build` builds for a function's Architectures and `sam deploy` deploys them: from a parameter, the two could
    # resolve it differently (given to one command only, or kept by the stack from an earlier deploy).
    t = raw_template()
    assert t["Globals"]["Function"]["Architectures"] in (["arm64"], ["x86_64"]), t["Globals"]["Function"]
    for name, r in t["Resources"].items():
        if r["Type"] in ("AWS::Serverless::Function", "AWS::Lambda::Function"):
            own = r["Properties"].get("Architectures", [])
            assert all(isinstance(a, str) for a in own), f"{name}: Architectures {own}"


def test_every_parameter_is_in_one_group_with_a_label():
    t = raw_template()
    interface = t["Metadata"]["AWS::CloudFormation::Interface"]
    grouped = [p for g in interface["ParameterGroups"] for p in g["Parameters"]]
    assert sorted(grouped) == sorted(t["Parameters"]), set(grouped) ^ set(t["Parameters"])
    assert len(grouped) == len(set(grouped)), "a parameter in two groups"
    assert set(interface["ParameterLabels"]) == set(t["Parameters"]), set(interface["ParameterLabels"]) ^ set(t["Parameters"])


# ---- The numeric parameters' bounds against what the code accepts ----

U64_MAX = 2**64 - 1
CONFIG_SOURCES = ["shared/app/src/config.rs", "shared/edge/src/identity/mod.rs"]


def code_bounds():
    """{VARIABLE: (least, most)} of the numbers the configuration code reads, from its source: `number("X", …)` is
    a positive whole number (u64), `whole("X")` any whole number (0 is no limit), `to_u32("X", …)` at most u32::MAX,
    `!(a..=b).contains(&x)` and `if x > b` on a variable read by number() narrow it, MAX_PROMPT_TOKENS's
    `*n >= 100`, and each per-user limit's variable (LimitKind::setting) but the cost ones a whole number."""
    text = "".join(open(os.path.join(ROOT, p)).read() for p in CONFIG_SOURCES)
    bounds = {}
    for name in re.findall(r'\bnumber\(\s*"([A-Z_]+)"', text):
        bounds[name] = (1, U64_MAX)
    for name in re.findall(r'\bwhole\(\s*"([A-Z_]+)"', text):
        bounds[name] = (0, U64_MAX)
    for name in re.findall(r'\bto_u32\(\s*"([A-Z_]+)"', text):
        least, _ = bounds.get(name, (1, U64_MAX))
        bounds[name] = (least, 2**32 - 1)
    local = dict(re.findall(r'let (\w+) = number\(\s*"([A-Z_]+)"', text))
    for low, high, var in re.findall(r'!\(([\d_]+)\.\.=([\d_]+)\)\.contains\(&(\w+)\)', text):
        bounds[local[var]] = (int(low.replace("_", "")), int(high.replace("_", "")))
    for var, high in re.findall(r'if (\w+) > ([\d_]+) \{', text):
        if var in local:
            bounds[local[var]] = (bounds[local[var]][0], int(high.replace("_", "")))
    for name, low in re.findall(r'get\("([A-Z_]+)"\)[^;]*?\*n >= (\d+)', text, re.S):
        bounds[name] = (int(low), U64_MAX)
    # The per-user limits (usage_limits): the variable of each limit is its LimitKind::setting (limits.rs), read by
    # whole() (0 is no limit) but for the cost ones, which are dollars; and the rate limit's older name, a constant.
    with open(os.path.join(ROOT, "shared", "core", "src", "limits.rs")) as f:
        limits = f.read()
    setting, _ = block(limits, limits.index("pub fn setting(self)"))
    assert re.search(r'if kind\.resource\.is_dollars\(\) \{\s*dollars\(name\)\?\s*\} else \{\s*whole\(name\)\?', text), \
        "usage_limits no longer reads each limit's setting with whole() or dollars()"
    for resource, name in re.findall(r'\((\w+), \w+\) => "([A-Z_]+)"', setting):
        if resource != "Cost":
            bounds[name] = (0, U64_MAX)
    for constant, name in re.findall(r'const (\w+): &str = "([A-Z_]+)";', text):
        if re.search(r'\bwhole\(' + constant + r'\)', text):
            bounds[name] = (0, U64_MAX)
    return bounds


def parameter_variables(t):
    """{Parameter: VARIABLE} for each parameter a function's environment is (`VARIABLE: !Ref Parameter`)."""
    found = {}
    envs = [t["Globals"]["Function"]["Environment"]["Variables"]]
    envs += [r["Properties"].get("Environment", {}).get("Variables", {}) for r in t["Resources"].values()
             if r["Type"] == "AWS::Serverless::Function"]
    for env in envs:
        for variable, value in env.items():
            if isinstance(value, dict) and set(value) == {"Ref"} and value["Ref"] in t["Parameters"]:
                found[value["Ref"]] = variable
    return found


def test_numeric_parameters_allow_only_what_the_code_accepts():
    bounds = code_bounds()
    # The reading of the source must still find what it knows is there.
    assert bounds.get("MAX_IMAGES") == (1, U64_MAX), bounds.get("MAX_IMAGES")
    assert bounds.get("ATTACHMENT_URL_SECONDS") == (1, 604_800), bounds.get("ATTACHMENT_URL_SECONDS")
    assert bounds.get("MAX_OUTPUT_TOKENS") == (1, 2**32 - 1), bounds.get("MAX_OUTPUT_TOKENS")
    assert bounds.get("MAX_PROMPT_TOKENS") == (100, U64_MAX), bounds.get("MAX_PROMPT_TOKENS")
    assert bounds.get("QUOTA_TOKENS_PER_DAY") == (0, U64_MAX), bounds.get("QUOTA_TOKENS_PER_DAY")
    t = raw_template()
    variables = parameter_variables(t)
    problems, checked = [], 0
    for parameter, variable in sorted(variables.items()):
        if variable not in bounds:
            continue
        checked += 1
        least, most = bounds[variable]
        p = t["Parameters"][parameter]
        if p["Type"] == "Number":
            low, high = p.get("MinValue"), p.get("MaxValue")
            if low is None or int(low) < least:
                problems.append(f"{parameter}: MinValue {low}, but {variable} must be at least {least}")
            if most < U64_MAX and (high is None or int(high) > most):
                problems.append(f"{parameter}: MaxValue {high}, but {variable} must be at most {most}")
            if not (least <= int(p["Default"]) <= most):
                problems.append(f"{parameter}: Default {p['Default']} outside {least}..{most}")
            for allowed in p.get("AllowedValues", []):
                if not least <= int(allowed) <= most:
                    problems.append(f"{parameter}: AllowedValues has {allowed}")
        else:
            pattern = p.get("AllowedPattern")
            if pattern is None:
                problems.append(f"{parameter}: a String for the number {variable}, with no AllowedPattern")
                continue
            # CloudFormation matches the whole value; empty is unset (the code's default) and may be allowed.
            def allowed(value):
                return re.fullmatch(pattern, value) is not None
            refused_by_code = ["-1", "1.5", "x", "1e3", " 1"] + ([str(least - 1)] if least > 0 else [])
            refused_by_code += [str(most + 1)] if most < U64_MAX else [str(U64_MAX + 1)]
            for value in refused_by_code:
                if allowed(value):
                    problems.append(f"{parameter}: AllowedPattern lets {value!r}, which {variable} refuses")
            if not allowed(str(least)):
                problems.append(f"{parameter}: AllowedPattern refuses {least}, the least {variable} takes")
    assert checked >= 20, f"only {checked} numeric parameters found: {variables}"
    assert not problems, "\n".join(problems)


def rendered(node, values):
    """`node` with the functions a policy's ARNs are made with (Ref, Fn::Sub, Fn::Join, Fn::Split) evaluated."""
    if isinstance(node, list):
        return [rendered(n, values) for n in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        (function, argument), = node.items()
        if function == "Ref":
            return values[argument]
        if function == "Fn::Sub" and isinstance(argument, str):
            return re.sub(r"\$\{([^}]+)\}", lambda m: values[m.group(1)], argument)
        if function == "Fn::Join":
            separator, items = argument
            return separator.join(str(i) for i in rendered(items, values))
        if function == "Fn::Split":
            separator, text = argument
            return str(rendered(text, values)).split(separator)
    return {k: rendered(v, values) for k, v in node.items()}


def bedrock_statements(s, function):
    """The Allow statements of `function`'s role that name a Bedrock action, rendered."""
    role = s.resources[f"{function}Role"]["Properties"]
    statements = []
    for policy in role.get("Policies", []):
        for statement in as_list(policy["PolicyDocument"]["Statement"]):
            if any(a.startswith("bedrock:") for a in as_list(statement["Action"])):
                statements.append(rendered(statement, s.values))
    return statements


def allows(statements, action, arn, profile=None):
    """Whether one statement allows `action` on `arn` (IAM's wildcards), called through the inference profile
    `profile` (the bedrock:InferenceProfileArn of the request) when one is given."""
    def like(pattern, value):
        return re.fullmatch(re.escape(pattern).replace(r"\*", ".*").replace(r"\?", "."), value) is not None

    for statement in statements:
        if statement["Effect"] != "Allow" or action not in as_list(statement["Action"]):
            continue
        if not any(like(r, arn) for r in as_list(statement["Resource"])):
            continue
        conditions = statement.get("Condition", {})
        wanted = {**conditions.get("StringEquals", {}), **conditions.get("StringLike", {})}
        if set(wanted) - {"bedrock:InferenceProfileArn"}:
            continue
        if "bedrock:InferenceProfileArn" in wanted:
            patterns = as_list(wanted["bedrock:InferenceProfileArn"])
            exact = "StringEquals" in conditions
            if profile is None or not any(p == profile if exact else like(p, profile) for p in patterns):
                continue
        return True
    return False


def test_the_functions_invoke_exactly_the_configured_and_allowed_models():
    nova, haiku = "amazon.nova-pro-v1:0", "us.anthropic.claude-3-5-haiku-20241022-v1:0"
    fm = "arn:aws:bedrock:{}::foundation-model/{}".format
    profile = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/{}".format
    configured = MODES["jwt"]
    default_model = raw_template()["Parameters"]["ModelId"]["Default"]  # a global profile
    s = Stack(transformed({**configured, "AllowedModels": f"{nova},{haiku}"}), {**configured,
                                                                                "AllowedModels": f"{nova},{haiku}"})
    for function, actions in (("ChatFunction", ["bedrock:InvokeModel"]),
                              ("ChatStreamFunction", ["bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"])):
        statements = bedrock_statements(s, function)
        assert "ALLOWED_MODELS" in str(s.resources[function]["Properties"]["Environment"]), function
        for action in actions:
            # The configured model (through its profile, in every Region it routes to); the streaming function
            # also answers whole (an OpenAI request with stream: false).
            assert allows(statements, action, profile(default_model)), (function, action)
            assert allows(statements, action, fm("eu-west-1", default_model.split(".", 1)[1]),
                          profile(default_model)), (function, action)
            # A foundation model of the list, called directly.
            assert allows(statements, action, fm("us-east-1", nova)), (function, action)
            # A profile of the list, and its foundation model in a Region it routes to, through it only.
            base = haiku.split(".", 1)[1]
            assert allows(statements, action, profile(haiku)), (function, action)
            assert allows(statements, action, fm("us-west-2", base), profile(haiku)), (function, action)
            assert not allows(statements, action, fm("us-west-2", base)), (function, action)
            # Nothing else: another model, directly or through another profile.
            other = "meta.llama3-70b-instruct-v1:0"
            assert not allows(statements, action, fm("us-east-1", other)), (function, action)
            assert not allows(statements, action, profile(f"us.{other}")), (function, action)
            assert not allows(statements, action, fm("us-east-1", other), profile(f"us.{other}")), (function, action)
        # The buffered function never streams.
        if function == "ChatFunction":
            assert not allows(statements, "bedrock:InvokeModelWithResponseStream", profile(default_model))
    # Without AllowedModels, only the configured model.
    plain = stack("jwt")
    for function in ("ChatFunction", "ChatStreamFunction"):
        statements = bedrock_statements(plain, function)
        assert not any("Allowed" in st.get("Sid", "") for st in statements), statements
        assert not allows(statements, "bedrock:InvokeModel", fm("us-east-1", nova))
        assert allows(statements, "bedrock:InvokeModel", profile(default_model))


# ---- The knowledge base the stack makes (CreateKnowledgeBase) ----

KB_TYPES = ("AWS::Bedrock::KnowledgeBase", "AWS::Bedrock::DataSource", "AWS::S3Vectors::VectorBucket",
            "AWS::S3Vectors::Index")
KB_RESOURCES = {"DocumentsBucket", "DocumentsBucketPolicy", "DocumentsVectorBucket", "DocumentsVectorIndex",
                "KnowledgeBaseRole", "KnowledgeBase", "DocumentsDataSource"}
KB_OUTPUTS = {"DocumentsBucketName", "KnowledgeBaseId", "KnowledgeBaseDataSourceId"}
# The output size of each embedding model KnowledgeBaseEmbeddingModel allows (its default, as Bedrock's model cards say):
# the index must have it. A model added to the parameter without its size here fails the test below.
EMBEDDING_DIMENSIONS = {"amazon.titan-embed-text-v2:0": 1024, "cohere.embed-english-v3": 1024,
                        "cohere.embed-multilingual-v3": 1024}
DOCUMENT_ACTIONS = ["bedrock:IngestKnowledgeBaseDocuments", "bedrock:GetKnowledgeBaseDocuments",
                    "bedrock:ListKnowledgeBaseDocuments", "bedrock:DeleteKnowledgeBaseDocuments"]
# What the documents routes call (shared/aws/src/documents.rs): never ListKnowledgeBaseDocuments, which only the
# operator's bulk load makes with the operator's own credentials.
ROUTE_DOCUMENT_ACTIONS = ["bedrock:IngestKnowledgeBaseDocuments", "bedrock:GetKnowledgeBaseDocuments",
                          "bedrock:DeleteKnowledgeBaseDocuments"]


def role_statements(s, role):
    """Every statement of the inline policies of `role` (a function's SAM-made role is `{function}Role`)."""
    return [st for policy in s.resources[role]["Properties"].get("Policies", [])
            for st in as_list(policy["PolicyDocument"]["Statement"])]


def naming(statements, text):
    return [st for st in statements if text in str(st["Resource"])]


def test_without_create_knowledge_base_nothing_of_it_is_made_or_granted():
    for mode in ("jwt", "pool", "existing-kb"):
        s = stack(mode)
        assert not [n for n in s.resources if n in KB_RESOURCES], (mode, sorted(set(s.resources) & KB_RESOURCES))
        assert not [r for kind in KB_TYPES for r in s.of_type(kind)], mode
        assert not set(s.outputs) & KB_OUTPUTS, (mode, s.outputs.keys())
        for function in ("HistoryFunction", "ChatStreamFunction"):
            env = environment(s, function)
            assert env["DOCUMENTS_BUCKET"] == "" and env["KNOWLEDGE_BASE_DATA_SOURCE_ID"] == "", (function, env)
        for function in FUNCTIONS:
            statements = role_statements(s, f"{function}Role")
            assert not naming(statements, "Documents") and not naming(statements, "KnowledgeBase."), function
            assert not [st for st in statements if set(as_list(st["Action"])) & set(DOCUMENT_ACTIONS)], function


def test_an_existing_knowledge_base_is_searched_as_before():
    s = stack("existing-kb")
    arn = "arn:aws:bedrock:us-east-1:123456789012:knowledge-base/ABCDEFGHIJ"
    for function in ("ChatFunction", "ChatStreamFunction", "HistoryFunction"):
        assert environment(s, function)["KNOWLEDGE_BASE_ID"] == {"Ref": "KnowledgeBaseId"}, function
    for function in ("ChatFunction", "ChatStreamFunction"):
        # Hybrid search as the operator says their store takes it.
        assert environment(s, function)["KNOWLEDGE_BASE_HYBRID_SEARCH"] == {"Ref": "KnowledgeBaseHybridSearch"}
        statements = bedrock_statements(s, function)
        assert allows(statements, "bedrock:Retrieve", arn), function
        assert not allows(statements, "bedrock:Retrieve", arn.replace("ABCDEFGHIJ", "KLMNOPQRST")), function
    # No knowledge base at all: no Retrieve.
    plain = stack("pool")
    for function in ("ChatFunction", "ChatStreamFunction"):
        assert not [st for st in bedrock_statements(plain, function) if "bedrock:Retrieve" in as_list(st["Action"])]


def test_create_knowledge_base_makes_a_knowledge_base_on_s3_vectors_over_a_documents_bucket():
    s = stack("kb")
    assert KB_RESOURCES <= set(s.resources), KB_RESOURCES - set(s.resources)
    for kind in KB_TYPES:
        assert len(s.of_type(kind)) == 1, (kind, list(s.of_type(kind)))
    kb = s.resources["KnowledgeBase"]["Properties"]
    config = kb["KnowledgeBaseConfiguration"]
    assert config["Type"] == "VECTOR", config
    vector = config["VectorKnowledgeBaseConfiguration"]
    assert rendered(vector["EmbeddingModelArn"], s.values) == \
        "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0", vector
    assert vector["EmbeddingModelConfiguration"] == {
        "BedrockEmbeddingModelConfiguration": {"Dimensions": 1024, "EmbeddingDataType": "FLOAT32"}}, vector
    assert kb["StorageConfiguration"] == {"Type": "S3_VECTORS", "S3VectorsConfiguration": {
        "IndexArn": {"Fn::GetAtt": ["DocumentsVectorIndex", "IndexArn"]}}}, kb["StorageConfiguration"]
    assert kb["RoleArn"] == {"Fn::GetAtt": ["KnowledgeBaseRole", "Arn"]}, kb
    # The index: in the vector bucket, float32 of the model's size, and Bedrock's own keys (the chunk's text, its
    # bookkeeping) non-filterable, so that they do not count against a vector's 2 KB of filterable metadata while the
    # access lists (oids, groups) stay filterable.
    index = s.resources["DocumentsVectorIndex"]["Properties"]
    assert index["VectorBucketArn"] == {"Fn::GetAtt": ["DocumentsVectorBucket", "VectorBucketArn"]}, index
    assert index["DataType"] == "float32" and index["Dimension"] == 1024, index
    assert index["DistanceMetric"] in ("cosine", "euclidean"), index
    keys = index["MetadataConfiguration"]["NonFilterableMetadataKeys"]
    assert sorted(keys) == ["AMAZON_BEDROCK_METADATA", "AMAZON_BEDROCK_TEXT"], keys
    assert not {"oids", "groups"} & set(keys), keys
    # The data source: S3, over the documents bucket of this account; its vectors go when it does.
    source = s.resources["DocumentsDataSource"]["Properties"]
    assert source["KnowledgeBaseId"] == {"Fn::GetAtt": ["KnowledgeBase", "KnowledgeBaseId"]}, source
    assert source["DataSourceConfiguration"] == {"Type": "S3", "S3Configuration": {
        "BucketArn": {"Fn::GetAtt": ["DocumentsBucket", "Arn"]},
        "BucketOwnerAccountId": {"Ref": "AWS::AccountId"}}}, source
    assert source["DataDeletionPolicy"] == "DELETE", source
    # The documents bucket: encrypted, never public, unversioned (a delete removes), kept with the stack; TLS only.
    bucket = s.resources["DocumentsBucket"]
    props = bucket["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"][
        "SSEAlgorithm"] in ("AES256", "aws:kms"), props
    assert props["PublicAccessBlockConfiguration"] == {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                                       "IgnorePublicAcls": True, "RestrictPublicBuckets": True}, props
    assert props.get("VersioningConfiguration", {}).get("Status") != "Enabled", props
    assert bucket["DeletionPolicy"] == "Retain", bucket
    (deny, writers) = as_list(s.resources["DocumentsBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"])
    assert deny["Effect"] == "Deny" and deny["Principal"] == "*" and deny["Action"] == "s3:*", deny
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}, deny
    assert sorted(map(str, deny["Resource"])) == sorted(map(str, [
        {"Fn::GetAtt": ["DocumentsBucket", "Arn"]}, {"Fn::Sub": "${DocumentsBucket.Arn}/*"}])), deny
    # Who may write: the history function's role, and no one else unless DocumentLoaders names them (a file's
    # .metadata.json says who may find it, so a principal that writes one could share anything with anyone).
    history_role = {"Fn::GetAtt": ["HistoryFunctionRole", "Arn"]}
    assert writers["Effect"] == "Deny" and writers["Principal"] == "*", writers
    assert sorted(writers["Action"]) == ["s3:DeleteObject", "s3:PutObject"], writers
    assert writers["Resource"] == {"Fn::Sub": "${DocumentsBucket.Arn}/*"}, writers
    assert writers["Condition"] == {"ArnNotLike": {"aws:PrincipalArn": [history_role]}}, writers
    loader = "arn:aws:iam::123456789012:role/operator"
    with_loaders = stack_with("kb", DocumentLoaders=f"{loader},arn:aws:iam::123456789012:user/dana")
    (_, writers) = with_loaders.resources["DocumentsBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert writers["Condition"] == {"ArnNotLike": {"aws:PrincipalArn": {"Fn::Split": [
        ",", {"Fn::Sub": "${HistoryFunctionRole.Arn}," + "${DocumentLoaders}"}]}}}, writers
    assert with_loaders.values["DocumentLoaders"].split(",")[0] == loader
    pattern = raw_template()["Parameters"]["DocumentLoaders"]["AllowedPattern"]
    for value in ("", loader, f"{loader},arn:aws:iam::123456789012:user/dana",
                  "arn:aws:iam::123456789012:role/aws-reserved/sso.amazonaws.com/AWSReservedSSO_Admin_*"):
        assert re.fullmatch(pattern, value), value
    for value in ("*", "arn:aws:iam::123456789012:root", f"{loader}, {loader}", f"{loader},", "operator"):
        assert not re.fullmatch(pattern, value), value
    assert s.outputs["DocumentsBucketName"]["Value"] == {"Ref": "DocumentsBucket"}
    assert s.outputs["KnowledgeBaseId"]["Value"] == {"Fn::GetAtt": ["KnowledgeBase", "KnowledgeBaseId"]}
    assert s.outputs["KnowledgeBaseDataSourceId"]["Value"] == {"Fn::GetAtt": ["DocumentsDataSource", "DataSourceId"]}


def test_self_sign_up_with_uploads_is_refused_without_an_upload_quota():
    signup = MODES["signup"]
    # Without the knowledge base there are no uploads: the token quota is enough.
    assert refusals(**signup) == []
    uploads = {**signup, "CreateKnowledgeBase": "true"}
    (refused,) = refusals(**uploads)
    assert "upload quota" in refused, refused
    assert refusals(**uploads, QuotaUploadedDocumentsPerDay="20") == []
    assert refusals(**uploads, QuotaUploadedBytesPerDay="50000000") == []
    # Admin-made users only: the operator chose who uploads, no quota needed.
    assert refusals(**{**MODES["kb"]}) == []


def test_reserved_concurrency_caps_each_function_only_when_asked():
    functions = ("ChatFunction", "ChatStreamFunction", "HistoryFunction")
    s = stack("pool")
    for function in functions:
        assert "ReservedConcurrentExecutions" not in s.resources[function]["Properties"], function
    s = stack_with("pool", ReservedConcurrency="50")
    for function in functions:
        assert s.resources[function]["Properties"]["ReservedConcurrentExecutions"] == {"Ref": "ReservedConcurrency"}
    assert s.values["ReservedConcurrency"] == "50"
    # No other function of the stack is capped (the sign-up trigger and the page's wiring are the account's).
    capped = {n for n, r in s.resources.items() if r["Type"] == "AWS::Lambda::Function"
              and "ReservedConcurrentExecutions" in r["Properties"]}
    assert capped == set(functions), capped


def test_the_knowledge_base_index_fits_each_embedding_model_it_may_use():
    allowed = raw_template()["Parameters"]["KnowledgeBaseEmbeddingModel"]["AllowedValues"]
    assert raw_template()["Parameters"]["KnowledgeBaseEmbeddingModel"]["Default"] == "amazon.titan-embed-text-v2:0"
    assert set(allowed) <= set(EMBEDDING_DIMENSIONS), set(allowed) - set(EMBEDDING_DIMENSIONS)
    for model in allowed:
        parameters = {**MODES["kb"], "KnowledgeBaseEmbeddingModel": model}
        s = Stack(transformed(parameters), parameters)
        assert s.resources["DocumentsVectorIndex"]["Properties"]["Dimension"] == EMBEDDING_DIMENSIONS[model], model
        vector = s.resources["KnowledgeBase"]["Properties"]["KnowledgeBaseConfiguration"][
            "VectorKnowledgeBaseConfiguration"]
        assert rendered(vector["EmbeddingModelArn"], s.values).endswith(f"::foundation-model/{model}"), vector
        told = vector.get("EmbeddingModelConfiguration", {}).get("BedrockEmbeddingModelConfiguration", {})
        assert told.get("Dimensions", EMBEDDING_DIMENSIONS[model]) == EMBEDDING_DIMENSIONS[model], (model, told)
        # The knowledge base's role embeds with that model only.
        invoke = [st for st in role_statements(s, "KnowledgeBaseRole") if "bedrock:InvokeModel" in as_list(st["Action"])]
        assert [rendered(st["Resource"], s.values) for st in invoke] == [
            [f"arn:aws:bedrock:us-east-1::foundation-model/{model}"]], invoke


def test_the_created_knowledge_base_is_wired_to_the_functions_and_scoped():
    s = stack("kb")
    kb_id = {"Fn::GetAtt": ["KnowledgeBase", "KnowledgeBaseId"]}
    kb_arn = {"Fn::GetAtt": ["KnowledgeBase", "KnowledgeBaseArn"]}
    for function in FUNCTIONS:
        assert environment(s, function)["KNOWLEDGE_BASE_ID"] == kb_id, function
    # The chat functions search it (Retrieve on it alone) and touch neither the documents' bytes nor their
    # ingestion; the streaming one reads where each stands (GET /documents/events pushes it) and nothing more.
    for function in ("ChatFunction", "ChatStreamFunction"):
        statements = role_statements(s, f"{function}Role")
        (retrieve,) = [st for st in statements if "bedrock:Retrieve" in as_list(st["Action"])]
        assert as_list(retrieve["Action"]) == ["bedrock:Retrieve"] and as_list(retrieve["Resource"]) == [kb_arn]
        assert not naming(statements, "DocumentsBucket"), function
        on_documents = [st for st in statements if set(as_list(st["Action"])) & set(DOCUMENT_ACTIONS)]
        env = environment(s, function)
        if function == "ChatFunction":
            assert not on_documents, function
            assert "DOCUMENTS_BUCKET" not in env and "KNOWLEDGE_BASE_DATA_SOURCE_ID" not in env, function
        else:
            assert [(as_list(st["Action"]), as_list(st["Resource"])) for st in on_documents] == [
                (["bedrock:GetKnowledgeBaseDocuments"], [kb_arn])], on_documents
            assert all(st["Effect"] == "Allow" and "Condition" not in st for st in on_documents)
            assert env["DOCUMENTS_BUCKET"] == {"Ref": "DocumentsBucket"}, env
            assert env["KNOWLEDGE_BASE_DATA_SOURCE_ID"] == {"Fn::GetAtt": ["DocumentsDataSource", "DataSourceId"]}, env
        # S3 Vectors takes SEMANTIC search only: Bedrock refuses HYBRID on any store but OpenSearch Serverless.
        assert env["KNOWLEDGE_BASE_HYBRID_SEARCH"] == "false", function
    # The history function keeps, ingests and deletes documents: exactly these actions on exactly these resources.
    # It never reads a document's bytes back, nor lists the data source.
    env = environment(s, "HistoryFunction")
    assert env["DOCUMENTS_BUCKET"] == {"Ref": "DocumentsBucket"}, env
    assert env["KNOWLEDGE_BASE_DATA_SOURCE_ID"] == {"Fn::GetAtt": ["DocumentsDataSource", "DataSourceId"]}, env
    statements = role_statements(s, "HistoryFunctionRole")
    on_documents = naming(statements, "DocumentsBucket")
    assert [(sorted(as_list(st["Action"])), as_list(st["Resource"])) for st in on_documents] == [
        (["s3:DeleteObject", "s3:PutObject"], [{"Fn::Sub": "${DocumentsBucket.Arn}/*"}])], on_documents
    on_kb = naming(statements, "KnowledgeBase")
    assert [(sorted(as_list(st["Action"])), as_list(st["Resource"])) for st in on_kb] == [
        (sorted(ROUTE_DOCUMENT_ACTIONS), [kb_arn])], on_kb
    assert all(st["Effect"] == "Allow" and "Condition" not in st for st in on_documents + on_kb)
    # Nothing else in the stack may use the knowledge base's role or ingest into it.
    for name, r in s.resources.items():
        if name not in ("KnowledgeBase", "KnowledgeBaseRole") and "KnowledgeBaseRole" in str(r):
            raise AssertionError(f"{name} names KnowledgeBaseRole")


def test_the_knowledge_base_role_is_bedrocks_for_this_account_and_reaches_only_its_own_resources():
    s = stack("kb")
    role = s.resources["KnowledgeBaseRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Effect"] == "Allow" and trust["Action"] == "sts:AssumeRole", trust
    assert trust["Principal"] == {"Service": "bedrock.amazonaws.com"}, trust
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}, trust
    assert rendered(trust["Condition"]["ArnLike"]["aws:SourceArn"], s.values) == \
        "arn:aws:bedrock:us-east-1:123456789012:knowledge-base/*", trust
    granted = {}
    for st in role_statements(s, "KnowledgeBaseRole"):
        assert st["Effect"] == "Allow", st
        for action in as_list(st["Action"]):
            assert "*" not in action, st
            granted.setdefault(action, []).extend(str(r) for r in as_list(st["Resource"]))
    index = str({"Fn::GetAtt": ["DocumentsVectorIndex", "IndexArn"]})
    assert granted == {
        "bedrock:InvokeModel": [str({"Fn::Sub": "arn:${AWS::Partition}:bedrock:${AWS::Region}::foundation-model/"
                                            "${KnowledgeBaseEmbeddingModel}"})],
        "s3:ListBucket": [str({"Fn::GetAtt": ["DocumentsBucket", "Arn"]})],
        "s3:GetObject": [str({"Fn::Sub": "${DocumentsBucket.Arn}/*"})],
        "s3vectors:GetIndex": [index], "s3vectors:PutVectors": [index], "s3vectors:GetVectors": [index],
        "s3vectors:DeleteVectors": [index], "s3vectors:QueryVectors": [index],
    }, granted


def test_create_knowledge_base_with_a_knowledge_base_id_is_refused():
    both = refusals(**MODES["kb"], KnowledgeBaseId="ABCDEFGHIJ")
    assert len(both) == 1 and "KnowledgeBaseId" in both[0] and "CreateKnowledgeBase" in both[0], both
    assert refusals(**MODES["kb"]) == []
    assert refusals(**MODES["existing-kb"]) == []
    p = raw_template()["Parameters"]["CreateKnowledgeBase"]
    assert p["Default"] == "false" and sorted(p["AllowedValues"]) == ["false", "true"], p



def test_document_access_open_with_create_knowledge_base_is_refused():
    # open searches with no filter: everyone's private uploads into the stack's bucket would be found by all.
    both = refusals(**MODES["kb"], DocumentAccess="open")
    assert len(both) == 1 and "DocumentAccess" in both[0] and "CreateKnowledgeBase" in both[0], both
    assert "private uploads" in both[0] and "no filter" in both[0], both
    assert refusals(**MODES["kb"], DocumentAccess="enforced") == []
    # An existing knowledge base the operator fills without uploads may still be open (nothing of it is private).
    assert refusals(**MODES["existing-kb"], DocumentAccess="open") == []
    assert refusals(**MODES["pool"], DocumentAccess="open") == []


# ---- deploy/create.sh grants what the template grants ----

# Stand-ins for the AWS CLI, cargo and cargo-lambda: create.sh runs whole, offline, and the role's policy document is
# kept.
FAKE_AWS = r"""#!/bin/bash
case "$*" in
  *generate-cli-skeleton*) echo '{"InvokedViaFunctionUrl": true}' ;;
  "configure get region") echo us-east-1 ;;
  *"get-caller-identity --query Account"*) echo 123456789012 ;;
  *"get-caller-identity --query Arn"*) echo arn:aws:iam::123456789012:user/dev ;;
  *Table.TableArn*) echo arn:aws:dynamodb:us-east-1:123456789012:table/chat-backend ;;
  *Role.Arn*) echo arn:aws:iam::123456789012:role/chat-backend-functions ;;
  *put-role-policy*)
    while [ $# -gt 0 ]; do [ "$1" = --policy-document ] && printf '%s' "$2" > "$FAKE_AWS_POLICY"; shift; done ;;
  *FunctionUrl*|*function-url*) echo https://abc.lambda-url.us-east-1.on.aws/ ;;
esac
exit 0
"""


def create_sh_policy(env):
    """The role policy deploy/create.sh puts for `env` (its settings), run against the stand-ins."""
    with tempfile.TemporaryDirectory() as d:
        for name, text in (("aws", FAKE_AWS), ("cargo", "#!/bin/sh\nexit 0\n"), ("cargo-lambda", "#!/bin/sh\nexit 0\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(d, name), 0o755)
        policy = os.path.join(d, "policy.json")
        run = subprocess.run(["bash", "deploy/create.sh"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PATH": f"{d}:{os.environ['PATH']}", "AWS_REGION": "us-east-1",
                                  "ROLE_WAIT_SECONDS": "0", "FAKE_AWS_POLICY": policy, **env})
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        with open(policy) as f:
            return json.load(f)


def by_sid(statements):
    """{Sid: (actions, resources, condition)}, each a sorted tuple, statements of one Sid merged."""
    out = {}
    for st in statements:
        actions, resources, condition = out.get(st["Sid"], (set(), set(), None))
        out[st["Sid"]] = (actions | set(as_list(st["Action"])), resources | set(as_list(st["Resource"])),
                          json.dumps(st.get("Condition"), sort_keys=True) if st.get("Condition") else condition)
    return {sid: (tuple(sorted(a)), tuple(sorted(r)), c) for sid, (a, r, c) in out.items()}


def test_create_sh_grants_what_the_template_grants():
    """The embedding models /v1/embeddings serves (the code's default when unset), the models an OpenAI client may
    name, the guardrail and the knowledge base: the same actions on the same resources as the template's roles (their
    union: create.sh has one role for the three functions). And the uploads into a named knowledge base: the actions
    the template grants on the one it creates."""
    shared = {"ALLOWED_MODELS": "us.amazon.nova-pro-v1:0", "GUARDRAIL_ID": "gr1abcdefgh", "KNOWLEDGE_BASE_ID": "ABCDEFGHIJ"}
    script = by_sid(create_sh_policy({"EXTRA_ENV": json.dumps(shared)})["Statement"])
    params = {"AuthMode": "iam", "AllowedModels": shared["ALLOWED_MODELS"], "GuardrailId": shared["GUARDRAIL_ID"],
              "KnowledgeBaseId": shared["KNOWLEDGE_BASE_ID"]}
    s = Stack(transformed(params), params)
    compared = ("EmbedWithTheConfiguredEmbeddingModels", "InvokeTheAllowedModels",
                "InvokeTheAllowedModelsInEveryRegionOfTheirProfiles", "ApplyTheConfiguredGuardrail",
                "RetrieveFromTheConfiguredKnowledgeBase")
    template = by_sid([rendered(st, s.values) for function in ("ChatFunction", "ChatStreamFunction", "HistoryFunction")
                       for st in role_statements(s, f"{function}Role") if st.get("Sid") in compared])
    for sid in compared:
        assert sid in template, f"the template has no {sid}: {sorted(template)}"
        assert script.get(sid) == template[sid], f"{sid}:\n  create.sh: {script.get(sid)}\n  template:  {template[sid]}"
    # Without an embedding model named, the functions serve (and the role may invoke) the code's default.
    default = by_sid(create_sh_policy({})["Statement"])
    assert default["EmbedWithTheConfiguredEmbeddingModels"][1] == (
        "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-embed-text-v2:0",), default
    assert "EmbedWithTheConfiguredEmbeddingModels" not in by_sid(create_sh_policy({"EMBEDDING_MODELS": ""})["Statement"])
    # Uploads into a knowledge base the script is told of: the template's actions for its own.
    docs = by_sid(create_sh_policy({"EXTRA_ENV": json.dumps({**shared, "DOCUMENTS_BUCKET": "docs-bucket",
                                                              "KNOWLEDGE_BASE_DATA_SOURCE_ID": "DS12345678"})})["Statement"])
    kb = Stack(transformed(MODES["kb"]), MODES["kb"])
    created = {st["Sid"]: tuple(sorted(as_list(st["Action"]))) for st in role_statements(kb, "HistoryFunctionRole")
               if st.get("Sid") in ("KeepTheDocuments", "IngestTheDocuments")}
    for sid in ("KeepTheDocuments", "IngestTheDocuments"):
        assert docs[sid][0] == created[sid], (sid, docs[sid], created[sid])
    assert docs["IngestTheDocuments"][1] == ("arn:aws:bedrock:us-east-1:123456789012:knowledge-base/ABCDEFGHIJ",)
    assert docs["KeepTheDocuments"][1] == ("arn:aws:s3:::docs-bucket/*",)


# ---- API keys leave with their owner (issue 51) ----

def test_key_checks_ask_the_pool_exactly_when_the_stack_makes_it():
    """With CreateUserPool each function that checks API keys names the pool (COGNITO_USER_POOL_ID) and may read a
    user of it, and of it only (AdminGetUser); without, the variable is empty and nothing of Cognito is granted."""
    for mode in ("pool", "signup", "kb"):
        s = stack(mode)
        for function in FUNCTIONS:
            assert environment(s, function)["COGNITO_USER_POOL_ID"] == {"Ref": "UserPool"}, (mode, function)
            granted = [st for st in role_statements(s, f"{function}Role")
                       if any(a.startswith("cognito-idp:") for a in as_list(st["Action"]))]
            assert [(st["Sid"], as_list(st["Action"]), as_list(st["Resource"])) for st in granted] == [
                ("ReadTheKeyOwnersAccount", ["cognito-idp:AdminGetUser"], [{"Fn::GetAtt": ["UserPool", "Arn"]}])
            ], (mode, function, granted)
    for mode in ("jwt", "iam"):
        s = stack(mode)
        for function in FUNCTIONS:
            assert environment(s, function)["COGNITO_USER_POOL_ID"] == "", (mode, function)
            assert "cognito-idp" not in json.dumps(role_statements(s, f"{function}Role")), (mode, function)


# ---- Sharing documents (DocumentAdminGroup, JwtGroupsClaim) ----

def groups_settings(**parameters):
    """{function: (JWT_GROUPS_CLAIM, DOCUMENT_ADMIN_GROUP)} as these parameters deploy them, and the stack."""
    s = Stack(transformed(parameters), parameters)
    return {f: tuple(rendered(environment(s, f)[v], s.values) for v in ("JWT_GROUPS_CLAIM", "DOCUMENT_ADMIN_GROUP"))
            for f in FUNCTIONS}, s


def test_the_groups_claim_is_cognitos_with_the_pool_else_groups_unless_named():
    # The template's pool: Cognito puts the groups in cognito:groups.
    for mode in ("pool", "kb"):
        settings, _ = groups_settings(**MODES[mode])
        assert {f: claim for f, (claim, _) in settings.items()} == {f: "cognito:groups" for f in FUNCTIONS}, settings
    # Another issuer (or IAM, where no token is read): the usual groups.
    for mode in ("jwt", "iam"):
        settings, _ = groups_settings(**MODES[mode])
        assert {f: claim for f, (claim, _) in settings.items()} == {f: "groups" for f in FUNCTIONS}, (mode, settings)
    # A claim the operator names wins, with the pool or without.
    for mode in ("pool", "jwt"):
        settings, _ = groups_settings(**MODES[mode], JwtGroupsClaim="roles")
        assert {f: claim for f, (claim, _) in settings.items()} == {f: "roles" for f in FUNCTIONS}, (mode, settings)
    p = raw_template()["Parameters"]["JwtGroupsClaim"]
    assert p["Default"] == "", p


def test_the_document_administrators_group_is_wired_and_made_exactly_with_the_pool():
    groups = lambda s: list(s.of_type("AWS::Cognito::UserPoolGroup").values())  # noqa: E731
    # Unset: nobody administers documents, and no group is made.
    for mode in ("pool", "jwt", "kb"):
        settings, s = groups_settings(**MODES[mode])
        assert {f: admin for f, (_, admin) in settings.items()} == {f: "" for f in FUNCTIONS}, (mode, settings)
        assert groups(s) == [], (mode, groups(s))
    assert raw_template()["Parameters"]["DocumentAdminGroup"]["Default"] == ""
    # Set, with the stack's pool: the functions name it and the pool has it.
    for mode in ("pool", "kb"):
        settings, s = groups_settings(**MODES[mode], DocumentAdminGroup="doc-admins")
        assert {f: admin for f, (_, admin) in settings.items()} == {f: "doc-admins" for f in FUNCTIONS}, settings
        (group,) = groups(s)
        assert group["Properties"]["UserPoolId"] == {"Ref": "UserPool"}, group
        assert rendered(group["Properties"]["GroupName"], s.values) == "doc-admins", group
    # Set, with another issuer: the functions name it, and the issuer's own groups are the operator's to make.
    settings, s = groups_settings(**MODES["jwt"], DocumentAdminGroup="doc-admins")
    assert {f: admin for f, (_, admin) in settings.items()} == {f: "doc-admins" for f in FUNCTIONS}, settings
    assert groups(s) == [], groups(s)
    # The pattern: a Cognito group name (no spaces, at most 128 characters), or empty.
    pattern = raw_template()["Parameters"]["DocumentAdminGroup"]["AllowedPattern"]
    for value in ("", "doc-admins", "Document_Admins.2", "x" * 128):
        assert re.fullmatch(pattern, value), value
    for value in ("doc admins", " doc-admins", "x" * 129):
        assert not re.fullmatch(pattern, value), value


# ---- The alarms see every route ----

def turn_records(function, route, model):
    """The records one turn's metrics go into, as shared/runtime/src/metrics.rs writes them: [(dimensions, metric
    names)], the record by function, route and model with every metric, and the one by kind with BY_KIND's."""
    with open(os.path.join(ROOT, "shared", "runtime", "src", "metrics.rs")) as f:
        text = f.read()
    every = re.findall(r'^\s*\("([A-Za-z]+)", (?:Some\(Unit::\w+\)|None)\),$', text, re.M)
    by_kind = re.findall(r'"([A-Za-z]+)"', re.search(r'const BY_KIND: &\[&str\] = &\[([^\]]*)\];', text).group(1))
    prefix = re.search(r'const MULTI_AGENT_ROUTES: &str = "([^"]+)";', text).group(1)
    kind_of, _ = block(text, text.index("pub fn kind_of("))
    assert re.fullmatch(r'\s*if route\.starts_with\(MULTI_AGENT_ROUTES\) \{\s*"agents"\s*\} else \{\s*"answer"\s*\}\s*',
                        kind_of), "kind_of is no longer what this test reads"
    assert len(every) >= 15 and set(by_kind) <= set(every), (every, by_kind)
    kind = "agents" if route.startswith(prefix) else "answer"
    return [({"function": function, "route": route, "model": model}, set(every)), ({"kind": kind}, set(by_kind))]


def alarm_reads(s, alarm):
    """The MetricStats the alarm's answer is made of: the returned one, or those its returned expression names."""
    metrics = s.resources[alarm]["Properties"]["Metrics"]
    (returned,) = [m for m in metrics if m.get("ReturnData", True)]
    if "MetricStat" in returned:
        return [returned["MetricStat"]]
    named = set(re.findall(r"\b[a-z][a-z0-9_]*\b", returned["Expression"]))
    stats = [m for m in metrics if m["Id"] in named]
    assert all("MetricStat" in m for m in stats), (alarm, stats)
    return [m["MetricStat"] for m in stats]


def covers(s, stat, records):
    """Whether `stat` is a metric one of `records` gives (its namespace, name and exactly its dimensions)."""
    metric = stat["Metric"]
    if metric["Namespace"] != {"Ref": "MetricsNamespace"}:
        return False
    dimensions = {d["Name"]: rendered(d["Value"], s.values) for d in metric.get("Dimensions", [])}
    return any(dimensions == dims and metric["MetricName"] in names for dims, names in records)


def test_each_alarm_sees_every_route_and_model_the_routes_to_come_too():
    s = stack("pool")
    alarms = s.of_type("AWS::CloudWatch::Alarm")
    assert set(alarms) == {"ErrorRateAlarm", "ThrottlesAlarm", "LatencyAlarm", "DailyCostAlarm"}, list(alarms)
    # Every route the chat functions declare, and the dialects' to come; with the default model and another one.
    routes = {path: functions for path, functions in declared_routes().items() if functions & {"chat", "chat-stream"}}
    routes.update({"/v1/messages": {"chat", "chat-stream"}, "/v1/responses": {"chat", "chat-stream"}})
    assert {"/v1/chat/completions", "/v1/embeddings", "/chat", "/multi-agent-chat/stream"} <= set(routes), routes
    models = [s.values["ModelId"], "us.amazon.nova-pro-v1:0"]
    multi_agent = [r for r in routes if r.startswith("/multi-agent-chat")]
    assert multi_agent, routes
    for alarm in alarms:
        reads = alarm_reads(s, alarm)
        names = {stat["Metric"]["MetricName"] for stat in reads}
        assert names, alarm
        for route, functions in routes.items():
            for function in functions:
                for model in models:
                    records = turn_records(function, route, model)
                    for name in names:
                        seen = [stat for stat in reads if stat["Metric"]["MetricName"] == name
                                and covers(s, stat, records)]
                        # The latency alarm leaves the multi-agent rounds out (several model calls each).
                        if alarm == "LatencyAlarm" and route in multi_agent:
                            assert not seen, (alarm, route)
                        else:
                            assert seen, f"{alarm} does not see {name} of {function} {route} ({model})"
    # The rate is the errors over the turns of them all; the daily cost a day's sum.
    assert {st["Metric"]["MetricName"] for st in alarm_reads(s, "ErrorRateAlarm")} == {"Errors", "Turns"}
    assert all(st["Period"] == 86400 and st["Stat"] == "Sum" for st in alarm_reads(s, "DailyCostAlarm"))
    assert [st["Stat"] for st in alarm_reads(s, "LatencyAlarm")] == ["p99"]

if __name__ == "__main__":
    sys.exit(checks.run(globals()))
