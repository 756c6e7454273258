#!/usr/bin/env bash
# Removes what deploy/create.sh made for NAME (default chat-backend) in AWS_REGION: the three functions (their URLs
# and permissions go with them), their log groups, the role, and the chat users' policy. The table and the files'
# bucket hold the chats: they are kept (as `sam delete` keeps the stack's) unless --delete-data is given.
#
#   deploy/remove.sh                 # keeps the table NAME and the bucket NAME-files-ACCOUNT-REGION
#   deploy/remove.sh --delete-data   # deletes them too: every chat and file, for good
set -euo pipefail

NAME=${NAME:-chat-backend}
REGION=${AWS_REGION:-${AWS_DEFAULT_REGION:-$(aws configure get region || true)}}
[ -n "$REGION" ] || { echo "remove.sh: set AWS_REGION" >&2; exit 2; }
export AWS_REGION=$REGION AWS_DEFAULT_REGION=$REGION AWS_PAGER=""
DELETE_DATA=""
case "${1:-}" in
  "") ;;
  --delete-data) DELETE_DATA=1 ;;
  *) echo "usage: remove.sh [--delete-data]" >&2; exit 2 ;;
esac

# shellcheck source=deploy/names.sh
source "$(dirname "$0")/names.sh"
USERS_POLICY_ARN=arn:$PARTITION:iam::$ACCOUNT:policy/$NAME-chat-users

for f in chat chat-stream history; do
  fn=$NAME-$f
  if aws lambda get-function --function-name "$fn" >/dev/null 2>&1; then
    aws lambda delete-function --function-name "$fn"  # its URL and permissions with it
    echo "deleted function $fn"
  fi
  if aws logs delete-log-group --log-group-name "/aws/lambda/$fn" 2>/dev/null; then
    echo "deleted log group /aws/lambda/$fn"
  fi
done

if aws iam get-role --role-name "$ROLE" >/dev/null 2>&1; then
  aws iam delete-role-policy --role-name "$ROLE" --policy-name chat-backend 2>/dev/null || true
  aws iam delete-role --role-name "$ROLE"
  echo "deleted role $ROLE"
fi

if aws iam get-policy --policy-arn "$USERS_POLICY_ARN" >/dev/null 2>&1; then
  attached=$(aws iam list-entities-for-policy --policy-arn "$USERS_POLICY_ARN" \
    --query 'length(PolicyUsers) + length(PolicyGroups) + length(PolicyRoles)' --output text)
  if [ "$attached" != 0 ]; then
    echo "kept policy $USERS_POLICY_ARN: still attached to $attached users, groups or roles (detach it first)" >&2
  else
    aws iam delete-policy --policy-arn "$USERS_POLICY_ARN"
    echo "deleted policy $USERS_POLICY_ARN"
  fi
fi

if [ -n "$DELETE_DATA" ]; then
  if aws dynamodb describe-table --table-name "$TABLE" >/dev/null 2>&1; then
    aws dynamodb delete-table --table-name "$TABLE" >/dev/null
    aws dynamodb wait table-not-exists --table-name "$TABLE"
    echo "deleted table $TABLE"
  fi
  if aws s3api head-bucket --bucket "$BUCKET" >/dev/null 2>&1; then
    aws s3 rm "s3://$BUCKET" --recursive --quiet
    aws s3api delete-bucket --bucket "$BUCKET"
    echo "deleted bucket $BUCKET"
  fi
else
  echo "kept table $TABLE and bucket $BUCKET (the chats and their files): remove.sh --delete-data deletes them"
fi
