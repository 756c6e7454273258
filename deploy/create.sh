#!/usr/bin/env bash
# Deploys the backend without SAM: cargo-lambda builds the three functions, the AWS CLI creates what template.yaml
# would (the essentials: no dashboard, alarms, user pool or distribution). Run again, it updates the code and the
# settings and leaves the data alone. deploy/remove.sh removes what this made. See docs/deploy.md.
#
#   deploy/create.sh                                  # AuthMode iam: callers sign with SigV4
#   AUTH_MODE=jwt JWT_ISSUER=https://… JWT_AUDIENCE=… JWKS_URL=https://…/jwks.json deploy/create.sh
#
# Settings (environment variables):
#   NAME          prefix of every resource (default chat-backend): functions NAME-chat, NAME-chat-stream,
#                 NAME-history, table NAME, bucket NAME-files-ACCOUNT-REGION, role NAME-functions, policy
#                 NAME-chat-users (iam mode), log groups /aws/lambda/NAME-*
#   AWS_REGION    the Region (default: the CLI's configured one)
#   AUTH_MODE     iam (default) or jwt; jwt needs JWT_ISSUER, JWT_AUDIENCE, JWKS_URL (and PAGE_OIDC_CLIENT_ID for
#                 the page to sign in)
#   MODEL_ID      model or inference profile (default: Claude Haiku 4.5's global profile, as the template)
#   ARCH          arm64 (default) or x86_64;  MEMORY_SIZE (256) MB;  TIMEOUT (300) s;  LOG_RETENTION_DAYS (30)
#   CORS_ALLOWED_ORIGINS  browser origins (comma-separated) the URLs answer CORS for, besides the page
#   EMBEDDING_MODELS  the models POST /v1/embeddings serves (default amazon.titan-embed-text-v2:0, as the template;
#                 empty: none), among amazon.titan-embed-text-v2:0, cohere.embed-english-v3,
#                 cohere.embed-multilingual-v3, cohere.embed-v4:0
#   KNOWLEDGE_BASE_ID, PAGE_OIDC_*, and any other setting of docs/configuration.md as EXTRA_ENV, a JSON
#   object ({"MAX_TOKENS":"2048"}) merged into every function's environment.
#
# The role grants what the template grants for what the functions are configured with (EXTRA_ENV's value, else the
# variable's): the model, the embedding models, ALLOWED_MODELS, GUARDRAIL_ID, KNOWLEDGE_BASE_ID (Retrieve) and, with
# DOCUMENTS_BUCKET and KNOWLEDGE_BASE_DATA_SOURCE_ID beside it, the uploads into that knowledge base.
#
# Needs: the AWS CLI, v2 2.31.13 or later (or v1 1.42.50 or later; both of October 2025), for `lambda
# add-permission --invoked-via-function-url`, the permission function URLs need since then; cargo-lambda from
# `make tools`; python3. It checks them first, before anything is built or created.
set -euo pipefail

cd "$(dirname "$0")/.."
command -v aws >/dev/null || {
  echo "create.sh: the AWS CLI (aws) is not on PATH; install AWS CLI v2, 2.31.13 or later" >&2; exit 2; }
# Asked offline: does this CLI know add-permission's InvokedViaFunctionUrl?
SKELETON=$(aws lambda add-permission --generate-cli-skeleton input 2>/dev/null || true)
case $SKELETON in
  *InvokedViaFunctionUrl*) ;;
  *) echo "create.sh: this AWS CLI is too old ($(aws --version 2>&1 | head -n 1)): it lacks 'aws lambda" \
       "add-permission --invoked-via-function-url', which function URLs need since October 2025. Install AWS CLI v2" \
       "2.31.13 or later (or v1 1.42.50 or later)." >&2
     exit 2 ;;
esac
[ -x .tools/venv/bin/cargo-lambda ] || command -v cargo-lambda >/dev/null || {
  echo "create.sh: cargo-lambda is missing; run 'make tools' first" >&2; exit 2; }
command -v python3 >/dev/null || { echo "create.sh: python3 is missing" >&2; exit 2; }
NAME=${NAME:-chat-backend}
REGION=${AWS_REGION:-${AWS_DEFAULT_REGION:-$(aws configure get region || true)}}
[ -n "$REGION" ] || { echo "create.sh: set AWS_REGION" >&2; exit 2; }
export AWS_REGION=$REGION AWS_DEFAULT_REGION=$REGION AWS_PAGER=""
AUTH_MODE=${AUTH_MODE:-iam}
MODEL_ID=${MODEL_ID:-global.anthropic.claude-haiku-4-5-20251001-v1:0}
ARCH=${ARCH:-arm64}
MEMORY_SIZE=${MEMORY_SIZE:-256}
TIMEOUT=${TIMEOUT:-300}
LOG_RETENTION_DAYS=${LOG_RETENTION_DAYS:-30}
EXTRA_ENV=${EXTRA_ENV:-"{}"}
EMBEDDING_MODELS=${EMBEDDING_MODELS-amazon.titan-embed-text-v2:0}
FUNCTIONS=(chat chat-stream history)
export EXTRA_ENV EMBEDDING_MODELS

# A setting as the functions get it: EXTRA_ENV's value, else the variable's (empty when neither sets it).
configured() {
  python3 -c 'import json, os, sys
extra = json.loads(os.environ["EXTRA_ENV"])
if not isinstance(extra, dict):
    sys.exit("create.sh: EXTRA_ENV is a JSON object of variables")
print(extra.get(sys.argv[1], os.environ.get(sys.argv[1], "")))' "$1"
}
EMBEDDINGS=$(configured EMBEDDING_MODELS)
for m in ${EMBEDDINGS//,/ }; do
  case $m in
    amazon.titan-embed-text-v2:0|cohere.embed-english-v3|cohere.embed-multilingual-v3|cohere.embed-v4:0) ;;
    *) echo "create.sh: EMBEDDING_MODELS names $m; the embedding models are amazon.titan-embed-text-v2:0," \
         "cohere.embed-english-v3, cohere.embed-multilingual-v3 and cohere.embed-v4:0" >&2; exit 2 ;;
  esac
done

case $AUTH_MODE in
  iam) URL_AUTH=AWS_IAM ;;
  jwt)
    URL_AUTH=NONE
    for v in JWT_ISSUER JWT_AUDIENCE JWKS_URL; do
      [ -n "${!v:-}" ] || { echo "create.sh: AUTH_MODE=jwt needs $v" >&2; exit 2; }
    done ;;
  *) echo "create.sh: AUTH_MODE is iam or jwt (none would make every caller one user)" >&2; exit 2 ;;
esac
case $ARCH in
  arm64) BUILD_ARCH=(--arm64) ;;
  x86_64) BUILD_ARCH=(--x86-64) ;;
  *) echo "create.sh: ARCH is arm64 or x86_64" >&2; exit 2 ;;
esac

# shellcheck source=deploy/names.sh
source deploy/names.sh
step() { printf '\n== %s\n' "$*"; }

step "build (cargo lambda build --release ${BUILD_ARCH[*]})"
PATH="$PWD/.tools/venv/bin:$PATH" cargo lambda build --release "${BUILD_ARCH[@]}" --output-format zip \
  -p chat -p chat-stream -p history

step "table $TABLE (on demand; pk/sk, the byUpdated index, TTL on expiresAt, point-in-time recovery)"
if ! aws dynamodb describe-table --table-name "$TABLE" >/dev/null 2>&1; then
  aws dynamodb create-table --table-name "$TABLE" --billing-mode PAY_PER_REQUEST \
    --attribute-definitions AttributeName=pk,AttributeType=S AttributeName=sk,AttributeType=S \
      AttributeName=gsi1pk,AttributeType=S AttributeName=gsi1sk,AttributeType=S \
    --key-schema AttributeName=pk,KeyType=HASH AttributeName=sk,KeyType=RANGE \
    --global-secondary-indexes \
      'IndexName=byUpdated,KeySchema=[{AttributeName=gsi1pk,KeyType=HASH},{AttributeName=gsi1sk,KeyType=RANGE}],Projection={ProjectionType=ALL}' \
    >/dev/null
  aws dynamodb wait table-exists --table-name "$TABLE"
  aws dynamodb update-time-to-live --table-name "$TABLE" \
    --time-to-live-specification Enabled=true,AttributeName=expiresAt >/dev/null
  aws dynamodb update-continuous-backups --table-name "$TABLE" \
    --point-in-time-recovery-specification PointInTimeRecoveryEnabled=true >/dev/null
fi
TABLE_ARN=$(aws dynamodb describe-table --table-name "$TABLE" --query Table.TableArn --output text)

step "bucket $BUCKET (the files of messages: private, encrypted, HTTPS only)"
if ! aws s3api head-bucket --bucket "$BUCKET" >/dev/null 2>&1; then
  if [ "$REGION" = us-east-1 ]; then
    aws s3api create-bucket --bucket "$BUCKET" >/dev/null
  else
    aws s3api create-bucket --bucket "$BUCKET" --create-bucket-configuration "LocationConstraint=$REGION" >/dev/null
  fi
fi
aws s3api put-public-access-block --bucket "$BUCKET" --public-access-block-configuration \
  BlockPublicAcls=true,IgnorePublicAcls=true,BlockPublicPolicy=true,RestrictPublicBuckets=true
aws s3api put-bucket-policy --bucket "$BUCKET" --policy "{\"Version\":\"2012-10-17\",\"Statement\":[{
  \"Sid\":\"DenyInsecureTransport\",\"Effect\":\"Deny\",\"Principal\":\"*\",\"Action\":\"s3:*\",
  \"Resource\":[\"arn:$PARTITION:s3:::$BUCKET\",\"arn:$PARTITION:s3:::$BUCKET/*\"],
  \"Condition\":{\"Bool\":{\"aws:SecureTransport\":\"false\"}}}]}"

step "role $ROLE (the template's statements, for the three functions together)"
# The configured model only: an inference profile (an id with a geography, or an ARN) by its ARN, and the
# foundation model in each Region it routes to only through it (`*` also matches a global profile's Region-less
# arn:aws:bedrock:::foundation-model/… ARN).
case $MODEL_ID in
  arn:*) PROFILE_ARN=$MODEL_ID ;;
  us.*|eu.*|apac.*|global.*|us-gov.*|jp.*|au.*|ca.*)
    PROFILE_ARN=arn:$PARTITION:bedrock:$REGION:$ACCOUNT:inference-profile/$MODEL_ID ;;
  *) PROFILE_ARN="" ;;
esac
if [ -n "$PROFILE_ARN" ]; then
  MODEL_STATEMENTS="{\"Sid\":\"InvokeTheConfiguredProfile\",\"Effect\":\"Allow\",
    \"Action\":[\"bedrock:InvokeModel\",\"bedrock:InvokeModelWithResponseStream\"],\"Resource\":[\"$PROFILE_ARN\"]},
   {\"Sid\":\"InvokeItsModelInEveryRegionOfTheProfile\",\"Effect\":\"Allow\",
    \"Action\":[\"bedrock:InvokeModel\",\"bedrock:InvokeModelWithResponseStream\"],
    \"Resource\":[\"arn:$PARTITION:bedrock:*::foundation-model/*\"],
    \"Condition\":{\"StringEquals\":{\"bedrock:InferenceProfileArn\":\"$PROFILE_ARN\"}}}"
else
  MODEL_STATEMENTS="{\"Sid\":\"InvokeTheConfiguredModel\",\"Effect\":\"Allow\",
    \"Action\":[\"bedrock:InvokeModel\",\"bedrock:InvokeModelWithResponseStream\"],
    \"Resource\":[\"arn:$PARTITION:bedrock:$REGION::foundation-model/$MODEL_ID\"]}"
fi
# What else the template grants, for what the functions are configured with.
MORE_STATEMENTS=""
# POST /v1/embeddings: InvokeModel on exactly the embedding models it serves.
if [ -n "$EMBEDDINGS" ]; then
  resources=""
  for m in ${EMBEDDINGS//,/ }; do
    resources+="${resources:+,}\"arn:$PARTITION:bedrock:$REGION::foundation-model/$m\""
  done
  MORE_STATEMENTS+=",{\"Sid\":\"EmbedWithTheConfiguredEmbeddingModels\",\"Effect\":\"Allow\",
    \"Action\":[\"bedrock:InvokeModel\"],\"Resource\":[$resources]}"
fi
# The models an OpenAI client may name: each as a foundation model and as an inference profile (an ARN as it is), and
# the foundation models in every Region a profile routes to only through such a profile.
ALLOWED=$(configured ALLOWED_MODELS)
if [ -n "$ALLOWED" ]; then
  resources="" profiles=""
  for m in ${ALLOWED//,/ }; do
    case $m in
      arn:*) resources+="${resources:+,}\"$m\""; profiles+="${profiles:+,}\"$m\"" ;;
      *) resources+="${resources:+,}\"arn:$PARTITION:bedrock:*::foundation-model/$m\",\"arn:$PARTITION:bedrock:*:*:inference-profile/$m\""
         profiles+="${profiles:+,}\"arn:$PARTITION:bedrock:*:*:inference-profile/$m\"" ;;
    esac
  done
  MORE_STATEMENTS+=",{\"Sid\":\"InvokeTheAllowedModels\",\"Effect\":\"Allow\",
    \"Action\":[\"bedrock:InvokeModel\",\"bedrock:InvokeModelWithResponseStream\"],\"Resource\":[$resources]},
   {\"Sid\":\"InvokeTheAllowedModelsInEveryRegionOfTheirProfiles\",\"Effect\":\"Allow\",
    \"Action\":[\"bedrock:InvokeModel\",\"bedrock:InvokeModelWithResponseStream\"],
    \"Resource\":[\"arn:$PARTITION:bedrock:*::foundation-model/*\"],
    \"Condition\":{\"StringLike\":{\"bedrock:InferenceProfileArn\":[$profiles]}}}"
fi
GUARDRAIL=$(configured GUARDRAIL_ID)
if [ -n "$GUARDRAIL" ]; then
  MORE_STATEMENTS+=",{\"Sid\":\"ApplyTheConfiguredGuardrail\",\"Effect\":\"Allow\",\"Action\":[\"bedrock:ApplyGuardrail\"],
    \"Resource\":[\"arn:$PARTITION:bedrock:$REGION:$ACCOUNT:guardrail/$GUARDRAIL\"]}"
fi
# The knowledge base when one is named: Retrieve; with its documents bucket and data source too, the uploads (the
# documents routes write and delete them in the bucket, and ingest, watch and remove them in that knowledge base
# only; they never read them back).
KB=$(configured KNOWLEDGE_BASE_ID)
if [ -n "$KB" ]; then
  KB_ARN=arn:$PARTITION:bedrock:$REGION:$ACCOUNT:knowledge-base/$KB
  MORE_STATEMENTS+=",{\"Sid\":\"RetrieveFromTheConfiguredKnowledgeBase\",\"Effect\":\"Allow\",\"Action\":[\"bedrock:Retrieve\"],
    \"Resource\":[\"$KB_ARN\"]}"
  DOCUMENTS=$(configured DOCUMENTS_BUCKET)
  if [ -n "$DOCUMENTS" ] && [ -n "$(configured KNOWLEDGE_BASE_DATA_SOURCE_ID)" ]; then
    MORE_STATEMENTS+=",{\"Sid\":\"KeepTheDocuments\",\"Effect\":\"Allow\",
    \"Action\":[\"s3:PutObject\",\"s3:DeleteObject\"],\"Resource\":[\"arn:$PARTITION:s3:::$DOCUMENTS/*\"]},
   {\"Sid\":\"IngestTheDocuments\",\"Effect\":\"Allow\",\"Action\":[\"bedrock:IngestKnowledgeBaseDocuments\",
    \"bedrock:GetKnowledgeBaseDocuments\",\"bedrock:DeleteKnowledgeBaseDocuments\"],
    \"Resource\":[\"$KB_ARN\"]}"
  fi
fi
POLICY="{\"Version\":\"2012-10-17\",\"Statement\":[
  {\"Sid\":\"ManageChats\",\"Effect\":\"Allow\",\"Action\":[\"dynamodb:GetItem\",\"dynamodb:BatchGetItem\",
    \"dynamodb:Query\",\"dynamodb:TransactWriteItems\",\"dynamodb:PutItem\",\"dynamodb:UpdateItem\",
    \"dynamodb:DeleteItem\",\"dynamodb:ConditionCheckItem\",\"dynamodb:BatchWriteItem\"],\"Resource\":[\"$TABLE_ARN\"]},
  {\"Sid\":\"ListChats\",\"Effect\":\"Allow\",\"Action\":[\"dynamodb:Query\"],\"Resource\":[\"$TABLE_ARN/index/byUpdated\"]},
  {\"Sid\":\"KeepTheFilesOfMessages\",\"Effect\":\"Allow\",\"Action\":[\"s3:PutObject\",\"s3:GetObject\",\"s3:DeleteObject\"],
    \"Resource\":[\"arn:$PARTITION:s3:::$BUCKET/*\"]},
  {\"Sid\":\"FindTheFilesOfAChat\",\"Effect\":\"Allow\",\"Action\":[\"s3:ListBucket\"],\"Resource\":[\"arn:$PARTITION:s3:::$BUCKET\"]},
  {\"Sid\":\"CountPromptTokens\",\"Effect\":\"Allow\",\"Action\":[\"bedrock:CountTokens\"],
    \"Resource\":[\"arn:$PARTITION:bedrock:$REGION::foundation-model/*\"]},
  {\"Sid\":\"WriteLogs\",\"Effect\":\"Allow\",\"Action\":[\"logs:CreateLogStream\",\"logs:PutLogEvents\"],
    \"Resource\":[\"arn:$PARTITION:logs:$REGION:$ACCOUNT:log-group:/aws/lambda/$NAME-*:*\"]},
  $MODEL_STATEMENTS$MORE_STATEMENTS]}"
if ! aws iam get-role --role-name "$ROLE" >/dev/null 2>&1; then
  aws iam create-role --role-name "$ROLE" --description "The chat backend's functions ($NAME)" \
    --assume-role-policy-document '{"Version":"2012-10-17","Statement":[{"Effect":"Allow",
      "Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}' >/dev/null
  NEW_ROLE=1
fi
aws iam put-role-policy --role-name "$ROLE" --policy-name chat-backend --policy-document "$POLICY"
ROLE_ARN=$(aws iam get-role --role-name "$ROLE" --query Role.Arn --output text)
# A new role takes a few seconds to be usable by Lambda.
[ -z "${NEW_ROLE:-}" ] || sleep "${ROLE_WAIT_SECONDS:-10}"

# Every function's environment: the settings above, the caller's EXTRA_ENV, and (history) the page's.
environment() {  # environment FUNCTION [PAGE_CHAT_URL PAGE_STREAM_URL]
  python3 - "$@" <<'PY'
import json, os, sys
env = {"TABLE_NAME": os.environ["TABLE"], "ATTACHMENTS_BUCKET": os.environ["BUCKET"],
       "MODEL_ID": os.environ["MODEL_ID"], "AUTH_MODE": os.environ["AUTH_MODE"],
       "EMBEDDING_MODELS": os.environ["EMBEDDING_MODELS"]}
for name in ("JWT_ISSUER", "JWT_AUDIENCE", "JWKS_URL", "KNOWLEDGE_BASE_ID", "PAGE_OIDC_CLIENT_ID", "PAGE_OIDC_ISSUER", "PAGE_OIDC_SCOPE", "PAGE_OIDC_TOKEN", "PAGE_OIDC_ORIGINS"):
    if os.environ.get(name):
        env[name] = os.environ[name]
env.update(json.loads(os.environ["EXTRA_ENV"]))
if sys.argv[1] == "history" and len(sys.argv) > 3:
    env["PAGE_CHAT_URL"], env["PAGE_STREAM_URL"] = sys.argv[2].rstrip("/"), sys.argv[3].rstrip("/")
print(json.dumps({"Variables": env}))
PY
}
export TABLE BUCKET MODEL_ID AUTH_MODE EXTRA_ENV

step "functions ${FUNCTIONS[*]/#/$NAME-} (provided.al2023, $ARCH)"
for f in "${FUNCTIONS[@]}"; do
  fn=$NAME-$f
  aws logs create-log-group --log-group-name "/aws/lambda/$fn" 2>/dev/null || true
  aws logs put-retention-policy --log-group-name "/aws/lambda/$fn" --retention-in-days "$LOG_RETENTION_DAYS"
  zip=fileb://target/lambda/$f/bootstrap.zip
  if aws lambda get-function --function-name "$fn" >/dev/null 2>&1; then
    aws lambda update-function-code --function-name "$fn" --zip-file "$zip" --architectures "$ARCH" >/dev/null
    aws lambda wait function-updated-v2 --function-name "$fn"
    aws lambda update-function-configuration --function-name "$fn" --role "$ROLE_ARN" \
      --memory-size "$MEMORY_SIZE" --timeout "$TIMEOUT" --environment "$(environment "$f")" >/dev/null
  else
    for attempt in 1 2 3 4 5 6; do  # until the new role can be assumed
      if aws lambda create-function --function-name "$fn" --runtime provided.al2023 --handler bootstrap \
          --architectures "$ARCH" --role "$ROLE_ARN" --zip-file "$zip" --memory-size "$MEMORY_SIZE" \
          --timeout "$TIMEOUT" --environment "$(environment "$f")" \
          --logging-config LogFormat=JSON,ApplicationLogLevel=INFO,SystemLogLevel=WARN >/dev/null; then
        break
      fi
      [ "$attempt" -lt 6 ] || exit 1
      sleep 10
    done
  fi
  aws lambda wait function-updated-v2 --function-name "$fn"
done

step "function URLs (AuthType $URL_AUTH; chat-stream RESPONSE_STREAM)"
url() {  # url FUNCTION INVOKE_MODE: creates or updates the URL, prints it
  local fn=$NAME-$1 cors=() origins="" o methods='"POST"'
  # The URL answers CORS (the functions then add nothing: CORS_ALLOWED_ORIGINS stays out of their environment):
  # for CORS_ALLOWED_ORIGINS, and, with sign-in, for the page (the history URL), which calls the chat URLs.
  IFS=, read -ra extra <<<"${CORS_ALLOWED_ORIGINS:-}"
  for o in "${extra[@]}"; do [ -z "$o" ] || origins="$origins${origins:+,}\"$o\""; done
  if [ "$1" = history ]; then
    methods='"GET","POST","PUT","PATCH","DELETE"'
  elif [ "$AUTH_MODE" = jwt ] && [ -n "${PAGE_ORIGIN:-}" ]; then
    origins="$origins${origins:+,}\"$PAGE_ORIGIN\""
  fi
  if [ -n "$origins" ]; then
    cors=(--cors "{\"AllowOrigins\":[$origins],\"AllowMethods\":[$methods],\"ExposeHeaders\":[\"x-next-cursor\"],
      \"AllowHeaders\":[\"content-type\",\"accept\",\"authorization\",\"x-amz-date\",\"x-amz-security-token\",
      \"x-amz-content-sha256\"],\"MaxAge\":300}")
  fi
  if aws lambda get-function-url-config --function-name "$fn" >/dev/null 2>&1; then
    aws lambda update-function-url-config --function-name "$fn" --auth-type "$URL_AUTH" --invoke-mode "$2" \
      "${cors[@]}" --query FunctionUrl --output text
  else
    aws lambda create-function-url-config --function-name "$fn" --auth-type "$URL_AUTH" --invoke-mode "$2" \
      "${cors[@]}" --query FunctionUrl --output text
  fi
}
HISTORY_URL=$(url history BUFFERED)
PAGE_ORIGIN=${HISTORY_URL%/}
CHAT_URL=$(url chat BUFFERED)
STREAM_URL=$(url chat-stream RESPONSE_STREAM)
# The page learns the chat URLs from the history function's environment.
aws lambda update-function-configuration --function-name "$NAME-history" \
  --environment "$(environment history "$CHAT_URL" "$STREAM_URL")" >/dev/null
aws lambda wait function-updated-v2 --function-name "$NAME-history"

# Who may call the URLs. Since October 2025 a URL's caller needs lambda:InvokeFunctionUrl AND lambda:InvokeFunction
# (the latter only through the URL). jwt: the public gets both and the functions check the token. iam: nobody is
# granted anything on the functions; callers get the managed policy below. (The old recipe, `cargo lambda deploy
# --enable-function-url`, made a public URL in front of functions left in their default AUTH_MODE=iam, which find no
# IAM caller on a public URL: a 401 for every call.)
step "permissions ($AUTH_MODE)"
USERS_POLICY_ARN=arn:$PARTITION:iam::$ACCOUNT:policy/$NAME-chat-users
for f in "${FUNCTIONS[@]}"; do
  fn=$NAME-$f
  aws lambda remove-permission --function-name "$fn" --statement-id public-url >/dev/null 2>&1 || true
  aws lambda remove-permission --function-name "$fn" --statement-id public-invoke-via-url >/dev/null 2>&1 || true
  if [ "$AUTH_MODE" = jwt ]; then
    aws lambda add-permission --function-name "$fn" --statement-id public-url --principal '*' \
      --action lambda:InvokeFunctionUrl --function-url-auth-type NONE >/dev/null
    aws lambda add-permission --function-name "$fn" --statement-id public-invoke-via-url --principal '*' \
      --action lambda:InvokeFunction --invoked-via-function-url >/dev/null
  fi
done
if [ "$AUTH_MODE" = iam ]; then
  FN_ARNS="\"arn:$PARTITION:lambda:$REGION:$ACCOUNT:function:$NAME-chat\",
    \"arn:$PARTITION:lambda:$REGION:$ACCOUNT:function:$NAME-chat-stream\",
    \"arn:$PARTITION:lambda:$REGION:$ACCOUNT:function:$NAME-history\""
  USERS_POLICY="{\"Version\":\"2012-10-17\",\"Statement\":[
    {\"Sid\":\"CallTheFunctionUrls\",\"Effect\":\"Allow\",\"Action\":\"lambda:InvokeFunctionUrl\",\"Resource\":[$FN_ARNS]},
    {\"Sid\":\"InvokeOnlyThroughTheFunctionUrls\",\"Effect\":\"Allow\",\"Action\":\"lambda:InvokeFunction\",
     \"Resource\":[$FN_ARNS],\"Condition\":{\"Bool\":{\"lambda:InvokedViaFunctionUrl\":\"true\"}}}]}"
  if ! aws iam get-policy --policy-arn "$USERS_POLICY_ARN" >/dev/null 2>&1; then
    aws iam create-policy --policy-name "$NAME-chat-users" --policy-document "$USERS_POLICY" \
      --description "Calls the chat backend's function URLs ($NAME) with SigV4, and its functions only through them" \
      >/dev/null
  fi
fi

step "done"
echo "ChatFunctionUrl        $CHAT_URL"
echo "ChatStreamFunctionUrl  $STREAM_URL"
echo "HistoryFunctionUrl     $HISTORY_URL"
echo "PageUrl                $HISTORY_URL"
echo "ChatTableName          $TABLE"
echo "AttachmentsBucketName  $BUCKET"
if [ "$AUTH_MODE" = iam ]; then
  echo "ChatUserPolicyArn      $USERS_POLICY_ARN  (attach it to the users or roles that chat)"
fi
