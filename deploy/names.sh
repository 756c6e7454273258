# shellcheck shell=bash
# Sourced by deploy/create.sh and deploy/remove.sh so both name the same resources: what create.sh makes for NAME in
# REGION is what remove.sh finds and removes.
# shellcheck disable=SC2034  # the names are read by the scripts that source this file
ACCOUNT=$(aws sts get-caller-identity --query Account --output text)
PARTITION=$(aws sts get-caller-identity --query Arn --output text | cut -d: -f2)
TABLE=$NAME
BUCKET=$NAME-files-$ACCOUNT-$REGION
ROLE=$NAME-functions
